package workflows

import (
	"testing"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestRealRunMemory runs wmrl on the tiny preset with execution memory
// (denoise.memory) on real activities, twice with the same seed: the same
// final checkpoint and the same counts, some trajectories remembered but
// none at step 0 (nothing was executed before it); the run without memory
// ends elsewhere, so the memory reached the update.
func TestRealRunMemory(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps = 6
	cfg.Denoise.Memory = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r1, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "mem-1", Config: cfg})
	r2, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "mem-2", Config: cfg})
	if r1.Checkpoint != r2.Checkpoint || *r1.HeldOut != *r2.HeldOut {
		t.Fatalf("same seed, different outcomes: %+v %+v and %+v %+v", r1.Checkpoint, r1.HeldOut, r2.Checkpoint, r2.HeldOut)
	}
	ctx := t.Context()
	s1, err := st.Steps(ctx, "mem-1")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := st.Steps(ctx, "mem-2")
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) != cfg.Steps || len(s2) != cfg.Steps {
		t.Fatalf("%d and %d steps, want %d", len(s1), len(s2), cfg.Steps)
	}
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
	r3, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "mem-off", Config: off})
	if r3.Checkpoint == r1.Checkpoint {
		t.Errorf("checkpoint %+v with and without memory", r1.Checkpoint)
	}
}
