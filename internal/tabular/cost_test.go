package tabular

import (
	"context"
	"errors"
	"testing"

	"github.com/wmrl/wmrl/internal/program"
)

func mustParse(t testing.TB, text string) program.Program {
	t.Helper()
	p, err := program.Parse(text)
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	return p
}

func TestMonomialCountMatchesMonomials(t *testing.T) {
	for c := 1; c <= 40; c++ {
		for _, deg := range []int{1, 2, 3} {
			want := MaxFeatures + 1
			if terms := monomials(c, deg); terms != nil {
				want = len(terms)
			}
			if got := monomialCount(c, deg); got != want {
				t.Errorf("monomialCount(%d, %d) = %d, want %d", c, deg, got, want)
			}
		}
	}
}

// TestEstimateCostOrders checks that the estimate grows with what makes an
// execution slower: the cheaper program of each pair must cost less.
func TestEstimateCostOrders(t *testing.T) {
	tests := []struct {
		name                  string
		cheap, dear           string
		dearRows, dearFeature int // sizes for dear when they differ (0: same)
	}{
		{name: "gbt trees", cheap: "gbt trees=25 depth=3", dear: "gbt trees=100 depth=3"},
		{name: "gbt depth", cheap: "gbt trees=100 depth=2", dear: "gbt trees=100 depth=6"},
		{name: "rff features", cheap: "rff features=64", dear: "rff features=512"},
		{name: "logistic iters", cheap: "logistic iters=5", dear: "logistic iters=50"},
		{name: "select narrows", cheap: "select k=2 | knn k=5", dear: "knn k=5"},
		{name: "poly widens", cheap: "ridge", dear: "poly degree=2 | ridge"},
		{name: "poly degree", cheap: "poly degree=2 | ridge", dear: "poly degree=3 | ridge"},
		{name: "pca narrows", cheap: "pca k=2 | gbt trees=100", dear: "gbt trees=100"},
		{name: "mean is cheapest", cheap: "mean", dear: "standardize | ridge"},
		{name: "knn rows", cheap: "knn k=5", dear: "knn k=5", dearRows: 2000},
		{name: "ridge features", cheap: "ridge", dear: "ridge", dearFeature: 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, m, c := 500, 125, 16
			dn, dc := n, c
			if tt.dearRows > 0 {
				dn = tt.dearRows
			}
			if tt.dearFeature > 0 {
				dc = tt.dearFeature
			}
			lo := EstimateCost(mustParse(t, tt.cheap), n, m, c)
			hi := EstimateCost(mustParse(t, tt.dear), dn, m, dc)
			if !(lo > 0 && lo < hi) {
				t.Errorf("cost(%q) = %g, cost(%q) = %g: want 0 < first < second", tt.cheap, lo, tt.dear, hi)
			}
		})
	}
}

func TestEstimateCostDegenerate(t *testing.T) {
	tests := []struct {
		name                 string
		give                 program.Program
		rows, test, features int
	}{
		{name: "invalid program", give: program.Program{Model: program.Op{Name: "nope"}}, rows: 100, test: 20, features: 4},
		{name: "no rows", give: mustParse(t, "ridge"), rows: 0, test: 20, features: 4},
		{name: "no test rows", give: mustParse(t, "ridge"), rows: 100, test: 0, features: 4},
		{name: "no features", give: mustParse(t, "ridge"), rows: 100, test: 20, features: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateCost(tt.give, tt.rows, tt.test, tt.features); got != 0 {
				t.Errorf("EstimateCost = %g, want 0", got)
			}
		})
	}
}

// TestEstimateCostFailFast checks that a program the engine refuses for its
// size gets a small estimate, since it fails before the expensive part.
func TestEstimateCostFailFast(t *testing.T) {
	d := synth(30, Regression, 200, 50, 40, 0.3, wavyF)
	p := mustParse(t, "poly degree=3 | gbt trees=400 depth=6")
	_, err := FitPredict(context.Background(), p, d, 1)
	if !errors.Is(err, ErrResources) {
		t.Fatalf("FitPredict: %v, want ErrResources", err)
	}
	full := EstimateCost(mustParse(t, "gbt trees=400 depth=6"), 200, 50, 40)
	if got := EstimateCost(p, 200, 50, 40); !(got > 0 && got < full/100) {
		t.Errorf("estimate of a program failing at its first step %g, want below %g", got, full/100)
	}
}
