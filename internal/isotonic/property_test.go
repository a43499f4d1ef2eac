package isotonic

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// genInput draws n points whose x values come from a small grid (many ties)
// or from a continuous range, with unit (nil) or random positive weights.
func genInput(t *rapid.T, minN, maxN int) (x, y, w []float64) {
	n := rapid.IntRange(minN, maxN).Draw(t, "n")
	grid := rapid.Bool().Draw(t, "grid")
	x = make([]float64, n)
	y = make([]float64, n)
	for i := range n {
		if grid {
			x[i] = float64(rapid.IntRange(-3, 3).Draw(t, "xi")) / 4
		} else {
			x[i] = rapid.Float64Range(-2, 2).Draw(t, "xi")
		}
		y[i] = rapid.Float64Range(-1, 1).Draw(t, "yi")
	}
	if rapid.Bool().Draw(t, "weighted") {
		w = make([]float64, n)
		for i := range n {
			w[i] = rapid.Float64Range(0.05, 4).Draw(t, "wi")
		}
	}
	return x, y, w
}

func weight(w []float64, i int) float64 {
	if w == nil {
		return 1
	}
	return w[i]
}

// bruteForce returns the isotonic least-squares value at each input point by
// the min-max formula f_i = max_{j<=i} min_{k>=i} mean(j..k) on the
// tie-pooled points, a characterisation independent of pool adjacent
// violators.
func bruteForce(x, y, w []float64) []float64 {
	type pt struct{ x, sy, sw float64 }
	var u []pt
	for i := range x {
		found := false
		for j := range u {
			if u[j].x == x[i] {
				u[j].sy += weight(w, i) * y[i]
				u[j].sw += weight(w, i)
				found = true
			}
		}
		if !found {
			u = append(u, pt{x[i], weight(w, i) * y[i], weight(w, i)})
		}
	}
	slices.SortFunc(u, func(a, b pt) int { return cmp.Compare(a.x, b.x) })
	f := make([]float64, len(u))
	for i := range u {
		best := math.Inf(-1)
		for j := 0; j <= i; j++ {
			low := math.Inf(1)
			for k := i; k < len(u); k++ {
				var sy, sw float64
				for l := j; l <= k; l++ {
					sy += u[l].sy
					sw += u[l].sw
				}
				low = min(low, sy/sw)
			}
			best = max(best, low)
		}
		f[i] = best
	}
	out := make([]float64, len(x))
	for i := range x {
		for j := range u {
			if u[j].x == x[i] {
				out[i] = f[j]
			}
		}
	}
	return out
}

func TestPropFitMonotoneAndValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x, y, w := genInput(t, 1, 300)
		m, err := Fit(x, y, w)
		if err != nil {
			t.Fatalf("Fit: %v", err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Validate: %v (map %+v)", err, m)
		}
		qs := rapid.SliceOfN(rapid.Float64Range(-3, 3), 1, 50).Draw(t, "queries")
		slices.Sort(qs)
		for i := 1; i < len(qs); i++ {
			if a, b := m.Apply(qs[i-1]), m.Apply(qs[i]); b < a {
				t.Fatalf("Apply(%v) = %v < Apply(%v) = %v", qs[i], b, qs[i-1], a)
			}
		}
	})
}

func TestPropFitEqualsBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x, y, w := genInput(t, 1, 8)
		m, err := Fit(x, y, w)
		if err != nil {
			t.Fatalf("Fit: %v", err)
		}
		want := bruteForce(x, y, w)
		for i := range x {
			if got := m.Apply(x[i]); math.Abs(got-want[i]) > 1e-9 {
				t.Fatalf("point %d (x=%v): Fit gives %v, brute force %v", i, x[i], got, want[i])
			}
		}
	})
}

func TestPropFitPreservesWeightedMean(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x, y, w := genInput(t, 1, 300)
		m, err := Fit(x, y, w)
		if err != nil {
			t.Fatalf("Fit: %v", err)
		}
		var sw, sy, sf float64
		for i := range x {
			sw += weight(w, i)
			sy += weight(w, i) * y[i]
			sf += weight(w, i) * m.Apply(x[i])
		}
		if d := math.Abs(sy/sw - sf/sw); d > 1e-9 {
			t.Fatalf("weighted mean of data %v, of fit %v (diff %v)", sy/sw, sf/sw, d)
		}
	})
}

func TestPropFitPermutationInvariant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x, y, w := genInput(t, 1, 300)
		m, err := Fit(x, y, w)
		if err != nil {
			t.Fatalf("Fit: %v", err)
		}
		perm := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1)).Perm(len(x))
		px, py := make([]float64, len(x)), make([]float64, len(x))
		var pw []float64
		if w != nil {
			pw = make([]float64, len(x))
		}
		for i, j := range perm {
			px[i], py[i] = x[j], y[j]
			if w != nil {
				pw[i] = w[j]
			}
		}
		pm, err := Fit(px, py, pw)
		if err != nil {
			t.Fatalf("Fit permuted: %v", err)
		}
		if !slices.Equal(m.X, pm.X) {
			t.Fatalf("knots differ: %v vs %v", m.X, pm.X)
		}
		for i := range m.Y {
			if math.Abs(m.Y[i]-pm.Y[i]) > 1e-12 {
				t.Fatalf("knot %d: %v vs %v", i, m.Y[i], pm.Y[i])
			}
		}
	})
}

// genMap draws a valid Map with 1 to 10 knots.
func genMap(t *rapid.T) Map {
	n := rapid.IntRange(1, 10).Draw(t, "knots")
	xs := rapid.SliceOfNDistinct(rapid.Float64Range(-5, 5), n, n, func(v float64) float64 { return v }).Draw(t, "x")
	ys := rapid.SliceOfN(rapid.Float64Range(-5, 5), n, n).Draw(t, "y")
	slices.Sort(xs)
	slices.Sort(ys)
	return Map{X: xs, Y: ys}
}

func TestPropApplyClampsAndInterpolates(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMap(t)
		n := len(m.X)
		below := rapid.Float64Range(-100, m.X[0]).Draw(t, "below")
		above := rapid.Float64Range(m.X[n-1], 100).Draw(t, "above")
		if got := m.Apply(below); got != m.Y[0] {
			t.Fatalf("Apply(%v) below range = %v, want %v", below, got, m.Y[0])
		}
		if got := m.Apply(above); got != m.Y[n-1] {
			t.Fatalf("Apply(%v) above range = %v, want %v", above, got, m.Y[n-1])
		}
		for i := range n {
			if got := m.Apply(m.X[i]); got != m.Y[i] {
				t.Fatalf("Apply at knot %d = %v, want %v", i, got, m.Y[i])
			}
		}
		if n < 2 {
			return
		}
		i := rapid.IntRange(1, n-1).Draw(t, "segment")
		s := rapid.Float64Range(0, 1).Draw(t, "s")
		// Rounding can push v just past a knot; keep it in the segment.
		v := min(max(m.X[i-1]+s*(m.X[i]-m.X[i-1]), m.X[i-1]), m.X[i])
		want := m.Y[i-1] + (v-m.X[i-1])/(m.X[i]-m.X[i-1])*(m.Y[i]-m.Y[i-1])
		if got := m.Apply(v); math.Abs(got-want) > 1e-9 {
			t.Fatalf("Apply(%v) between knots %d and %d = %v, want %v", v, i-1, i, got, want)
		}
	})
}

func TestPropFitBinned(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 200).Draw(t, "n")
		bins := rapid.IntRange(1, 20).Draw(t, "bins")
		x := rapid.SliceOfN(rapid.Float64Range(0, 1), n, n).Draw(t, "x")
		y := rapid.SliceOfN(rapid.Float64Range(0, 1), n, n).Draw(t, "y")
		m, err := FitBinned(x, y, bins)
		if err != nil {
			t.Fatalf("FitBinned: %v", err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		// Reference: bin b holds the x with floor(x*bins) == b (1 goes to the
		// last bin); each bin is one point at its mean, weighted by its count.
		var bx, by, bw []float64
		for b := range bins {
			var sx, sy, c float64
			for i, v := range x {
				if k := min(math.Floor(v*float64(bins)), float64(bins-1)); k == float64(b) {
					sx += v
					sy += y[i]
					c++
				}
			}
			if c > 0 {
				bx = append(bx, sx/c)
				by = append(by, sy/c)
				bw = append(bw, c)
			}
		}
		want, err := Fit(bx, by, bw)
		if err != nil {
			t.Fatalf("reference Fit: %v", err)
		}
		for _, q := range append(slices.Clone(x), 0, 0.5, 1) {
			if g, w := m.Apply(q), want.Apply(q); math.Abs(g-w) > 1e-9 {
				t.Fatalf("Apply(%v) = %v, reference %v", q, g, w)
			}
		}
	})
}
