package worldmodel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestFeatureSetV2Layout(t *testing.T) {
	v1, v2 := FeaturesV1.Names(), FeaturesV2.Names()
	if len(v2) != numFeatures+numFeaturesV2 {
		t.Fatalf("len(FeaturesV2.Names()) = %d, want %d + numFeaturesV2 %d", len(v2), numFeatures, numFeaturesV2)
	}
	if !slices.Equal(v2[:len(v1)], v1) {
		t.Fatal("v2 does not begin with the v1 features")
	}
	seen := map[string]bool{}
	for _, n := range v2 {
		if seen[n] {
			t.Fatalf("duplicate feature name %q", n)
		}
		seen[n] = true
	}
	for _, n := range v2[len(v1):] {
		if !strings.HasPrefix(n, "v2.") {
			t.Fatalf("v2 feature %q lacks the v2. prefix", n)
		}
	}
	card := testCard()
	p := mustParse(t, "standardize | gbt trees=100 depth=3 lr=0.1")
	if a, b := FeaturesV1.Features(card, p), Features(card, p); !slices.Equal(a, b) {
		t.Fatal("Features is not FeaturesV1.Features")
	}
	if a, b := FeaturesV1.Features(card, p), FeaturesV2.Features(card, p); !slices.Equal(a, b[:len(a)]) {
		t.Fatal("the v2 vector does not begin with the v1 vector")
	}
}

func TestParseFeatureSet(t *testing.T) {
	tests := []struct {
		give    string
		want    FeatureSet
		wantErr bool
	}{
		{"", FeaturesV1, false},
		{"v1", FeaturesV1, false},
		{"v2", FeaturesV2, false},
		{"v3", "", true},
		{"V2", "", true},
	}
	for _, tt := range tests {
		got, err := ParseFeatureSet(tt.give)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseFeatureSet(%q) = %q, %v; want %q, error %v", tt.give, got, err, tt.want, tt.wantErr)
		}
	}
}

func featureV2(t *testing.T, x []float64, name string) float64 {
	t.Helper()
	i := slices.Index(FeaturesV2.Names(), name)
	if i < 0 {
		t.Fatalf("no v2 feature %q", name)
	}
	return x[i]
}

// TestFeaturesV2Values checks a few terms against hand computations on
// testCard: 1000 rows, 16 features, c[12] = 0.22 (mean log10 std 0.88),
// the 8 top correlations c[16..23] = 0.26..0.33.
func TestFeaturesV2Values(t *testing.T) {
	card := testCard()
	var signal float64
	for k := 16; k < 24; k++ {
		signal += card[k] * card[k]
	}
	noise := 1 - signal
	scale := 4 * card[12]
	tests := []struct {
		give    string
		feature string
		want    float64
	}{
		// Standardised: the penalty against rows alone.
		{"standardize | ridge alpha=10", "v2.ridge.log10_alpha_eff", math.Log10(10+1e-4) - 3},
		// Unstandardised: also against the features' variance.
		{"ridge alpha=10", "v2.ridge.log10_alpha_eff", math.Log10(10+1e-4) - 3 - 2*scale},
		{"standardize | ridge alpha=10", "v2.ridge.log10_alpha_eff*noise", (math.Log10(10+1e-4) - 3) * noise},
		{"standardize | ridge alpha=10", "v2.gbt.log10_budget", 0},
		{"gbt trees=200 depth=4 lr=0.1", "v2.gbt.log10_budget", math.Log10(200) + math.Log10(0.1)},
		{"gbt trees=200 depth=4 lr=0.1", "v2.gbt.depth*max_square_corr", 4 * card[27]},
		{"gbt trees=200 depth=4 lr=0.1", "v2.gbt.log2_rows_per_leaf", 3*math.Log2(10) - 4},
		{"rff features=128 gamma=1 alpha=1", "v2.rff.log10_alpha_eff", math.Log10(1+1e-4) + math.Log10(128) - 3},
		{"knn k=10", "v2.knn.log2_k*noise", math.Log2(10) * noise},
		{"standardize | knn k=10", "v2.knn.unscaled_log10_std_range", 0},
		{"knn k=10", "v2.knn.unscaled_log10_std_range", 8 * card[13]},
		{"poly degree=3 | ridge", "v2.poly.degree*max_pair_corr", 3 * card[29]},
		{"mean", "v2.noise*mean", noise},
		{"mean", "v2.noise*ridge", 0},
	}
	for _, tt := range tests {
		t.Run(tt.give+"/"+tt.feature, func(t *testing.T) {
			got := featureV2(t, FeaturesV2.Features(card, mustParse(t, tt.give)), tt.feature)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("%s = %v, want %v", tt.feature, got, tt.want)
			}
		})
	}
}

// TestFeaturesV2FiniteDeterministic: every v2 feature of random programs
// is finite and a function of the program's text and the card.
func TestFeaturesV2FiniteDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	cards := [][]float64{testCard(), make([]float64, len(testCard()))}
	names := FeaturesV2.Names()
	for range 300 {
		p := SampleProgram(r)
		for _, card := range cards {
			a, b := FeaturesV2.Features(card, p), FeaturesV2.Features(card, mustParse(t, p.String()))
			if len(a) != len(names) || !slices.Equal(a, b) {
				t.Fatalf("v2 features of %q differ between the program and its reparsed text", p)
			}
			for i, v := range a {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("v2 feature %s of %q is %v", names[i], p, v)
				}
			}
		}
	}
}

// TestFeaturesV2SeparateHyperparameters: programs of one family that
// differ only in one hyperparameter have the same v1 family terms for many
// hyperparameters, but always different v2 vectors, and the difference is
// in the v2 part for each family's hyperparameters.
func TestFeaturesV2SeparateHyperparameters(t *testing.T) {
	card := testCard()
	pairs := [][2]string{
		{"standardize | ridge alpha=0.01", "standardize | ridge alpha=100"},
		{"logistic alpha=0.1 iters=25", "logistic alpha=10 iters=25"},
		{"logistic alpha=1 iters=5", "logistic alpha=1 iters=50"},
		{"knn k=3", "knn k=50"},
		{"gbt trees=100 depth=2 lr=0.1", "gbt trees=100 depth=6 lr=0.1"},
		{"gbt trees=50 depth=3 lr=0.1", "gbt trees=400 depth=3 lr=0.1"},
		{"gbt trees=100 depth=3 lr=0.01", "gbt trees=100 depth=3 lr=0.3"},
		{"rff features=64 gamma=1 alpha=1", "rff features=512 gamma=1 alpha=1"},
		{"rff features=128 gamma=0.1 alpha=1", "rff features=128 gamma=10 alpha=1"},
		{"rff features=128 gamma=1 alpha=0.01", "rff features=128 gamma=1 alpha=100"},
		{"select k=2 | ridge", "select k=16 | ridge"},
		{"pca k=2 | ridge", "pca k=16 | ridge"},
		{"clip z=1.5 | ridge", "clip z=4 | ridge"},
		{"poly degree=2 | ridge", "poly degree=3 | ridge"},
	}
	n1 := len(FeaturesV1.Names())
	for _, pr := range pairs {
		a := FeaturesV2.Features(card, mustParse(t, pr[0]))
		b := FeaturesV2.Features(card, mustParse(t, pr[1]))
		if slices.Equal(a[n1:], b[n1:]) {
			t.Errorf("%q and %q have the same v2 terms", pr[0], pr[1])
		}
	}
	// The card moves a hyperparameter's terms: the same ridge program on a
	// task with 10× the rows has a penalty 10× weaker against it.
	small, big := testCard(), testCard()
	big[1] += 0.25
	p := mustParse(t, "standardize | ridge alpha=1")
	d := featureV2(t, FeaturesV2.Features(small, p), "v2.ridge.log10_alpha_eff") -
		featureV2(t, FeaturesV2.Features(big, p), "v2.ridge.log10_alpha_eff")
	if math.Abs(d-1) > 1e-9 {
		t.Fatalf("log10 effective alpha moved by %v with 10x the rows, want 1", d)
	}
}

// TestFitWeighted: weights of 1 are the unweighted fit byte for byte; a
// weight of 2 is the example counted twice; bad weights are refused.
func TestFitWeighted(t *testing.T) {
	ex := synthetic(120, rand.New(rand.NewPCG(3, 4)))
	names := FeatureNames()
	plain, err := FitLinear(ex, names, DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	ones := make([]float64, len(ex))
	for i := range ones {
		ones[i] = 1
	}
	same, err := FitWeighted(ex, ones, names, DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := plain.Marshal()
	b, _ := same.Marshal()
	if string(a) != string(b) {
		t.Fatal("weights of 1 change the fit")
	}
	// Example 0 weighted 2 against the same data with example 0 repeated.
	w := slices.Clone(ones)
	w[0] = 2
	weighted, err := FitWeighted(ex, w, names, DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	dup, err := FitLinear(append(slices.Clone(ex), ex[0]), names, DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ex[:20] {
		if d := math.Abs(weighted.PredictFeatures(e.X) - dup.PredictFeatures(e.X)); d > 1e-9 {
			t.Fatalf("weight 2 and a repeated example differ by %v", d)
		}
	}
	if d := math.Abs(weighted.PredictFeatures(ex[0].X) - plain.PredictFeatures(ex[0].X)); !(d > 1e-6) {
		t.Fatalf("a weight of 2 moved the example's prediction by %v", d)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		w[0] = bad
		if _, err := FitWeighted(ex, w, names, DefaultFitOptions()); err == nil || !strings.Contains(err.Error(), "weight") {
			t.Errorf("weight %v: %v", bad, err)
		}
	}
	if _, err := FitWeighted(ex, ones[:3], names, DefaultFitOptions()); err == nil {
		t.Error("3 weights for 120 examples: no error")
	}
}

// TestRefitV2Weighted: a v2 model fitted and refreshed on real executions
// keeps its feature set through the artefact; run weights of 1 are the
// unweighted refit, unequal ones move it, and bad ones are refused.
func TestRefitV2Weighted(t *testing.T) {
	if testing.Short() {
		t.Skip("real executions")
	}
	ctx := t.Context()
	s := tinySuite(t)
	cfg := DefaultFitConfig()
	cfg.SamplesPerTask = 4
	cfg.Features = FeaturesV2
	base, recs, err := Fit(ctx, s, cfg, ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	art, err := base.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(art), `"features": "v2"`) {
		t.Fatal("v2 artefact does not name its feature set")
	}
	if base, err = Load(art); err != nil || base.FeatureSet() != FeaturesV2 || len(base.Weights) != len(FeaturesV2.Names()) {
		t.Fatalf("load v2 artefact: %v", err)
	}
	data, err := BaseExamples(base, s, recs)
	if err != nil {
		t.Fatal(err)
	}
	var run []RunExample
	for i, r := range recs[:16] {
		task, err := s.Task(r.Task)
		if err != nil {
			t.Fatal(err)
		}
		run = append(run, RunExample{Group: fmt.Sprintf("%d/%s", i/8, r.Task), Card: task.Card.Vector(), Program: r.Program, Score: 1 - r.Score})
	}
	plain, err := Refit(base, data, run)
	if err != nil {
		t.Fatal(err)
	}
	if plain.FeatureSet() != FeaturesV2 {
		t.Fatalf("refit of a v2 model reads %s", plain.FeatureSet())
	}
	for i := range run {
		run[i].Weight = 1
	}
	ones, err := Refit(base, data, run)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := plain.Marshal()
	b, _ := ones.Marshal()
	if string(a) != string(b) {
		t.Fatal("run weights of 1 change the refit")
	}
	for i := range run[:8] {
		run[i].Weight = 0.25
	}
	weighted, err := Refit(base, data, run)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := weighted.Marshal()
	if string(a) == string(c) {
		t.Fatal("run weights of 0.25 leave the refit unchanged")
	}
	if _, err := Load(c); err != nil {
		t.Fatalf("load weighted refit: %v", err)
	}
	// Only relative weights matter: the run counts as many base examples
	// as it has executions. Equal weights are the unweighted refit, and
	// scaling every weight leaves the refit as it is.
	for i := range run {
		run[i].Weight = 0.5
	}
	if half, err := Refit(base, data, run); err != nil {
		t.Fatal(err)
	} else if d, _ := half.Marshal(); string(d) != string(a) {
		t.Fatal("equal run weights of 0.5 change the refit")
	}
	for i := range run {
		run[i].Weight = 1
		if i < 8 {
			run[i].Weight = 0.25 * 3
		} else {
			run[i].Weight = 3
		}
	}
	scaled, err := Refit(base, data, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range run {
		x, _ := scaled.PredictText(r.Card, r.Program)
		y, _ := weighted.PredictText(r.Card, r.Program)
		if math.Abs(x-y) > 1e-9 {
			t.Fatalf("weights scaled by 3 move a prediction from %v to %v", y, x)
		}
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		run[0].Weight = bad
		if _, err := Refit(base, data, run); err == nil || !strings.Contains(err.Error(), "weight") {
			t.Errorf("run weight %v: %v", bad, err)
		}
	}
}

// TestDefaultV2: the stored v2 model loads, reads v2 and names its fit; the
// stored v1 model keeps its bytes (no features field).
func TestDefaultV2(t *testing.T) {
	m, err := DefaultFor(FeaturesV2)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := DefaultFor(FeaturesV1)
	if err != nil {
		t.Fatal(err)
	}
	if m.FeatureSet() != FeaturesV2 || v1.FeatureSet() != FeaturesV1 {
		t.Fatalf("feature sets %s and %s", m.FeatureSet(), v1.FeatureSet())
	}
	if m.Fit.SuiteSeed != v1.Fit.SuiteSeed || m.Fit.Seed != v1.Fit.Seed || m.Fit.SamplesPerTask != v1.Fit.SamplesPerTask ||
		m.Fit.Samples != v1.Fit.Samples {
		t.Fatalf("v2 fit %+v, v1 fit %+v: not the same executions", m.Fit, v1.Fit)
	}
	if strings.Contains(string(DefaultArtefact()), `"features"`) {
		t.Fatal("default.json names a feature set")
	}
	if _, err := DefaultFor("v9"); err == nil {
		t.Fatal("DefaultFor(v9): no error")
	}
	// A v2 artefact is refused where its features are not v2 (layout check).
	art, _ := m.Marshal()
	edited := reseal(t, art, func(raw map[string]any) { delete(raw, "features") })
	if _, err := Load(edited); err == nil || !strings.Contains(err.Error(), "feature layout") {
		t.Fatalf("v2 artefact without its features field: %v", err)
	}
}
