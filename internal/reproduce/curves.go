package reproduce

import (
	"sort"

	"github.com/wmrl/wmrl/internal/mode"
)

// Point is one point of a curve.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Curve is a named series of points, in increasing X.
type Curve struct {
	Name   string  `json:"name"`
	Points []Point `json:"points"`
}

// meanBy averages, for every key in keys, the values gathered under it.
func meanBy(keys []int, xs, ys map[int][]float64) []Point {
	pts := make([]Point, 0, len(keys))
	for _, k := range keys {
		pts = append(pts, Point{X: mean(xs[k]), Y: mean(ys[k])})
	}
	return pts
}

func mean(xs []float64) float64 { return MeanSD(xs).Mean }

func sortedKeys(m map[int][]float64) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// perMode groups records by mode in mode.All's order (modes without records
// are left out).
func perMode(rs []Record) [][]Record {
	var out [][]Record
	for _, m := range mode.All() {
		var g []Record
		for _, r := range sortedRecords(rs) {
			if r.Mode == m {
				g = append(g, r)
			}
		}
		if len(g) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// HeldOutByStep returns, per mode, the mean over seeds of the held-out score
// after each evaluated step (X: completed steps, the checkpoint version).
func HeldOutByStep(rs []Record) []Curve {
	var out []Curve
	for _, g := range perMode(rs) {
		xs, ys := map[int][]float64{}, map[int][]float64{}
		for _, r := range g {
			for _, s := range r.Steps {
				if s.HeldOut != nil {
					v := s.Step + 1
					xs[v] = append(xs[v], float64(v))
					ys[v] = append(ys[v], *s.HeldOut)
				}
			}
		}
		out = append(out, Curve{Name: string(g[0].Mode), Points: meanBy(sortedKeys(ys), xs, ys)})
	}
	return out
}

// HeldOutByCPU returns, per mode, the mean over seeds of the held-out score
// after each evaluated step against the mean training sandbox CPU-seconds
// spent up to it.
func HeldOutByCPU(rs []Record) []Curve {
	var out []Curve
	for _, g := range perMode(rs) {
		xs, ys := map[int][]float64{}, map[int][]float64{}
		for _, r := range g {
			cpu := 0.0
			for _, s := range r.Steps {
				cpu += s.CPUSeconds
				if s.HeldOut != nil {
					v := s.Step + 1
					xs[v] = append(xs[v], cpu)
					ys[v] = append(ys[v], *s.HeldOut)
				}
			}
		}
		pts := meanBy(sortedKeys(ys), xs, ys)
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		out = append(out, Curve{Name: string(g[0].Mode), Points: pts})
	}
	return out
}

// StepSeries returns, for the records of mode m, the mean over seeds of
// f(step) at each step.
func StepSeries(rs []Record, m mode.Mode, name string, f func(StepRecord) float64) Curve {
	xs, ys := map[int][]float64{}, map[int][]float64{}
	for _, r := range rs {
		if r.Mode != m {
			continue
		}
		for _, s := range r.Steps {
			xs[s.Step] = append(xs[s.Step], float64(s.Step))
			ys[s.Step] = append(ys[s.Step], f(s))
		}
	}
	return Curve{Name: name, Points: meanBy(sortedKeys(ys), xs, ys)}
}
