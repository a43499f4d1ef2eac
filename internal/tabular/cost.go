package tabular

import (
	"math"

	"github.com/wmrl/wmrl/internal/program"
)

// EstimateCost is a static estimate of the work FitPredict does to run p on
// a dataset with the given numbers of train rows, test rows and features,
// in work units: roughly one unit per floating-point operation of the
// engine's inner loops (a multiply-add, a comparison in a scan, an element
// copied), with transcendental functions counted as 10. It follows each
// step's effect on the feature width (poly widens, select and pca narrow)
// and counts the model's fit and prediction:
//
//	standardize, log1p, clip  a few passes over the matrix (clip sorts each column)
//	poly                      one product per new feature and row
//	select                    one correlation pass
//	pca                       covariance n·c², eigendecomposition ~10·c³, projection
//	ridge                     normal equations n·c², Cholesky c³/3
//	logistic                  iters Newton steps (no early stop assumed)
//	knn                       n_train·n_test·c distances
//	gbt                       presort, then trees·depth split scans of n·c
//	rff                       projection N·c·F, cosines, ridge on F features
//
// It reads only the program and the three sizes, never the data, so it is
// deterministic and cheap (microseconds). It is an estimate: it ignores
// logistic's early stop, cache effects and gonum's parallel products, and
// it is not an upper bound on time. Its use is to refuse, before running
// them, programs far beyond an execution budget, the same way on every
// machine. A program whose steps would exceed the engine's size limits
// fails fast at run time, so its estimate stops at the failing step. An
// invalid program or non-positive sizes give 0.
func EstimateCost(p program.Program, trainRows, testRows, features int) float64 {
	if p.Validate() != nil || trainRows <= 0 || testRows <= 0 || features <= 0 {
		return 0
	}
	n, m := float64(trainRows), float64(testRows)
	rows := n + m
	c := float64(features)
	cost := rows * c // FitPredict copies both matrices
	for _, s := range p.Steps {
		switch s.Name {
		case "standardize":
			cost += 2*n*c + rows*c
		case "log1p":
			cost += 10 * rows * c
		case "clip":
			cost += 2*n*c*math.Log2(n+1) + 2*rows*c
		case "poly":
			width := monomialCount(features, s.Int("degree"))
			if width > MaxFeatures {
				return cost // fails fast: too many features
			}
			cost += rows * float64(width) * float64(s.Int("degree"))
			features = width
		case "select":
			k := min(s.Int("k"), features)
			cost += 3*n*c + rows*float64(k)
			features = k
		case "pca":
			k := min(s.Int("k"), features)
			cost += n*c*c + 10*c*c*c + rows*c*(1+float64(k))
			features = k
		}
		c = float64(features)
		if rows*c > MaxCells {
			return cost // fails fast: matrix too large
		}
	}
	return cost + modelCost(p.Model, n, m, c)
}

// modelCost is the model part of EstimateCost on n train rows, m test rows
// and c features.
func modelCost(op program.Op, n, m, c float64) float64 {
	switch op.Name {
	case "mean":
		return n + m
	case "ridge":
		return ridgeCost(n, m, c)
	case "logistic":
		d := c + 1
		iter := n*d*(2+10) + n*d*d + d*d*d/3 + n*d
		return n*d + float64(op.Int("iters"))*iter + m*d
	case "knn":
		return n * m * (c + 1)
	case "gbt":
		trees, depth := float64(op.Int("trees")), float64(op.Int("depth"))
		presort := c * n * (math.Log2(n+1) + 1)
		perTree := depth*(6*c*n+2*n) + 12*n // a split scan costs ~6 units per row and feature
		return presort + trees*perTree + m*trees*depth
	case "rff":
		f := float64(op.Int("features"))
		if (n+m)*f > MaxCells {
			return 0 // fails fast: too many cells
		}
		return (n+m)*(c*f+10*f) + c*f + ridgeCost(n, m, f)
	}
	return 0
}

// ridgeCost is the work of fitRidge on n×c and scoring m rows.
func ridgeCost(n, m, c float64) float64 {
	return 3*n*c + n*c*c + c*c*c/3 + m*c
}

// monomialCount is the number of features poly of the given degree makes
// from c features (all products of 1..degree features with repetition),
// capped at MaxFeatures+1.
func monomialCount(c, degree int) int {
	total := 0
	term := 1 // C(c+d-1, d), built up by d
	for d := 1; d <= degree; d++ {
		term = term * (c + d - 1) / d
		total += term
		if total > MaxFeatures {
			return MaxFeatures + 1
		}
	}
	return total
}
