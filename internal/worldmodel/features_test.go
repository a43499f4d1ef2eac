package worldmodel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
)

func TestFeatureNamesCount(t *testing.T) {
	names := FeatureNames()
	if len(names) != numFeatures {
		t.Fatalf("len(FeatureNames()) = %d, numFeatures = %d", len(names), numFeatures)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("duplicate feature name %q", n)
		}
		seen[n] = true
	}
}

// testCard is a plausible card vector: a classification task of 1000 rows
// and 16 features.
func testCard() []float64 {
	c := make([]float64, suite.VectorLen)
	c[0] = 1
	c[1] = 3.0 / 4 // log10(1000) / 4
	c[2] = 4.0 / 6 // log2(16) / 6
	for i := 3; i < 31; i++ {
		c[i] = 0.1 + 0.01*float64(i)
	}
	c[31] = 1
	return c
}

func mustParse(t testing.TB, s string) program.Program {
	t.Helper()
	p, err := program.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func feature(t *testing.T, x []float64, name string) float64 {
	t.Helper()
	i := slices.Index(FeatureNames(), name)
	if i < 0 {
		t.Fatalf("no feature %q", name)
	}
	return x[i]
}

func TestFeaturesValues(t *testing.T) {
	card := testCard()
	tests := []struct {
		give    string
		feature string
		want    float64
	}{
		{"ridge alpha=10", "model*ridge", 1},
		{"ridge alpha=10", "model*logistic", 0},
		{"ridge alpha=10", "classification*ridge", 1},
		{"ridge alpha=10", "ridge.log10_alpha", math.Log10(10 + 1e-4)},
		{"knn k=10", "knn.log10_k_over_rows", 1 - 3},
		{"standardize | knn", "standardized*knn", 1},
		{"standardize | log1p | knn", "standardized*knn", 0},
		{"poly degree=2 | ridge", "width.log2", math.Log2(152)}, // C(18,2)-1
		{"poly degree=3 | ridge", "width.log2", math.Log2(968)}, // C(19,3)-1
		{"poly degree=3 | ridge", "width.overflow", 0},
		{"poly degree=2 | poly degree=2 | ridge", "width.overflow", 1},      // 152 -> 11780 > 1024
		{"select k=4 | poly degree=3 | ridge", "width.log2", math.Log2(34)}, // C(7,3)-1
		{"select k=4 | poly degree=3 | ridge", "width.overflow", 0},
		{"select k=32 | ridge", "select.log2_k_over_features", 1},
		{"pca k=2 | gbt trees=200 depth=4 lr=0.1", "gbt.log10_cost", math.Log10(200) + 4*math.Log10(2) + 3},
		{"clip z=2 | clip z=4 | mean", "step.clip", 2},
		{"mean", "steps", 0},
	}
	for _, tt := range tests {
		t.Run(tt.give+"/"+tt.feature, func(t *testing.T) {
			got := feature(t, Features(card, mustParse(t, tt.give)), tt.feature)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("%s = %v, want %v", tt.feature, got, tt.want)
			}
		})
	}
}

func TestFeaturesDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	card := testCard()
	for range 200 {
		p := SampleProgram(r)
		a, b := Features(card, p), Features(card, mustParse(t, p.String()))
		if len(a) != numFeatures || !slices.Equal(a, b) {
			t.Fatalf("features of %q differ between the program and its reparsed text", p)
		}
		for i, v := range a {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("feature %s of %q is %v", FeatureNames()[i], p, v)
			}
		}
	}
}

func TestSampleProgram(t *testing.T) {
	models := map[string]int{}
	for j := range 300 {
		p := SampleProgram(programRand(11, 3, j))
		if err := p.Validate(); err != nil {
			t.Fatalf("sampled program %q is invalid: %v", p, err)
		}
		if q := SampleProgram(programRand(11, 3, j)); q.String() != p.String() {
			t.Fatalf("sample %d not deterministic: %q then %q", j, p, q)
		}
		models[p.Model.Name]++
	}
	for _, m := range models {
		if m < 20 {
			t.Fatalf("model counts %v: some family is rarely sampled", models)
		}
	}
	if len(models) != len(program.Models()) {
		t.Fatalf("sampled models %v, want all of %v", models, program.Models())
	}
}

// TestPredictCost checks that a prediction (featurise + linear score) takes
// microseconds; an execution takes tens of milliseconds (see BenchmarkPredict
// and `make bench`). The bound is loose so that a loaded machine passes.
func TestPredictCost(t *testing.T) {
	m := fittedModel(t)
	card := testCard()
	p := mustParse(t, "standardize | poly degree=2 | select k=8 | gbt trees=100 depth=3 lr=0.1")
	if a := testing.AllocsPerRun(100, func() { m.Predict(card, p) }); a > 2 {
		t.Fatalf("Predict allocates %v times per call, want <= 2", a)
	}
	const n = 2000
	start := time.Now()
	var sink float64
	for range n {
		sink += m.Predict(card, p)
	}
	per := time.Since(start) / n
	if per > 200*time.Microsecond {
		t.Fatalf("Predict takes %v per call, want well under 200µs", per)
	}
	if !(sink > 0) {
		t.Fatal("predictions not positive")
	}
}

func BenchmarkPredict(b *testing.B) {
	m, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	card := testCard()
	p := mustParse(b, "standardize | poly degree=2 | select k=8 | gbt trees=100 depth=3 lr=0.1")
	b.ReportAllocs()
	for b.Loop() {
		m.Predict(card, p)
	}
}
