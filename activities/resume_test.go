package activities

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/temporal"

	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

// seedRun records run id with steps 0 and 1 completed (anchor groups {0}
// then {1, 2} of 3), checkpoints 0..2, the fusion state of step 1 and a
// held-out evaluation of checkpoint 2. A fraction >= 0 is recorded as the
// anchor fraction the steps used; with -1 the steps are rows written before
// the metrics carried it, as name → number objects without anchor_fraction,
// through the database at dsn.
func seedRun(t *testing.T, a *Activities, dsn, id string, cfg runconfig.Config, fraction float64) {
	t.Helper()
	ctx := t.Context()
	if _, err := a.CreateRun(ctx, CreateRunRequest{RunID: id, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	anchors := [][]int{{0}, {1, 2}}
	for step, groups := range anchors {
		var sols []store.Solution
		for g := range 3 {
			for i := range 2 {
				sols = append(sols, store.Solution{Key: store.Key{Run: id, Step: step, Group: g, Sample: i}, TaskID: "t", Program: "p"})
			}
		}
		if _, err := a.Store.InsertTrajectories(ctx, sols); err != nil {
			t.Fatal(err)
		}
		if err := a.Store.SetAnchors(ctx, id, step, groups); err != nil {
			t.Fatal(err)
		}
		if fraction >= 0 {
			m := StepMetrics{Groups: 3, Samples: 2, AnchorGroups: len(groups), AnchorFraction: fraction, Rho: 0.5}
			if err := a.Store.FinishStep(ctx, id, step, store.StepCompleted, m); err != nil {
				t.Fatal(err)
			}
		} else {
			oldStepRow(t, dsn, id, step, fmt.Sprintf(`{"anchor_groups":%d,"groups":3,"rho":0.5,"samples":2}`, len(groups)))
		}
		c := store.Checkpoint{Run: id, Version: step + 1, Hash: "hash-" + string(rune('1'+step)), Location: "/nowhere"}
		if err := a.Store.PutCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	f := store.FusionState{Run: id, Step: 1, State: denoise.State{}, Rho: 0.5}
	if err := a.Store.SaveFusionState(ctx, f); err != nil {
		t.Fatal(err)
	}
	ev := store.Evaluation{Run: id, Step: 2, TaskID: "h", Sample: 0, Program: "p",
		Result: executor.NewResult(executor.StatusOK, 1, 0.75, "")}
	if _, err := a.Store.SaveEvaluations(ctx, []store.Evaluation{ev}); err != nil {
		t.Fatal(err)
	}
}

// oldStepRow records a completed step with metrics as an earlier version
// stored them.
func oldStepRow(t *testing.T, dsn, run string, step int, metrics string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	_, err = conn.Exec(t.Context(), `INSERT INTO steps (run_id, step, status, metrics, finished_at)
		VALUES ($1, $2, 'completed', $3, now())
		ON CONFLICT (run_id, step) DO UPDATE SET status = 'completed', metrics = EXCLUDED.metrics, finished_at = now()`,
		run, step, metrics)
	if err != nil {
		t.Fatal(err)
	}
}

// ResumeRun rebuilds the whole state a resumed run starts from, including
// the anchor fraction the old run's last step used (set-anchor-fraction's).
func TestResumeRunState(t *testing.T) {
	a, _, dsn := newTestActivitiesDB(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	cfg.Steps = 5
	seedRun(t, a, dsn, "old", cfg, 0.25)
	req := ResumeRunRequest{RunID: "new", From: "old", Config: cfg}
	got, err := a.ResumeRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != 2 || got.Checkpoint != (CheckpointRef{Version: 2, Hash: "hash-2"}) || got.Rho != 0.5 ||
		got.Tracker.Groups != 6 || got.Tracker.Anchors != 3 || !reflect.DeepEqual(got.LastAnchors, []int{1, 2}) ||
		got.LastMetrics.AnchorGroups != 2 || got.LastMetrics.AnchorFraction != 0.25 || got.AnchorFraction != 0.25 ||
		got.HeldOut == nil || got.HeldOut.Score != 0.75 || got.HeldOut.Tasks != 1 {
		t.Errorf("ResumeRun = %+v (held out %+v)", got, got.HeldOut)
	}
	again, err := a.ResumeRun(ctx, req)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("ResumeRun again = %+v, %v; want %+v", again, err, got)
	}
	r, err := a.Store.Run(ctx, "new")
	if err != nil || r.State != store.RunRunning || r.ResumedFrom != "old" || r.ResumedStep != 1 {
		t.Errorf("resumed run recorded as %+v, %v", r, err)
	}

	// Steps that did not record their fraction: the configuration's.
	seedRun(t, a, dsn, "plain", cfg, -1)
	got, err = a.ResumeRun(ctx, ResumeRunRequest{RunID: "plain-2", From: "plain", Config: cfg})
	if err != nil || got.AnchorFraction != cfg.Anchors.Fraction {
		t.Errorf("fraction of a resumed run without a change: %v, %v; want %v", got.AnchorFraction, err, cfg.Anchors.Fraction)
	}
	if want := (StepMetrics{Groups: 3, Samples: 2, AnchorGroups: 2, Rho: 0.5}); got.LastMetrics != want ||
		got.Tracker.Groups != 6 || got.Tracker.Anchors != 3 {
		t.Errorf("old-format metrics read as %+v (tracker %+v), want %+v", got.LastMetrics, got.Tracker, want)
	}
}

func TestResumeRunRefuses(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	if _, err := a.CreateRun(ctx, CreateRunRequest{RunID: "fresh", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	for _, req := range []ResumeRunRequest{
		{RunID: "x", From: "fresh", Config: cfg}, // no completed step
		{RunID: "x", From: "ghost", Config: cfg}, // no such run
		{RunID: "x", From: "x", Config: cfg},     // itself
		{RunID: "bad id", From: "fresh", Config: cfg},
	} {
		if _, err := a.ResumeRun(ctx, req); !isInvalid(err) {
			t.Errorf("ResumeRun(%+v) = %v, want a non-retryable error", req, err)
		}
		if _, err := a.Store.Run(ctx, req.RunID); err == nil {
			t.Errorf("refused ResumeRun(%+v) stored run %s", req, req.RunID)
		}
	}
}

func isInvalid(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable() && app.Type() == ErrInvalidInput
}
