package store

import (
	"errors"
	"testing"

	"github.com/wmrl/wmrl/internal/stepsummary"
)

func TestResumeRun(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	old := newRun(t, s)
	for step := range 3 {
		if _, err := s.InsertTrajectories(ctx, solutions(old.ID, step, 2, 2)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordAnchorPairs(ctx, []AnchorPair{{Key: Key{old.ID, step, 0, 0}, WM: 0.5, Env: 0.25}}); err != nil {
			t.Fatal(err)
		}
		acts := turnActions(old.ID, step, 0, 2, 1, SourceReal)
		if _, err := s.InsertTurns(ctx, acts); err != nil {
			t.Fatal(err)
		}
		ans := answersOf(acts, 0.25)
		// Sample 1's turn executed nothing (request_info).
		ans[1].Answer = Answer{Observation: "=== Execution result ===\nstatus: info\n", Status: "info", Unexecuted: true}
		if _, err := s.AnswerTurns(ctx, ans); err != nil {
			t.Fatal(err)
		}
		if err := s.PutCheckpoint(ctx, Checkpoint{Run: old.ID, Version: step, Hash: "h", Location: "/ckpt"}); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 2 { // step 2 never completed
		if err := s.FinishStep(ctx, old.ID, step, StepCompleted, stepsummary.Step{Rho: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// Checkpoint 2 (after step 1) exists; 3 does not.
	r := old
	r.ID, r.ResumedFrom, r.ResumedStep = old.ID+"-r", old.ID, 1
	for range 2 {
		if err := s.ResumeRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got := count(t, s, r.ID)
	want := Counts{Steps: 2, Trajectories: 8, AnchorPairs: 2, Checkpoints: 3}
	if got != want {
		t.Errorf("counts of the resumed run %+v, want %+v", got, want)
	}
	// The turns of the copied steps come along, answered as they were.
	for step := range 3 {
		ts, err := s.StepTurns(ctx, r.ID, step)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int]int{0: 2, 1: 2, 2: 0}[step]; len(ts) != want {
			t.Fatalf("step %d of the resumed run has %d turns, want %d", step, len(ts), want)
		}
		for _, tu := range ts {
			if tu.Sample == 1 {
				if tu.Answer == nil || !tu.Answer.Unexecuted || tu.Answer.Reward != nil || tu.Run != r.ID {
					t.Errorf("copied unexecuted turn %+v", tu)
				}
				continue
			}
			if tu.Answer == nil || tu.Answer.Reward == nil || *tu.Answer.Reward != 0.25 || tu.Answer.Unexecuted ||
				tu.Source != SourceReal || tu.Run != r.ID {
				t.Errorf("copied turn %+v", tu)
			}
		}
	}
	if last, ok, err := s.LastCompletedStep(ctx, r.ID); err != nil || !ok || last != 1 {
		t.Errorf("LastCompletedStep = %d %v %v, want 1", last, ok, err)
	}
	if back, err := s.Run(ctx, r.ID); err != nil || back.ResumedFrom != old.ID || back.ResumedStep != 1 {
		t.Errorf("Run = %+v, %v", back, err)
	}

	bad := r
	bad.ID, bad.ResumedStep = old.ID+"-r2", 2
	if err := s.ResumeRun(ctx, bad); !errors.Is(err, ErrNotFound) {
		t.Errorf("resume from an unfinished step: %v, want ErrNotFound", err)
	}
	if _, err := s.Run(ctx, bad.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused resume stored run %s: %v", bad.ID, err)
	}
	// Step 1 is completed but checkpoint 2 is missing: nothing is stored,
	// not even the run.
	gone := old
	gone.ID = old.ID + "-gone"
	if err := s.UpsertRun(ctx, gone); err != nil {
		t.Fatal(err)
	}
	for step := range 2 {
		if err := s.FinishStep(ctx, gone.ID, step, StepCompleted, stepsummary.Step{Rho: 1}); err != nil {
			t.Fatal(err)
		}
	}
	missing := r
	missing.ID, missing.ResumedFrom = gone.ID+"-r", gone.ID
	if err := s.ResumeRun(ctx, missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("resume without the next checkpoint: %v, want ErrNotFound", err)
	}
	if _, err := s.Run(ctx, missing.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed resume left run %s behind: %v", missing.ID, err)
	}
	other := r
	other.ResumedStep = 0
	if err := s.ResumeRun(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("same id, other step: %v, want ErrConflict", err)
	}
}

// ContinueCheckpoint replaces a resumed run's first checkpoint (version
// resumed_step+1), its state included and copied by ResumeRun, and no other.
func TestContinueCheckpoint(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	old := newRun(t, s)
	for v := range 3 {
		c := Checkpoint{Run: old.ID, Version: v, Hash: "h", Location: "tinker://old/sampler_weights/v", State: "tinker://old/weights/v"}
		if err := s.PutCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 2 {
		if err := s.FinishStep(ctx, old.ID, step, StepCompleted, stepsummary.Step{Rho: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r := old
	r.ID, r.ResumedFrom, r.ResumedStep = old.ID+"-c", old.ID, 1
	if err := s.ResumeRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Checkpoint(ctx, r.ID, 2); err != nil || c.State != "tinker://old/weights/v" {
		t.Fatalf("copied checkpoint 2 %+v %v: want the old state", c, err)
	}
	moved := Checkpoint{Run: r.ID, Version: 2, Hash: "h", Location: "tinker://new/sampler_weights/v", State: "tinker://old/weights/v"}
	for range 2 {
		if err := s.ContinueCheckpoint(ctx, moved); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.Checkpoint(ctx, r.ID, 2); err != nil || c != moved {
		t.Fatalf("checkpoint 2 %+v %v, want %+v", c, err, moved)
	}
	if c, err := s.Checkpoint(ctx, old.ID, 2); err != nil || c.Location != "tinker://old/sampler_weights/v" {
		t.Fatalf("the old run's checkpoint 2 changed: %+v %v", c, err)
	}
	for _, c := range []Checkpoint{
		{Run: r.ID, Version: 1, Hash: "h", Location: "x"},        // not the first
		{Run: old.ID, Version: 2, Hash: "h", Location: "x"},      // not resumed
		{Run: "ghost-run", Version: 2, Hash: "h", Location: "x"}, // no such run
	} {
		if err := s.ContinueCheckpoint(ctx, c); !errors.Is(err, ErrConflict) {
			t.Errorf("ContinueCheckpoint(%+v) = %v, want ErrConflict", c, err)
		}
	}
}
