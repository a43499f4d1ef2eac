package workflows

import (
	"testing"

	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestRealRunMemory runs wmrl on the tiny preset with execution memory
// (denoise.memory) and the fused estimator on real activities, twice with the same seed: the same
// final checkpoint and the same counts, some trajectories remembered but
// none at step 0 (nothing was executed before it); the run without memory
// ends elsewhere, so the memory reached the update.
func TestRealRunMemory(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps = 6
	// The fused estimator gives the world-model groups weight at every
	// step the gate is open; under the difference estimator (the default)
	// the tiny preset's one anchor group per step keeps λ at 0 for these 6
	// steps, and the memory would not reach the update.
	cfg.Denoise.Estimator, cfg.Denoise.Memory = denoise.EstimatorFused, true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r1, steps := runTwice(t, st, "mem", cfg)
	s1, s2 := steps[0], steps[1]
	remembered := 0
	for i := range s1 {
		if a, b := s1[i].Metrics.Remembered, s2[i].Metrics.Remembered; a != b {
			t.Fatalf("step %d: %d and %d remembered", i, a, b)
		}
		remembered += s1[i].Metrics.Remembered
	}
	if s1[0].Metrics.Remembered != 0 {
		t.Errorf("step 0 remembered %d trajectories", s1[0].Metrics.Remembered)
	}
	if remembered == 0 {
		t.Fatal("nothing remembered: the test does not exercise the memory")
	}
	t.Logf("%d trajectories remembered over %d steps", remembered, cfg.Steps)
	off := cfg
	off.Denoise.Memory = false
	if r3 := runReal(t, st, "mem-off", off); r3.Checkpoint == r1.Checkpoint {
		t.Errorf("checkpoint %+v with and without memory", r1.Checkpoint)
	}
}
