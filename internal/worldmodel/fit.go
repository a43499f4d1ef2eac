package worldmodel

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Example is one logged execution: the group (task id) it belongs to, its
// feature vector and the real score r_env.
type Example struct {
	Group string    `json:"group"`
	X     []float64 `json:"x"`
	Y     float64   `json:"y"`
}

// FitOptions are the regularisation settings of FitLinear.
type FitOptions struct {
	// Lambda is the ridge penalty per example on standardised features:
	// the normal equations are (ZᵀZ + Lambda·n·I) w = Zᵀt. Larger values
	// pull every prediction toward the mean transformed score.
	Lambda float64
	// TargetEps keeps targets finite: scores are clamped to [TargetEps, 1]
	// before the log link, [TargetEps, 1−TargetEps] before the logit.
	TargetEps float64
	// Link is the score transform the regression works in.
	Link Link
}

// DefaultFitOptions are the settings of the stored artefact.
func DefaultFitOptions() FitOptions { return FitOptions{Lambda: 0.1, TargetEps: 0.05, Link: LinkLog} }

// FitLinear fits the model by ridge regression in the space of opt.Link:
// every feature is centred and scaled to unit variance, the target is the
// link of the (clamped) score, the weights solve the penalised normal
// equations and the intercept is the mean target. Least squares in link
// space followed by the inverse link predicts a location of the transformed
// scores, not their mean on [0, 1], which is one of the model's deliberate
// sources of bias (see the package documentation). The result is
// deterministic for a given input.
func FitLinear(examples []Example, names []string, opt FitOptions) (*Model, error) {
	return FitWeighted(examples, nil, names, opt)
}

// FitWeighted is FitLinear with a weight per example (nil: every weight 1):
// the centres, scales and mean target are weighted means, and the normal
// equations are (ZᵀWZ + Lambda·(Σw)·I) w = ZᵀW t, so an example of weight
// w counts as w examples. With every weight 1 the result is FitLinear's,
// byte for byte. Weights must be finite and positive. The training MSE and
// Spearman it records are unweighted.
func FitWeighted(examples []Example, weights []float64, names []string, opt FitOptions) (*Model, error) {
	n, d := len(examples), len(names)
	if n < 2 {
		return nil, fmt.Errorf("fit world model: %d examples, want at least 2", n)
	}
	if weights != nil && len(weights) != n {
		return nil, fmt.Errorf("fit world model: %d weights for %d examples", len(weights), n)
	}
	weight := func(i int) float64 {
		if weights == nil {
			return 1
		}
		return weights[i]
	}
	var sumW float64
	for i := range n {
		w := weight(i)
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("fit world model: example %d has weight %v, want finite and > 0", i, w)
		}
		sumW += w
	}
	if !opt.Link.valid() {
		return nil, fmt.Errorf("fit world model: unknown link %q", opt.Link)
	}
	if !(opt.Lambda > 0) || !(opt.TargetEps > 0 && opt.TargetEps < 0.5) {
		return nil, fmt.Errorf("fit world model: lambda %v must be > 0 and target eps %v in (0, 0.5)", opt.Lambda, opt.TargetEps)
	}
	center := make([]float64, d)
	scale := make([]float64, d)
	for i, e := range examples {
		if len(e.X) != d {
			return nil, fmt.Errorf("fit world model: example %d has %d features, want %d", i, len(e.X), d)
		}
		if !finite(e.Y) {
			return nil, fmt.Errorf("fit world model: example %d has score %v", i, e.Y)
		}
		for j, v := range e.X {
			if !finite(v) {
				return nil, fmt.Errorf("fit world model: example %d feature %s is %v", i, names[j], v)
			}
			center[j] += weight(i) * v
		}
	}
	// With every weight 1, w·x is x and Σw is n exactly: the arithmetic is
	// the unweighted fit's.
	for j := range center {
		center[j] /= sumW
	}
	for i, e := range examples {
		for j, v := range e.X {
			scale[j] += weight(i) * ((v - center[j]) * (v - center[j]))
		}
	}
	for j := range scale {
		scale[j] = math.Sqrt(scale[j] / sumW)
		if scale[j] < 1e-9 {
			scale[j] = 1 // constant on the training data: its weight is 0
		}
	}

	target := make([]float64, n)
	var tmean float64
	for i, e := range examples {
		target[i] = opt.Link.target(e.Y, opt.TargetEps)
		tmean += weight(i) * target[i]
	}
	tmean /= sumW

	// Rows scaled by √w: ZᵀZ and Zᵀt of the scaled rows are ZᵀWZ and ZᵀWt.
	z := mat.NewDense(n, d, nil)
	for i, e := range examples {
		sw := math.Sqrt(weight(i))
		for j, v := range e.X {
			z.Set(i, j, sw*((v-center[j])/scale[j]))
		}
	}
	var gram mat.SymDense
	gram.SymOuterK(1, z.T())
	for j := range d {
		gram.SetSym(j, j, gram.At(j, j)+opt.Lambda*sumW)
	}
	tc := mat.NewVecDense(n, nil)
	for i := range n {
		tc.SetVec(i, math.Sqrt(weight(i))*(target[i]-tmean))
	}
	var rhs mat.VecDense
	rhs.MulVec(z.T(), tc)
	var chol mat.Cholesky
	if ok := chol.Factorize(&gram); !ok {
		return nil, errors.New("fit world model: normal equations are not positive definite")
	}
	var w mat.VecDense
	if err := chol.SolveVecTo(&w, &rhs); err != nil {
		return nil, fmt.Errorf("fit world model: solve: %w", err)
	}

	m := &Model{
		Version:      FormatVersion,
		FeatureNames: append([]string(nil), names...),
		Center:       center,
		Scale:        scale,
		Weights:      make([]float64, d),
		Intercept:    tmean,
		Link:         opt.Link,
		Fit:          FitInfo{Samples: n, Lambda: opt.Lambda, TargetEps: opt.TargetEps, Link: opt.Link},
	}
	for j := range d {
		m.Weights[j] = w.AtVec(j)
	}
	group := make([]string, n)
	pred := make([]float64, n)
	real := make([]float64, n)
	var mse float64
	for i, e := range examples {
		group[i], real[i] = e.Group, e.Y
		pred[i] = m.PredictFeatures(e.X)
		mse += (pred[i] - e.Y) * (pred[i] - e.Y)
	}
	m.Fit.TrainMSE = mse / float64(n)
	m.Fit.TrainSpearman, _ = WithinGroupSpearman(group, pred, real)
	return m, nil
}
