package tabular

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/program"
)

// fitStep fits one preprocessing step on the train matrix and applies it to
// both matrices. The inputs are not modified.
func fitStep(ctx context.Context, op program.Op, xtr, xte *mat.Dense, y []float64) (*mat.Dense, *mat.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	var f func(*mat.Dense) *mat.Dense
	switch op.Name {
	case "standardize":
		mean, sd := colStats(xtr)
		f = func(x *mat.Dense) *mat.Dense {
			return mapCols(x, func(j int, v float64) float64 { return (v - mean[j]) / sd[j] })
		}
	case "clip":
		center, scale := robustStats(xtr)
		z := op.Param("z")
		f = func(x *mat.Dense) *mat.Dense {
			return mapCols(x, func(j int, v float64) float64 {
				return math.Max(center[j]-z*scale[j], math.Min(center[j]+z*scale[j], v))
			})
		}
	case "log1p":
		f = func(x *mat.Dense) *mat.Dense {
			return mapCols(x, func(_ int, v float64) float64 {
				return math.Copysign(math.Log1p(math.Abs(v)), v)
			})
		}
	case "poly":
		_, c := xtr.Dims()
		terms := monomials(c, op.Int("degree"))
		if terms == nil {
			return nil, nil, fmt.Errorf("%w: poly degree=%d on %d features gives more than %d features",
				ErrResources, op.Int("degree"), c, MaxFeatures)
		}
		f = func(x *mat.Dense) *mat.Dense { return expand(x, terms) }
	case "select":
		cols := selectCols(xtr, y, op.Int("k"))
		f = func(x *mat.Dense) *mat.Dense { return pick(x, cols) }
	case "pca":
		mean, _ := colStats(xtr)
		v, err := principalAxes(xtr, mean, op.Int("k"))
		if err != nil {
			return nil, nil, err
		}
		f = func(x *mat.Dense) *mat.Dense {
			c := mapCols(x, func(j int, v float64) float64 { return v - mean[j] })
			r, _ := x.Dims()
			_, k := v.Dims()
			out := mat.NewDense(r, k, nil)
			out.Mul(c, v)
			return out
		}
	default:
		panic(fmt.Sprintf("tabular: unhandled step %q", op.Name))
	}
	ntr, nte := f(xtr), f(xte)
	if err := checkSize(ntr, nte); err != nil {
		return nil, nil, err
	}
	if !allFinite(ntr.RawMatrix().Data) || !allFinite(nte.RawMatrix().Data) {
		return nil, nil, fmt.Errorf("%w: non-finite features", ErrNumerical)
	}
	return ntr, nte, nil
}

func checkSize(xtr, xte *mat.Dense) error {
	rtr, c := xtr.Dims()
	rte, _ := xte.Dims()
	if c > MaxFeatures {
		return fmt.Errorf("%w: %d features, limit %d", ErrResources, c, MaxFeatures)
	}
	if (rtr+rte)*c > MaxCells {
		return fmt.Errorf("%w: %d cells, limit %d", ErrResources, (rtr+rte)*c, MaxCells)
	}
	return nil
}

// colStats returns the mean and population standard deviation of each
// column; a constant column gets standard deviation 1.
func colStats(x *mat.Dense) (mean, sd []float64) {
	r, c := x.Dims()
	mean, sd = make([]float64, c), make([]float64, c)
	for j := 0; j < c; j++ {
		var s float64
		for i := 0; i < r; i++ {
			s += x.At(i, j)
		}
		m := s / float64(r)
		var ss float64
		for i := 0; i < r; i++ {
			d := x.At(i, j) - m
			ss += d * d
		}
		mean[j], sd[j] = m, math.Sqrt(ss/float64(r))
		if !(sd[j] > 1e-12) {
			sd[j] = 1
		}
	}
	return mean, sd
}

// robustStats returns each column's median and robust scale 1.4826·MAD
// (the standard deviation for Gaussian data, unmoved by outliers); a column
// whose MAD is zero falls back to its standard deviation.
func robustStats(x *mat.Dense) (center, scale []float64) {
	r, c := x.Dims()
	_, sd := colStats(x)
	center, scale = make([]float64, c), make([]float64, c)
	col := make([]float64, r)
	for j := 0; j < c; j++ {
		mat.Col(col, j, x)
		center[j] = median(col)
		for i, v := range col {
			col[i] = math.Abs(v - center[j])
		}
		scale[j] = 1.4826 * median(col)
		if !(scale[j] > 1e-12) {
			scale[j] = sd[j]
		}
	}
	return center, scale
}

// median sorts v in place and returns its median.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func mapCols(x *mat.Dense, f func(j int, v float64) float64) *mat.Dense {
	r, c := x.Dims()
	out := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		src, dst := x.RawRowView(i), out.RawRowView(i)
		for j, v := range src {
			dst[j] = f(j, v)
		}
	}
	return out
}

// monomials lists every product of 1..degree input features (with
// repetition, indices non-decreasing), or nil when there would be more than
// MaxFeatures of them.
func monomials(c, degree int) [][]int {
	var out [][]int
	var rec func(term []int, from int) bool
	rec = func(term []int, from int) bool {
		for j := from; j < c; j++ {
			t := append(slices.Clone(term), j)
			out = append(out, t)
			if len(out) > MaxFeatures {
				return false
			}
			if len(t) < degree && !rec(t, j) {
				return false
			}
		}
		return true
	}
	if !rec(nil, 0) {
		return nil
	}
	// Order by degree, then lexicographically, so the original features come first.
	slices.SortStableFunc(out, func(a, b []int) int {
		if c := cmp.Compare(len(a), len(b)); c != 0 {
			return c
		}
		return slices.Compare(a, b)
	})
	return out
}

func expand(x *mat.Dense, terms [][]int) *mat.Dense {
	r, _ := x.Dims()
	out := mat.NewDense(r, len(terms), nil)
	for i := 0; i < r; i++ {
		src, dst := x.RawRowView(i), out.RawRowView(i)
		for t, term := range terms {
			p := 1.0
			for _, j := range term {
				p *= src[j]
			}
			dst[t] = p
		}
	}
	return out
}

// selectCols returns, in increasing order, the k columns whose absolute
// Pearson correlation with y is largest (ties to the lower index).
func selectCols(x *mat.Dense, y []float64, k int) []int {
	r, c := x.Dims()
	if k >= c {
		cols := make([]int, c)
		for j := range cols {
			cols[j] = j
		}
		return cols
	}
	var my float64
	for _, v := range y {
		my += v
	}
	my /= float64(r)
	mean, _ := colStats(x)
	score := make([]float64, c)
	for j := 0; j < c; j++ {
		var sxy, sxx, syy float64
		for i := 0; i < r; i++ {
			dx, dy := x.At(i, j)-mean[j], y[i]-my
			sxy += dx * dy
			sxx += dx * dx
			syy += dy * dy
		}
		if sxx > 0 && syy > 0 {
			score[j] = math.Abs(sxy) / math.Sqrt(sxx*syy)
		}
	}
	order := make([]int, c)
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(score[b], score[a]) })
	cols := order[:k]
	slices.Sort(cols)
	return cols
}

func pick(x *mat.Dense, cols []int) *mat.Dense {
	r, _ := x.Dims()
	out := mat.NewDense(r, len(cols), nil)
	for i := 0; i < r; i++ {
		src, dst := x.RawRowView(i), out.RawRowView(i)
		for t, j := range cols {
			dst[t] = src[j]
		}
	}
	return out
}

// principalAxes returns the top min(k, columns) eigenvectors of the train
// covariance as columns, each with its largest-magnitude entry positive.
func principalAxes(x *mat.Dense, mean []float64, k int) (*mat.Dense, error) {
	r, c := x.Dims()
	k = min(k, c)
	xc := mapCols(x, func(j int, v float64) float64 { return v - mean[j] })
	cov := mat.NewSymDense(c, nil)
	cov.SymOuterK(1/float64(r), xc.T())
	var eig mat.EigenSym
	if !eig.Factorize(cov, true) {
		return nil, fmt.Errorf("%w: pca eigendecomposition did not converge", ErrNumerical)
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs) // columns in ascending eigenvalue order
	out := mat.NewDense(c, k, nil)
	for t := 0; t < k; t++ {
		src := c - 1 - t
		best := 0.0
		for i := 0; i < c; i++ {
			if v := vecs.At(i, src); math.Abs(v) > math.Abs(best) {
				best = v
			}
		}
		sign := 1.0
		if best < 0 {
			sign = -1
		}
		for i := 0; i < c; i++ {
			out.Set(i, t, sign*vecs.At(i, src))
		}
	}
	return out, nil
}

func allFinite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
