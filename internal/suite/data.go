package suite

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/tabular"
)

// featureRange is the span of feature counts a family draws from, before
// clamping to Options.MaxFeatures.
func featureRange(f Family) (lo, hi int) {
	switch f {
	case Linear:
		return 4, 32
	case Sparse:
		return 12, 64
	case Interactions, Nonlinear:
		return 4, 16
	case Outliers:
		return 4, 24
	case Imbalance:
		return 4, 32
	case Irrelevant:
		return 24, 64
	}
	panic("suite: unknown family " + string(f))
}

// testFraction is the share of rows held out as the hidden test split.
const testFraction = 0.3

// minTestRows is the smallest hidden test split.
const minTestRows = 60

// genInfo records generator choices the question mentions.
type genInfo struct {
	relevant   int     // number of features that drive the target
	prevalence float64 // share of positives (classification)
}

// generateData draws one task's dataset: n rows in total, d features.
func generateData(r *rng, c combo, n, d int) (*tabular.Dataset, genInfo, error) {
	x, u := drawFeatures(r, n, d)
	f, relevant := signal(r, c.family, u)
	if err := standardizeInPlace(f); err != nil {
		return nil, genInfo{}, fmt.Errorf("%s signal: %w", c.family, err)
	}
	// The noise level sets the best achievable fit: R² of the true
	// signal is r2 on the latent scale.
	r2 := r.uniform(0.55, 0.95)
	if c.family == Imbalance {
		// A rare class separated by a strong signal is ranked almost
		// perfectly by any model; a weaker signal keeps the task open.
		r2 = r.uniform(0.25, 0.6)
	}
	noise := math.Sqrt((1 - r2) / r2)
	lat := make([]float64, n)
	for i := range lat {
		lat[i] = f[i] + noise*r.norm()
	}
	info := genInfo{relevant: relevant}
	y := make([]float64, n)
	if c.kind == tabular.Classification {
		prev := r.uniform(0.35, 0.65)
		if c.family == Imbalance {
			prev = r.uniform(0.04, 0.15)
		}
		thr := quantile(lat, 1-prev)
		for i, v := range lat {
			if v > thr {
				y[i] = 1
			}
		}
		info.prevalence = prev
	} else {
		shift := 10 * r.norm()
		scale := r.logUniform(0.5, 50)
		for i, v := range lat {
			y[i] = shift + scale*v
		}
	}
	if c.family == Outliers {
		contaminate(r, x)
	}
	trainIdx, testIdx := splitRows(r, c.kind, y)
	if c.family == Outliers && c.kind == tabular.Regression {
		corruptTargets(r, y, trainIdx)
	}
	ds := &tabular.Dataset{
		Kind:   c.kind,
		XTrain: takeRows(x, trainIdx),
		YTrain: takeVals(y, trainIdx),
		XTest:  takeRows(x, testIdx),
		YTest:  takeVals(y, testIdx),
	}
	return ds, info, nil
}

// drawFeatures returns the observed features x and their standardised form
// u (same shape), from which the target is computed. Some features are
// correlated with their neighbour and some are skewed; every feature gets
// its own scale and offset, so standardising matters.
func drawFeatures(r *rng, n, d int) (x, u *mat.Dense) {
	x = mat.NewDense(n, d, nil)
	u = mat.NewDense(n, d, nil)
	z := make([]float64, n)
	prev := make([]float64, n)
	for j := range d {
		correlated := j > 0 && r.float64() < 0.3
		rho := r.uniform(0.3, 0.9)
		for i := range z {
			e := r.norm()
			if correlated {
				e = rho*prev[i] + math.Sqrt(1-rho*rho)*e
			}
			z[i] = e
		}
		copy(prev, z)
		skewed := r.float64() < 0.25
		sigma := r.uniform(0.3, 0.7)
		scale := r.logUniform(0.1, 100)
		offset := 3 * scale * r.norm()
		col := make([]float64, n)
		for i, v := range z {
			if skewed {
				v = math.Exp(sigma * v)
			}
			col[i] = offset + scale*v
		}
		x.SetCol(j, col)
		std := slices.Clone(col)
		if err := standardizeInPlace(std); err != nil {
			// A column of n ≥ 2 normal draws is never constant.
			panic("suite: constant feature column")
		}
		u.SetCol(j, std)
	}
	return x, u
}

// term is one non-linear shape applied to a standardised feature.
type term func(float64) float64

func clip(v, lim float64) float64 { return math.Max(-lim, math.Min(lim, v)) }

// shapes are the non-linear terms families draw from. Inputs are clipped so
// a skewed feature cannot dominate the signal through a few extreme rows.
func shapes(r *rng) term {
	switch r.intn(6) {
	case 0:
		return func(v float64) float64 { return math.Sin(2 * clip(v, 3.5)) }
	case 1:
		return func(v float64) float64 { v = clip(v, 3); return v*v - 1 }
	case 2:
		return func(v float64) float64 { return math.Abs(clip(v, 3.5)) }
	case 3:
		t := r.uniform(-0.8, 0.8)
		return func(v float64) float64 {
			if v > t {
				return 1
			}
			return -1
		}
	case 4:
		return func(v float64) float64 { return math.Tanh(3 * v) }
	default:
		return func(v float64) float64 { return math.Exp(clip(v, 3.5) / 2) }
	}
}

// signal computes the noise-free target of a family from standardised
// features u, and how many features it uses.
func signal(r *rng, fam Family, u *mat.Dense) ([]float64, int) {
	n, d := u.Dims()
	f := make([]float64, n)
	col := func(j int) []float64 { return mat.Col(nil, j, u) }
	addLinear := func(j int, w float64) {
		c := col(j)
		for i := range f {
			f[i] += w * c[i]
		}
	}
	addShape := func(j int, w float64, s term) {
		c := col(j)
		for i := range f {
			f[i] += w * s(c[i])
		}
	}
	weight := func() float64 { return r.sign() * r.uniform(0.6, 1.6) }
	perm := r.perm(d)
	switch fam {
	case Linear, Outliers:
		for j := range d {
			addLinear(j, r.norm())
		}
		return f, d
	case Sparse:
		k := r.between(2, max(2, d/6))
		for _, j := range perm[:k] {
			addLinear(j, weight())
		}
		return f, k
	case Interactions:
		m := r.between(1, max(1, min(3, d/2)))
		for p := range m {
			a, b := col(perm[2*p]), col(perm[2*p+1])
			w := weight()
			for i := range f {
				f[i] += w * clip(a[i], 3.5) * clip(b[i], 3.5)
			}
		}
		// A weak linear part on one of the interacting features.
		addLinear(perm[0], 0.3*r.sign())
		return f, 2 * m
	case Nonlinear:
		k := r.between(2, min(d, 5))
		for _, j := range perm[:k] {
			addShape(j, weight(), shapes(r))
		}
		return f, k
	case Imbalance:
		k := r.between(2, min(d, 6))
		for _, j := range perm[:k] {
			addLinear(j, weight())
		}
		addShape(perm[0], 0.7*weight(), shapes(r))
		return f, k
	case Irrelevant:
		k := r.between(3, 6)
		for i, j := range perm[:k] {
			if i%2 == 0 {
				addLinear(j, weight())
			} else {
				addShape(j, weight(), shapes(r))
			}
		}
		return f, k
	}
	panic("suite: unknown family " + string(fam))
}

// contaminate replaces a small share of entries in about half of the
// columns by extreme values, far outside the column's range.
func contaminate(r *rng, x *mat.Dense) {
	n, d := x.Dims()
	rate := r.uniform(0.02, 0.06)
	for j := range d {
		if r.float64() < 0.5 {
			continue
		}
		c := mat.Col(nil, j, x)
		_, sd := meanStd(c)
		for i := range n {
			if r.float64() < rate {
				x.Set(i, j, c[i]+r.sign()*sd*r.uniform(8, 25))
			}
		}
	}
}

// corruptTargets adds gross errors to a share of the training targets, so
// robust pipelines beat ones that chase the corrupted rows. The test
// targets stay clean.
func corruptTargets(r *rng, y []float64, trainIdx []int) {
	vals := takeVals(y, trainIdx)
	_, sd := meanStd(vals)
	rate := r.uniform(0.03, 0.08)
	for _, i := range trainIdx {
		if r.float64() < rate {
			y[i] += r.sign() * sd * r.uniform(5, 15)
		}
	}
}

// splitRows shuffles the rows and assigns testFraction of them (at least
// minTestRows) to the hidden test split. Classification splits are
// stratified, so both splits hold both classes.
func splitRows(r *rng, kind tabular.Kind, y []float64) (train, test []int) {
	n := len(y)
	nTest := max(minTestRows, int(math.Round(testFraction*float64(n))))
	p := r.perm(n)
	if kind != tabular.Classification {
		test, train = slices.Clone(p[:nTest]), slices.Clone(p[nTest:])
		slices.Sort(train)
		slices.Sort(test)
		return train, test
	}
	var pos, neg []int
	for _, i := range p {
		if y[i] == 1 {
			pos = append(pos, i)
		} else {
			neg = append(neg, i)
		}
	}
	tp := int(math.Round(float64(nTest) * float64(len(pos)) / float64(n)))
	tp = max(2, min(tp, len(pos)-2))
	tn := nTest - tp
	test = append(slices.Clone(pos[:tp]), neg[:tn]...)
	train = append(slices.Clone(pos[tp:]), neg[tn:]...)
	slices.Sort(train)
	slices.Sort(test)
	return train, test
}

func takeRows(x *mat.Dense, idx []int) *mat.Dense {
	_, d := x.Dims()
	out := mat.NewDense(len(idx), d, nil)
	for k, i := range idx {
		out.SetRow(k, x.RawRowView(i))
	}
	return out
}

func takeVals(y []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for k, i := range idx {
		out[k] = y[i]
	}
	return out
}

// meanStd returns the mean and population standard deviation.
func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, v := range xs {
		mean += v
	}
	mean /= float64(len(xs))
	var ss float64
	for _, v := range xs {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)))
}

// standardizeInPlace rescales xs to mean 0 and standard deviation 1.
func standardizeInPlace(xs []float64) error {
	m, s := meanStd(xs)
	if !(s > 1e-12) {
		return fmt.Errorf("constant values (std %g)", s)
	}
	for i := range xs {
		xs[i] = (xs[i] - m) / s
	}
	return nil
}

// quantile returns the q-quantile of xs (nearest rank on a sorted copy).
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Round(q * float64(len(s)-1)))
	return s[max(0, min(i, len(s)-1))]
}
