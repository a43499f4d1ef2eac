package tabular

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// linear is a fitted linear score w·x + b.
type linear struct {
	w []float64
	b float64
}

func (l linear) scores(x *mat.Dense) []float64 {
	r, _ := x.Dims()
	out := make([]float64, r)
	for i := 0; i < r; i++ {
		s := l.b
		for j, v := range x.RawRowView(i) {
			s += l.w[j] * v
		}
		out[i] = s
	}
	return out
}

// fitRidge minimises ||y − Xw − b||² + alpha·||w||² (the intercept is not
// penalised) by a Cholesky solve of the centred normal equations.
func fitRidge(x *mat.Dense, y []float64, alpha float64) (linear, error) {
	r, c := x.Dims()
	mean, _ := colStats(x)
	var my float64
	for _, v := range y {
		my += v
	}
	my /= float64(r)
	xc := mapCols(x, func(j int, v float64) float64 { return v - mean[j] })
	yc := make([]float64, r)
	for i, v := range y {
		yc[i] = v - my
	}
	a := mat.NewSymDense(c, nil)
	a.SymOuterK(1, xc.T())
	for j := 0; j < c; j++ {
		a.SetSym(j, j, a.At(j, j)+alpha)
	}
	var rhs mat.VecDense
	rhs.MulVec(xc.T(), mat.NewVecDense(r, yc))
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return linear{}, fmt.Errorf("%w: normal equations not positive definite (alpha=%g)", ErrNumerical, alpha)
	}
	var w mat.VecDense
	if err := chol.SolveVecTo(&w, &rhs); err != nil {
		return linear{}, fmt.Errorf("%w: %v", ErrNumerical, err)
	}
	l := linear{w: make([]float64, c), b: my}
	for j := 0; j < c; j++ {
		l.w[j] = w.AtVec(j)
		l.b -= l.w[j] * mean[j]
	}
	if !allFinite(l.w) || math.IsNaN(l.b) || math.IsInf(l.b, 0) {
		return linear{}, fmt.Errorf("%w: non-finite ridge weights", ErrNumerical)
	}
	return l, nil
}

// fitLogistic minimises the log-loss plus alpha/2·||w||² (intercept not
// penalised) by at most iters Newton steps, stopping early once a step is
// negligible.
func fitLogistic(ctx context.Context, x *mat.Dense, y []float64, alpha float64, iters int) (linear, error) {
	r, c := x.Dims()
	d := c + 1
	xa := mat.NewDense(r, d, nil) // intercept column first
	for i := 0; i < r; i++ {
		row := xa.RawRowView(i)
		row[0] = 1
		copy(row[1:], x.RawRowView(i))
	}
	beta := make([]float64, d)
	xs := mat.NewDense(r, d, nil)
	resid := make([]float64, r)
	h := mat.NewSymDense(d, nil)
	for it := 0; it < iters; it++ {
		if err := ctx.Err(); err != nil {
			return linear{}, err
		}
		for i := 0; i < r; i++ {
			row := xa.RawRowView(i)
			var eta float64
			for j, v := range row {
				eta += beta[j] * v
			}
			p := sigmoid(eta)
			resid[i] = y[i] - p
			sw := math.Sqrt(p * (1 - p))
			srow := xs.RawRowView(i)
			for j, v := range row {
				srow[j] = sw * v
			}
		}
		var grad mat.VecDense
		grad.MulVec(xa.T(), mat.NewVecDense(r, resid))
		h.SymOuterK(1, xs.T())
		h.SetSym(0, 0, h.At(0, 0)+1e-9)
		for j := 1; j < d; j++ {
			grad.SetVec(j, grad.AtVec(j)-alpha*beta[j])
			h.SetSym(j, j, h.At(j, j)+alpha)
		}
		var chol mat.Cholesky
		if !chol.Factorize(h) {
			return linear{}, fmt.Errorf("%w: logistic Hessian not positive definite at iteration %d (alpha=%g)", ErrNumerical, it+1, alpha)
		}
		var step mat.VecDense
		if err := chol.SolveVecTo(&step, &grad); err != nil {
			return linear{}, fmt.Errorf("%w: %v", ErrNumerical, err)
		}
		var biggest float64
		for j := range beta {
			beta[j] += step.AtVec(j)
			biggest = math.Max(biggest, math.Abs(step.AtVec(j)))
		}
		if !allFinite(beta) {
			return linear{}, fmt.Errorf("%w: logistic weights diverged", ErrNumerical)
		}
		if biggest < 1e-9 {
			break
		}
	}
	return linear{w: beta[1:], b: beta[0]}, nil
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// fitPlatt fits p = σ(a·s + b) to labels y by Newton steps, turning scores
// into probabilities of class 1.
func fitPlatt(s, y []float64) (a, b float64) {
	for it := 0; it < 50; it++ {
		var ga, gb, haa, hab, hbb float64
		for i, v := range s {
			p := sigmoid(a*v + b)
			e, w := y[i]-p, p*(1-p)
			ga += e * v
			gb += e
			haa += w * v * v
			hab += w * v
			hbb += w
		}
		haa += 1e-6
		hbb += 1e-6
		det := haa*hbb - hab*hab
		if !(det > 0) {
			break
		}
		da, db := (hbb*ga-hab*gb)/det, (haa*gb-hab*ga)/det
		a, b = a+da, b+db
		if math.Abs(da)+math.Abs(db) < 1e-10 {
			break
		}
	}
	return a, b
}
