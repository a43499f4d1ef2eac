package worldmodel

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tabular"
)

// classificationCard is the card of a small synthetic classification
// dataset (400 rows, 6 features, a linear signal), built as the suite
// builds its cards.
func classificationCard(t *testing.T) []float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 1))
	gen := func(n int) (*mat.Dense, []float64) {
		x := mat.NewDense(n, 6, nil)
		y := make([]float64, n)
		for i := range n {
			z := 0.0
			for j := range 6 {
				v := r.NormFloat64()
				x.Set(i, j, v)
				z += v * float64(j%3)
			}
			if z+r.NormFloat64() > 0 {
				y[i] = 1
			}
		}
		return x, y
	}
	xtr, ytr := gen(300)
	xte, yte := gen(100)
	d := &tabular.Dataset{Kind: tabular.Classification, XTrain: xtr, YTrain: ytr, XTest: xte, YTest: yte}
	return suite.NewCard(d).Vector()
}

func TestDefaultLoads(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatalf("stored world model does not load: %v", err)
	}
	if m.Fit.SuiteSeed != suite.DefaultSeed || m.Fit.Seed != DefaultFitSeed || m.Fit.SamplesPerTask != DefaultSamplesPerTask {
		t.Fatalf("stored model fit %+v, want suite seed %d, seed %d, %d samples per task",
			m.Fit, suite.DefaultSeed, DefaultFitSeed, DefaultSamplesPerTask)
	}
	if m.Fit.Options() != DefaultFitOptions() {
		t.Fatalf("stored model options %+v, want %+v", m.Fit.Options(), DefaultFitOptions())
	}
	card := classificationCard(t)
	for _, text := range []string{"mean", "standardize | ridge alpha=1", "logistic", "poly degree=3 | poly degree=3 | gbt"} {
		r, err := m.PredictText(card, text)
		if err != nil || !(r >= 0 && r <= 1) {
			t.Fatalf("PredictText(%q) = %v, %v; want a score in [0, 1]", text, r, err)
		}
	}
	// On a classification card, a regression-only model fails at run time
	// (0.1 on the ladder); the model must have learnt that it scores lower.
	bad, _ := m.PredictText(card, "ridge")
	good, _ := m.PredictText(card, "logistic")
	if !(bad < good) {
		t.Fatalf("ridge on classification %.3f, logistic %.3f: want ridge lower", bad, good)
	}
	if _, err := m.PredictText(card, "ridge |"); err == nil {
		t.Fatal("PredictText accepted a program that does not parse")
	}
	if _, err := m.PredictText(card[:5], "ridge"); err == nil {
		t.Fatal("PredictText accepted a short card vector")
	}
}

func TestDefaultArtefactIsACopy(t *testing.T) {
	a := DefaultArtefact()
	a[0] ^= 0xff
	if _, err := Default(); err != nil {
		t.Fatalf("editing a copy changed the stored model: %v", err)
	}
}

// TestDefaultArtefactReproduces refits the stored model from scratch (the
// default suite and about 1500 real executions: minutes) and compares the
// bytes. It runs only when WMRL_REFIT=1; the same check from the command
// line is
//
//	wmrl worldmodel fit --out /tmp/wm.json && cmp /tmp/wm.json internal/worldmodel/default.json
func TestDefaultArtefactReproduces(t *testing.T) {
	if os.Getenv("WMRL_REFIT") != "1" {
		t.Skip("set WMRL_REFIT=1 to refit the stored world model (minutes)")
	}
	ctx := context.Background()
	s, err := suite.Load(ctx, suite.DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := Fit(ctx, s, DefaultFitConfig(), ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, DefaultArtefact()) {
		stored, err := Default()
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("refit differs from default.json (suite hash now %s, stored model's %s)", s.Hash, stored.Fit.SuiteHash)
	}
}

func TestLoadFile(t *testing.T) {
	if _, err := LoadFile(""); err != nil {
		t.Fatalf(`LoadFile("") = %v, want the stored model`, err)
	}
	dir := t.TempDir()
	if _, err := LoadFile(dir + "/none.json"); err == nil {
		t.Fatal("LoadFile of a missing file succeeded")
	}
	path := dir + "/wm.json"
	if err := os.WriteFile(path, DefaultArtefact()[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadFile of a truncated artefact: %v, want an error naming the file", err)
	}
}
