package debias

import (
	"math"

	"github.com/wmrl/wmrl/internal/isotonic"
)

// Bias returns the within-group centred residual before and after
// calibration by m: the root mean square, over every pair whose group holds
// at least two pairs, of (x - mean_g x) - (y - mean_g y), with x = WM
// (before) or m.Apply(WM) (after), y = Env, and means taken within the pair's
// group. Pairs without a group ("") and groups of one pair are left out (a
// single pair has no within-group residual). ok is false when no group has
// two pairs or more; before and after are then 0.
func Bias(pairs []Pair, m isotonic.Map) (before, after float64, ok bool) {
	// Group index in order of first appearance: sums follow pair order, so
	// the result does not depend on map iteration.
	idx := make(map[string]int)
	type acc struct {
		n             int
		raw, cal, env float64 // sums, then means
	}
	var gs []acc
	gi := make([]int, len(pairs))
	cal := make([]float64, len(pairs))
	for i, p := range pairs {
		gi[i] = -1
		if p.Group == "" {
			continue
		}
		k, seen := idx[p.Group]
		if !seen {
			k = len(gs)
			idx[p.Group] = k
			gs = append(gs, acc{})
		}
		gi[i] = k
		cal[i] = m.Apply(p.WM)
		g := &gs[k]
		g.n++
		g.raw += p.WM
		g.cal += cal[i]
		g.env += p.Env
	}
	for k := range gs {
		g := &gs[k]
		n := float64(g.n)
		g.raw, g.cal, g.env = g.raw/n, g.cal/n, g.env/n
	}
	var sb, sa float64
	var n int
	for i, p := range pairs {
		k := gi[i]
		if k < 0 || gs[k].n < 2 {
			continue
		}
		g := gs[k]
		ry := p.Env - g.env
		rb := (p.WM - g.raw) - ry
		ra := (cal[i] - g.cal) - ry
		sb += rb * rb
		sa += ra * ra
		n++
	}
	if n == 0 {
		return 0, 0, false
	}
	return math.Sqrt(sb / float64(n)), math.Sqrt(sa / float64(n)), true
}

// MeanBias returns the mean of x - Env over all pairs, weighted by the
// pairs' weights (a plain mean when none has one), with x = WM (before) or
// m.Apply(WM) (after). ok is false when pairs is empty.
func MeanBias(pairs []Pair, m isotonic.Map) (before, after float64, ok bool) {
	if len(pairs) == 0 {
		return 0, 0, false
	}
	var sb, sa, n float64
	for _, p := range pairs {
		w := p.W()
		sb += w * (p.WM - p.Env)
		sa += w * (m.Apply(p.WM) - p.Env)
		n += w
	}
	return sb / n, sa / n, true
}
