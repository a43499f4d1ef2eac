package workflows

import (
	"testing"

	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestRealRunDifferenceEstimator: a wmrl run with denoise.estimator
// difference records λ with every step's gate decision (0 while the window
// is too short to test), reaches the same checkpoint twice, and another
// checkpoint than the fused estimator's: λ reached the update.
func TestRealRunDifferenceEstimator(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps = 5
	cfg.Anchors.Fraction = 0.5
	cfg.Denoise.Estimator = denoise.EstimatorDifference
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r1, both := runTwice(t, st, "diff", cfg)
	steps := both[0]
	positive := 0
	for i, s := range steps {
		g := s.Metrics.Gate
		if g == nil || g.Lambda == nil {
			t.Fatalf("step %d: gate %+v, want a decision with λ", i, g)
		}
		if *g.Lambda < 0 || *g.Lambda >= 1 || (!g.Open && *g.Lambda != 0) {
			t.Errorf("step %d: λ %v with %s", i, *g.Lambda, g)
		}
		if *g.Lambda > 0 {
			positive++
		}
		t.Logf("step %d: %s", i, g)
	}
	if *steps[0].Metrics.Gate.Lambda != 0 {
		t.Errorf("step 0 (2 groups in the window): λ %v, want 0", *steps[0].Metrics.Gate.Lambda)
	}
	if positive == 0 {
		t.Error("λ was 0 in every step: the test does not exercise the world-model stream")
	}
	fused := cfg
	fused.Denoise.Estimator = denoise.EstimatorFused
	if r3 := runReal(t, st, "diff-fused", fused); r3.Checkpoint == r1.Checkpoint {
		t.Errorf("checkpoint %+v with either estimator", r1.Checkpoint)
	}
}
