package isotonic

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Map is a fitted monotone non-decreasing map. Knots are strictly increasing
// in X and non-decreasing in Y. A Map with no knots is the identity.
// It is a plain value so that it can be stored (JSON).
type Map struct {
	X []float64 `json:"x"`
	Y []float64 `json:"y"`
}

// Identity reports whether m maps every score to itself (no knots).
func (m Map) Identity() bool { return len(m.X) == 0 }

// Apply maps v through m: linear interpolation between knots, clamped to the
// first and last knot outside the fitted range. The identity map returns v.
func (m Map) Apply(v float64) float64 {
	n := len(m.X)
	switch {
	case n == 0:
		return v
	case v <= m.X[0]:
		return m.Y[0]
	case v >= m.X[n-1]:
		return m.Y[n-1]
	}
	// Smallest i with X[i] > v; 1 <= i <= n-1.
	i, _ := slices.BinarySearch(m.X, v)
	if m.X[i] == v {
		return m.Y[i]
	}
	x0, x1 := m.X[i-1], m.X[i]
	y0, y1 := m.Y[i-1], m.Y[i]
	// Rounding can overshoot y1 by an ulp near the right knot; clamping to
	// [y0, y1] keeps Apply non-decreasing across segments.
	return min(max(y0+(y1-y0)*(v-x0)/(x1-x0), y0), y1)
}

// ApplyAll maps every element of src into dst, which must have the same length.
func (m Map) ApplyAll(dst, src []float64) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("isotonic: ApplyAll length mismatch: dst %d, src %d", len(dst), len(src)))
	}
	for i, v := range src {
		dst[i] = m.Apply(v)
	}
}

// Validate checks the Map invariants: equal lengths, finite values, X strictly
// increasing, Y non-decreasing.
func (m Map) Validate() error {
	if len(m.X) != len(m.Y) {
		return fmt.Errorf("knots: %d x values but %d y values", len(m.X), len(m.Y))
	}
	for i := range m.X {
		if !finite(m.X[i]) || !finite(m.Y[i]) {
			return fmt.Errorf("knot %d: not finite (%v, %v)", i, m.X[i], m.Y[i])
		}
		if i > 0 && m.X[i] <= m.X[i-1] {
			return fmt.Errorf("knot %d: x %v not above previous %v", i, m.X[i], m.X[i-1])
		}
		if i > 0 && m.Y[i] < m.Y[i-1] {
			return fmt.Errorf("knot %d: y %v below previous %v", i, m.Y[i], m.Y[i-1])
		}
	}
	return nil
}

// ErrEmpty is returned when there is nothing to fit.
var ErrEmpty = errors.New("no points to fit")

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func checkInput(x, y, w []float64) error {
	if len(x) != len(y) {
		return fmt.Errorf("%d x values but %d y values", len(x), len(y))
	}
	if w != nil && len(w) != len(x) {
		return fmt.Errorf("%d weights for %d points", len(w), len(x))
	}
	if len(x) == 0 {
		return ErrEmpty
	}
	for i := range x {
		if !finite(x[i]) {
			return fmt.Errorf("point %d: x is %v", i, x[i])
		}
		if !finite(y[i]) {
			return fmt.Errorf("point %d: y is %v", i, y[i])
		}
		if w != nil && (!finite(w[i]) || w[i] <= 0) {
			return fmt.Errorf("point %d: weight %v is not positive", i, w[i])
		}
	}
	return nil
}

// FitBinned is the binned variant kept for parity with published code: x is
// cut into bins equal-width bins on [0,1] with the reference's edges (binOf;
// values outside are clamped into the end bins), each non-empty bin becomes one point at its mean x with the mean
// y, weighted by its count, and the points are fitted by Fit.
func FitBinned(x, y []float64, bins int) (Map, error) {
	return FitBinnedWeighted(x, y, nil, bins)
}

// FitBinnedWeighted is FitBinned with weights: each bin's point is at the
// weighted mean x with the weighted mean y, weighted by the bin's summed
// weight. w may be nil for unit weights (FitBinned).
func FitBinnedWeighted(x, y, w []float64, bins int) (Map, error) {
	if bins < 1 {
		return Map{}, fmt.Errorf("bins must be at least 1, got %d", bins)
	}
	if err := checkInput(x, y, w); err != nil {
		return Map{}, err
	}
	sx := make([]float64, bins)
	sy := make([]float64, bins)
	cnt := make([]float64, bins)
	for i, v := range x {
		b := binOf(v, bins)
		wi := 1.0
		if w != nil {
			wi = w[i]
		}
		sx[b] += wi * v
		sy[b] += wi * y[i]
		cnt[b] += wi
	}
	es := make([]item[yw], 0, bins)
	for b := range bins {
		if cnt[b] > 0 {
			es = append(es, item[yw]{k: sortKey(sx[b] / cnt[b]), v: yw{sy[b] / cnt[b], cnt[b]}})
		}
	}
	// Bin means increase with the bin index, but a rounded mean can pass the
	// next bin's by an ulp in degenerate cases: sort to be safe (ties pool).
	return fitWeighted(sortItems(es))
}

// binOf returns the equal-width bin of v on [0,1] as the reference
// implementation finds it: numpy.digitize(v, numpy.linspace(0, 1, bins+1))
// - 1, clipped to [0, bins-1]. Bin b holds edge(b) <= v < edge(b+1) with
// numpy's edges, edge(k) = k·(1/bins) in float64 (and edge(bins) = 1), so a
// score exactly on a decimal edge falls where numpy puts it: with 10 bins,
// 0.3 and 0.6 are below their edges 0.30000000000000004 and
// 0.6000000000000001 and go to bins 2 and 5. It compares in float64 first
// so that huge values do not overflow the int conversion.
func binOf(v float64, bins int) int {
	step := 1 / float64(bins)
	edge := func(k int) float64 {
		if k == bins {
			return 1
		}
		return float64(k) * step
	}
	f := v * float64(bins)
	switch {
	case !(f >= 1): // also NaN
		if bins > 1 && v >= edge(1) {
			return 1
		}
		return 0
	case f >= float64(bins):
		return bins - 1
	}
	b := int(f)
	for b > 0 && v < edge(b) {
		b--
	}
	for b < bins-1 && v >= edge(b+1) {
		b++
	}
	return b
}
