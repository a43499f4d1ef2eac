package tabular

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// rffMap is a seeded random Fourier feature map approximating the Gaussian
// kernel exp(−γ‖x−y‖²) with γ = gamma / (number of input features), so that
// gamma=1 suits standardised inputs of any width.
type rffMap struct {
	w *mat.Dense // inputs × features, entries N(0, 2γ)
	b []float64  // phases, U[0, 2π)
}

func newRFF(inputs, features int, gamma float64, seed uint64) rffMap {
	rng := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	sd := math.Sqrt(2 * gamma / float64(inputs))
	w := mat.NewDense(inputs, features, nil)
	raw := w.RawMatrix().Data
	for i := range raw {
		raw[i] = sd * rng.NormFloat64()
	}
	b := make([]float64, features)
	for i := range b {
		b[i] = 2 * math.Pi * rng.Float64()
	}
	return rffMap{w: w, b: b}
}

func (m rffMap) apply(ctx context.Context, x *mat.Dense) (*mat.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, _ := x.Dims()
	_, d := m.w.Dims()
	z := mat.NewDense(r, d, nil)
	z.Mul(x, m.w)
	scale := math.Sqrt(2 / float64(d))
	for i := 0; i < r; i++ {
		row := z.RawRowView(i)
		for j, v := range row {
			row[j] = scale * math.Cos(v+m.b[j])
		}
	}
	return z, nil
}

// rffPredict maps both splits through random Fourier features and fits ridge
// on the train split. For classification the ridge scores of the 0/1 labels
// are turned into probabilities by a Platt fit on the train split.
func rffPredict(ctx context.Context, xtr *mat.Dense, y []float64, xte *mat.Dense, classify bool, features int, gamma, alpha float64, seed uint64) ([]float64, error) {
	ntr, c := xtr.Dims()
	nte, _ := xte.Dims()
	if (ntr+nte)*features > MaxCells {
		return nil, fmt.Errorf("%w: rff features=%d on %d rows exceeds %d cells", ErrResources, features, ntr+nte, MaxCells)
	}
	m := newRFF(c, features, gamma, seed)
	ztr, err := m.apply(ctx, xtr)
	if err != nil {
		return nil, err
	}
	zte, err := m.apply(ctx, xte)
	if err != nil {
		return nil, err
	}
	l, err := fitRidge(ztr, y, alpha)
	if err != nil {
		return nil, err
	}
	pred := l.scores(zte)
	if classify {
		a, b := fitPlatt(l.scores(ztr), y)
		for i, s := range pred {
			pred[i] = sigmoid(a*s + b)
		}
	}
	return pred, nil
}
