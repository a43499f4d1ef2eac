package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"

	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

// resume-from only checks and starts the workflow with ResumeFrom: it
// writes nothing to Postgres, whether the start succeeds or fails.
func TestResumeFromWritesNothing(t *testing.T) {
	st := testenv.FreshStore(t)
	ctx := t.Context()
	cfg, err := runconfig.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name, cfg.Steps = "old", 4
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The run's workflow was terminated by other means: its row still says
	// running, after two completed steps.
	old := store.Run{ID: "old", Name: "old", Mode: cfg.Mode, Config: raw, Seed: cfg.Seed, Steps: 4, State: store.RunRunning}
	if err := st.UpsertRun(ctx, old); err != nil {
		t.Fatal(err)
	}
	for step := range 2 {
		if err := st.FinishStep(ctx, "old", step, store.StepCompleted, stepsummary.Step{Groups: 4}); err != nil {
			t.Fatal(err)
		}
	}
	for v := range 2 {
		if err := st.PutCheckpoint(ctx, store.Checkpoint{Run: "old", Version: v, Hash: "h", Location: "/x"}); err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(when string) {
		t.Helper()
		rs, err := st.Runs(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].ID != "old" || rs[0].State != store.RunRunning || !rs[0].UpdatedAt.Equal(rs[0].CreatedAt) {
			t.Errorf("%s: runs in Postgres %+v, want the old run untouched", when, rs)
		}
	}
	ended := &fakeTemporal{run: "old", status: enums.WORKFLOW_EXECUTION_STATUS_TERMINATED}

	// Checkpoint 2 (after step 1) is missing: refused before any start.
	if _, _, err := startResume(ctx, ended, st, "old", ""); err == nil || !strings.Contains(err.Error(), "cannot be continued after step 1") {
		t.Errorf("resume without checkpoint 2: %v", err)
	}
	if err := st.PutCheckpoint(ctx, store.Checkpoint{Run: "old", Version: 2, Hash: "h", Location: "/x"}); err != nil {
		t.Fatal(err)
	}

	running := &fakeTemporal{run: "old", status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING}
	if _, _, err := startResume(ctx, running, st, "old", ""); err == nil || !strings.Contains(err.Error(), "is still running") {
		t.Errorf("resume a running run: %v", err)
	}
	if _, _, err := startResume(ctx, ended, st, "ghost", ""); err == nil || !strings.Contains(err.Error(), `no run "ghost"`) {
		t.Errorf("resume an unknown run: %v", err)
	}

	failing := &fakeTemporal{run: "old", status: enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, startErr: errors.New("frontend unavailable")}
	if _, _, err := startResume(ctx, failing, st, "old", ""); err == nil || !strings.Contains(err.Error(), "frontend unavailable") {
		t.Errorf("failed start: %v", err)
	}
	unchanged("after a failed start")

	p, _, err := startResume(ctx, ended, st, "old", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ended.started) != 1 {
		t.Fatalf("started %d workflows", len(ended.started))
	}
	in := ended.started[0]
	if in.RunID != "old-resume-2" || in.ResumeFrom != "old" || in.State != nil || in.Config.Name != "old-resume-2" ||
		in.Config.Steps != 4 || in.Config.Seed != cfg.Seed || p.last != 1 {
		t.Errorf("started %+v (plan last %d)", in, p.last)
	}
	unchanged("after a start")
	if _, _, err := startResume(ctx, ended, st, "old", "again"); err != nil || ended.started[1].RunID != "again" {
		t.Errorf("resume as --name again: %v", err)
	}
}
