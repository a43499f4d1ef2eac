package tabular

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
	"pgregory.net/rapid"

	"github.com/wmrl/wmrl/internal/program"
)

// synth draws ntr+nte rows of d standard normal features and targets f(x)
// plus Gaussian noise; for classification the label is 1 when f(x)+noise > 0.
func synth(seed uint64, kind Kind, ntr, nte, d int, noise float64, f func(x []float64) float64) *Dataset {
	rng := rand.New(rand.NewPCG(seed, 1))
	gen := func(n int) (*mat.Dense, []float64) {
		x := mat.NewDense(n, d, nil)
		y := make([]float64, n)
		for i := 0; i < n; i++ {
			row := x.RawRowView(i)
			for j := range row {
				row[j] = rng.NormFloat64()
			}
			y[i] = f(row) + noise*rng.NormFloat64()
			if kind == Classification {
				y[i] = b2f(y[i] > 0)
			}
		}
		return x, y
	}
	xtr, ytr := gen(ntr)
	xte, yte := gen(nte)
	return &Dataset{Kind: kind, XTrain: xtr, YTrain: ytr, XTest: xte, YTest: yte}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func linearF(x []float64) float64 { return 2*x[0] - x[1] + 0.5*x[2] }
func wavyF(x []float64) float64 {
	return 2*math.Sin(2*x[0]) + x[1]*x[1] - 1 + math.Abs(x[2])
}
func xorF(x []float64) float64 { return x[0] * x[1] }

func score(t *testing.T, text string, d *Dataset) float64 {
	t.Helper()
	p, err := program.Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	pred, err := FitPredict(context.Background(), p, d, 7)
	if err != nil {
		t.Fatalf("FitPredict(%q): %v", text, err)
	}
	s, err := Metric(d.Kind, d.YTest, pred)
	if err != nil {
		t.Fatalf("Metric(%q): %v", text, err)
	}
	return s
}

// TestModelsLearn: every model clearly beats the trivial baseline on a
// problem it should solve, and the non-linear models beat the linear ones
// where the target is non-linear.
func TestModelsLearn(t *testing.T) {
	linReg := synth(1, Regression, 300, 200, 5, 0.3, linearF)
	wavyReg := synth(2, Regression, 400, 200, 4, 0.2, wavyF)
	linCls := synth(3, Classification, 300, 200, 5, 0.3, linearF)
	xorCls := synth(4, Classification, 400, 200, 3, 0.1, xorF)
	tests := []struct {
		give string
		data *Dataset
		want float64 // at least
	}{
		{"ridge alpha=1", linReg, 0.95},
		{"standardize | knn k=10", linReg, 0.7},
		{"gbt trees=100 depth=3 lr=0.1", linReg, 0.8},
		{"standardize | rff features=128 gamma=0.3 alpha=0.1", linReg, 0.9},
		{"gbt trees=150 depth=3 lr=0.1", wavyReg, 0.8},
		{"standardize | knn k=5", wavyReg, 0.6},
		{"standardize | rff features=256 gamma=1 alpha=0.1", wavyReg, 0.7},
		{"standardize | poly degree=2 | ridge alpha=1", wavyReg, 0.45},
		{"logistic alpha=1 iters=25", linCls, 0.97},
		{"standardize | knn k=10", linCls, 0.9},
		{"gbt trees=100 depth=2 lr=0.1", linCls, 0.9},
		{"standardize | rff features=128 gamma=0.3 alpha=1", linCls, 0.95},
		{"gbt trees=100 depth=2 lr=0.3", xorCls, 0.9},
		{"standardize | knn k=10", xorCls, 0.9},
		{"standardize | rff features=256 gamma=1 alpha=1", xorCls, 0.9},
		{"poly degree=2 | logistic", xorCls, 0.95},
	}
	base := map[*Dataset]float64{}
	for _, d := range []*Dataset{linReg, wavyReg, linCls, xorCls} {
		base[d] = score(t, "mean", d)
	}
	for _, tt := range tests {
		got := score(t, tt.give, tt.data)
		if got < tt.want || got < base[tt.data]+0.3 {
			t.Errorf("%s on %s: score %.3f, want at least %.2f (mean baseline %.3f)", tt.give, tt.data.Kind, got, tt.want, base[tt.data])
		}
	}
	if b := base[linCls]; b != 0.5 {
		t.Errorf("mean baseline AUC = %v, want 0.5", b)
	}
	if b := base[linReg]; b > 0 || b < -0.1 {
		t.Errorf("mean baseline R² = %v, want slightly below 0", b)
	}
	// Linear models cannot fit the non-linear targets.
	if s := score(t, "ridge", wavyReg); s > 0.3 {
		t.Errorf("ridge on wavy target: R² %.3f, want below 0.3", s)
	}
	if s := score(t, "logistic", xorCls); s > 0.7 {
		t.Errorf("logistic on xor: AUC %.3f, want below 0.7", s)
	}
}

func TestStepsHelp(t *testing.T) {
	// Only 2 of 30 features matter: selecting them helps nearest neighbours.
	sparse := synth(5, Regression, 300, 200, 30, 0.2, func(x []float64) float64 { return x[3] - 2*x[17] })
	all, sel := score(t, "knn k=10", sparse), score(t, "select k=2 | knn k=10", sparse)
	if sel < all+0.2 {
		t.Errorf("select k=2 | knn: %.3f, knn alone %.3f; want a clear gain", sel, all)
	}
	// A badly scaled informative feature: standardizing helps knn.
	scaled := synth(6, Regression, 300, 200, 4, 0.2, linearF)
	for _, x := range []*mat.Dense{scaled.XTrain, scaled.XTest} {
		r, _ := x.Dims()
		for i := 0; i < r; i++ {
			x.Set(i, 3, 1000*x.At(i, 3)) // an irrelevant feature dominates distances
		}
	}
	raw, std := score(t, "knn k=10", scaled), score(t, "standardize | knn k=10", scaled)
	if std < raw+0.2 {
		t.Errorf("standardize | knn: %.3f, knn alone %.3f; want a clear gain", std, raw)
	}
	// Gross outliers in the train features: clipping helps ridge.
	out := synth(7, Regression, 300, 200, 3, 0.2, linearF)
	for i := 0; i < 300; i += 25 {
		out.XTrain.Set(i, 0, 200)
	}
	plain, clipped := score(t, "ridge", out), score(t, "clip z=3 | ridge", out)
	if clipped < plain+0.1 {
		t.Errorf("clip | ridge: %.3f, ridge alone %.3f; want a gain", clipped, plain)
	}
	// PCA keeping all directions loses nothing for ridge.
	lin := synth(8, Regression, 300, 200, 5, 0.3, linearF)
	if a, b := score(t, "ridge", lin), score(t, "pca k=5 | ridge", lin); math.Abs(a-b) > 1e-6 {
		t.Errorf("pca k=5 | ridge = %.9f, ridge = %.9f", b, a)
	}
	if s := score(t, "pca k=1 | ridge", lin); s > 0.9 {
		t.Errorf("pca k=1 | ridge = %.3f, want a loss", s)
	}
	if s := score(t, "log1p | standardize | ridge", lin); s < 0.8 {
		t.Errorf("log1p | standardize | ridge = %.3f", s)
	}
}

func TestRuntimeErrors(t *testing.T) {
	reg := synth(9, Regression, 50, 20, 3, 0.1, linearF)
	cls := synth(9, Classification, 50, 20, 3, 0.1, linearF)
	wide := synth(9, Regression, 50, 20, 64, 0.1, linearF)
	constCol := synth(9, Regression, 50, 20, 3, 0.1, linearF)
	for i := 0; i < 50; i++ {
		constCol.XTrain.Set(i, 2, 1)
	}
	tests := []struct {
		give string
		data *Dataset
		want error
	}{
		{"ridge", cls, ErrWrongKind},
		{"standardize | logistic", reg, ErrWrongKind},
		{"poly degree=3 | mean", wide, ErrResources},
		{"poly degree=2 | ridge", wide, ErrResources},
		{"rff features=4096", &Dataset{Kind: Regression, XTrain: mat.NewDense(2000, 1, nil), YTrain: make([]float64, 2000), XTest: mat.NewDense(100, 1, nil)}, ErrResources},
		{"ridge alpha=0", constCol, ErrNumerical},
	}
	for _, tt := range tests {
		p, err := program.Parse(tt.give)
		if err != nil {
			t.Fatal(err)
		}
		_, err = FitPredict(context.Background(), p, tt.data, 1)
		if !errors.Is(err, tt.want) || !IsSolutionError(err) {
			t.Errorf("%s: error %v, want %v", tt.give, err, tt.want)
		}
	}
	bad := program.Program{Model: program.Op{Name: "knn", Params: map[string]float64{"k": -1}}}
	if _, err := FitPredict(context.Background(), bad, reg, 1); !errors.Is(err, ErrInvalidProgram) {
		t.Errorf("invalid program: error %v", err)
	}
	// A bad dataset is not the program's fault.
	broken := &Dataset{Kind: Regression, XTrain: mat.NewDense(3, 2, nil), YTrain: []float64{1, 2}, XTest: mat.NewDense(1, 2, nil)}
	if _, err := FitPredict(context.Background(), program.Program{Model: program.Op{Name: "mean"}}, broken, 1); err == nil || IsSolutionError(err) {
		t.Errorf("broken dataset: error %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, _ := program.Parse("gbt")
	if _, err := FitPredict(ctx, p, reg, 1); !errors.Is(err, context.Canceled) || IsSolutionError(err) {
		t.Errorf("cancelled: error %v", err)
	}
}

var everyModel = []string{
	"standardize | clip z=2 | pca k=3 | mean",
	"standardize | clip z=2 | pca k=3 | ridge alpha=0.1",
	"log1p | select k=3 | poly degree=2 | knn k=7",
	"standardize | clip z=2 | select k=4 | gbt trees=20 depth=3",
	"standardize | pca k=4 | rff features=64",
	"standardize | clip z=2 | pca k=3 | logistic",
}

// TestNoTestLeakage: a test row's prediction does not depend on the other
// test rows, so nothing is fitted on the test split.
func TestNoTestLeakage(t *testing.T) {
	for _, kind := range []Kind{Regression, Classification} {
		d := synth(10, kind, 120, 40, 5, 0.3, wavyF)
		half := *d
		half.XTest = mat.DenseCopyOf(d.XTest.Slice(0, 10, 0, 5))
		half.YTest = nil
		for _, text := range everyModel {
			p, _ := program.Parse(text)
			if checkKind(p.Model.Name, kind) != nil {
				continue
			}
			full, err := FitPredict(context.Background(), p, d, 3)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			part, err := FitPredict(context.Background(), p, &half, 3)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			for i := range part {
				if math.Abs(part[i]-full[i]) > 1e-12 {
					t.Errorf("%s (%s): row %d predicted %v alone, %v with other test rows", text, kind, i, part[i], full[i])
				}
			}
		}
	}
}

func TestDeterminism(t *testing.T) {
	for _, kind := range []Kind{Regression, Classification} {
		d := synth(11, kind, 100, 30, 5, 0.3, wavyF)
		for _, text := range everyModel {
			p, _ := program.Parse(text)
			if checkKind(p.Model.Name, kind) != nil {
				continue
			}
			a, err := FitPredict(context.Background(), p, d, 42)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			b, _ := FitPredict(context.Background(), p, d, 42)
			if !slices.Equal(a, b) {
				t.Errorf("%s (%s): two runs differ", text, kind)
			}
			if kind == Classification {
				for _, v := range a {
					if !(v >= 0 && v <= 1) {
						t.Errorf("%s: prediction %v is not a probability", text, v)
						break
					}
				}
			}
		}
	}
	d := synth(12, Regression, 100, 30, 5, 0.3, wavyF)
	p, _ := program.Parse("rff features=32")
	a, _ := FitPredict(context.Background(), p, d, 1)
	b, _ := FitPredict(context.Background(), p, d, 2)
	if slices.Equal(a, b) {
		t.Error("rff: different seeds gave the same predictions")
	}
}

func TestDatasetCheck(t *testing.T) {
	ok := synth(13, Classification, 10, 5, 3, 0.1, linearF)
	tests := []struct {
		name string
		give func(d *Dataset)
	}{
		{"ok", func(*Dataset) {}},
		{"kind", func(d *Dataset) { d.Kind = "ranking" }},
		{"columns", func(d *Dataset) { d.XTest = mat.NewDense(5, 2, nil) }},
		{"targets", func(d *Dataset) { d.YTrain = d.YTrain[1:] }},
		{"test targets", func(d *Dataset) { d.YTest = d.YTest[1:] }},
		{"label", func(d *Dataset) { d.YTrain[0] = 2 }},
		{"nan", func(d *Dataset) { d.XTrain.Set(0, 0, math.NaN()) }},
		{"nil", func(d *Dataset) { d.XTest = nil }},
	}
	for _, tt := range tests {
		d := *ok
		d.XTrain, d.YTrain = mat.DenseCopyOf(ok.XTrain), slices.Clone(ok.YTrain)
		tt.give(&d)
		err := d.Check()
		if (err == nil) != (tt.name == "ok") {
			t.Errorf("%s: Check() = %v", tt.name, err)
		}
	}
	d := *ok
	d.YTest = nil
	if err := d.Check(); err != nil {
		t.Errorf("hidden test labels: %v", err)
	}
}

func TestMonomials(t *testing.T) {
	tests := []struct {
		c, degree, want int
	}{
		{3, 2, 9}, {3, 3, 19}, {16, 3, 968}, {64, 2, 0}, {1, 3, 3},
	}
	for _, tt := range tests {
		if got := len(monomials(tt.c, tt.degree)); got != tt.want {
			t.Errorf("monomials(%d, %d) = %d terms, want %d", tt.c, tt.degree, got, tt.want)
		}
	}
	if got := monomials(2, 2); !slices.EqualFunc(got, [][]int{{0}, {1}, {0, 0}, {0, 1}, {1, 1}}, slices.Equal) {
		t.Errorf("monomials(2, 2) = %v", got)
	}
}

// TestEveryGrammarProgramRuns: any program the token grammar can produce
// either predicts one finite value per test row (a probability for
// classification) or fails with a solution error; it never panics.
func TestEveryGrammarProgramRuns(t *testing.T) {
	data := map[Kind]*Dataset{
		Regression:     synth(14, Regression, 60, 15, 6, 0.3, wavyF),
		Classification: synth(15, Classification, 60, 15, 6, 0.3, wavyF),
	}
	rapid.Check(t, func(t *rapid.T) {
		var toks []int
		for len(toks) == 0 || toks[len(toks)-1] != program.EOS {
			toks = append(toks, rapid.SampledFrom(program.Legal(toks)).Draw(t, "tok"))
		}
		p, err := program.Decode(toks)
		if err != nil {
			t.Fatal(err)
		}
		kind := rapid.SampledFrom([]Kind{Regression, Classification}).Draw(t, "kind")
		pred, err := FitPredict(context.Background(), p, data[kind], 5)
		if err != nil {
			if !IsSolutionError(err) {
				t.Fatalf("%s on %s: error %v is not a solution error", p, kind, err)
			}
			return
		}
		if len(pred) != 15 {
			t.Fatalf("%s: %d predictions", p, len(pred))
		}
		for _, v := range pred {
			if math.IsNaN(v) || (kind == Classification && !(v >= 0 && v <= 1)) {
				t.Fatalf("%s on %s: prediction %v", p, kind, v)
			}
		}
	})
}
