package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// continue refuses a Tinker run whose checkpoint after its last completed
// step has no training weights (recorded before wmrl saved them), naming
// the field, and starts one whose checkpoint has them.
func TestContinueTinkerNeedsTrainingWeights(t *testing.T) {
	st := testenv.FreshStore(t)
	ctx := t.Context()
	cfg, err := runconfig.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name, cfg.Steps, cfg.Policy.Backend = "old", 4, backend.Tinker
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertRun(ctx, store.Run{ID: "old", Name: "old", Mode: cfg.Mode, Config: raw, Seed: cfg.Seed, Steps: 4, State: store.RunFailed}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishStep(ctx, "old", 0, store.StepCompleted, stepsummary.Step{Groups: 4}); err != nil {
		t.Fatal(err)
	}
	for v := range 2 {
		c := store.Checkpoint{Run: "old", Version: v, Hash: "h", Location: fmt.Sprintf("tinker://m/sampler_weights/wmrl-v%06d", v)}
		if err := st.PutCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	ended := &fakeTemporal{run: "old", status: enums.WORKFLOW_EXECUTION_STATUS_FAILED}
	_, _, err = startResume(ctx, ended, st, "old", "")
	if err == nil || !strings.Contains(err.Error(), `policy.backend: "tinker": checkpoint 1 has no saved training weights`) || len(ended.started) != 0 {
		t.Fatalf("continue without training weights: %v (started %d)", err, len(ended.started))
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE checkpoints SET state = 'tinker://m/weights/wmrl-v000001' WHERE run_id = 'old' AND version = 1`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := startResume(ctx, ended, st, "old", ""); err != nil || len(ended.started) != 1 || ended.started[0].ResumeFrom != "old" {
		t.Fatalf("continue with training weights: %v (started %+v)", err, ended.started)
	}
}

// TestContinueTinker runs the tiny preset with policy.backend tinker
// against the built-in Tinker server over HTTP, stops a second run of the
// same seed after a step, moves its model past that step (as a run killed
// inside an update leaves it) and continues it with wmrl continue: the
// continued run trains a model of its own, loaded from the training weights
// saved at the last completed step, and its checkpoint hashes are the
// uninterrupted run's, bit for bit.
func TestContinueTinker(t *testing.T) {
	var srv *httptest.Server
	e := stack(t, testNamespace+"-tinker-continue", func(a *activities.Activities) {
		wm, err := worldmodel.Default()
		if err != nil {
			t.Fatal(err)
		}
		b := builtin.New(smallSuites{}, wm, &testenv.InProcess{MaxCPUs: 2})
		srv = httptest.NewServer(tinkerserve.New(a.Store.Pool(), b.Tasks, tinkerserve.Options{StrictSeq: true}))
		t.Cleanup(srv.Close)
		pol, err := tinker.New(tinker.Config{BaseURL: srv.URL, BaseModel: tinker.BuiltinBaseModel, PollMax: 100 * time.Millisecond},
			tinker.BuiltinTokenizer{}, tinker.PostgresJournal{Store: a.Store}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol})
	})
	ctx := t.Context()
	cfg := writeFile(t, "tinker.yaml", "steps: 4\npolicy:\n  backend: tinker\n")
	hashes := func(run string) []string {
		t.Helper()
		cks, err := e.st.Checkpoints(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(cks))
		for i, c := range cks {
			if c.Version != i {
				t.Fatalf("checkpoints of %s: %+v", run, cks)
			}
			out[i] = c.Hash
		}
		return out
	}
	modelOf := func(run string) (id string, optim int) {
		t.Helper()
		if err := e.st.Pool().QueryRow(ctx, `SELECT model_id, optim_steps FROM tinker_models WHERE user_metadata->>'wmrl_run' = $1`, run).
			Scan(&id, &optim); err != nil {
			t.Fatalf("model of run %s: %v", run, err)
		}
		return id, optim
	}

	whole := e.runName(t, "tk-whole")
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", whole, "--poll", "100ms"); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	want := hashes(whole)
	if len(want) != 5 {
		t.Fatalf("uninterrupted run has %d checkpoints, want 5", len(want))
	}

	cut := e.runName(t, "tk-cut")
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", cut, "--detach"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	waitFor(t, "step 0 of "+cut, func() bool {
		_, ok, err := e.st.LastCompletedStep(ctx, cut)
		return err == nil && ok
	})
	if out, err := e.wmrl(t, "stop", cut); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	waitFor(t, cut+" to stop", func() bool {
		wf, err := temporalState(ctx, e.tc, cut)
		return err == nil && wf != wfRunning
	})
	last, _, err := e.st.LastCompletedStep(ctx, cut)
	if err != nil {
		t.Fatal(err)
	}
	if last >= 3 {
		t.Skipf("run %s completed before it stopped", cut)
	}
	cutHashes := hashes(cut)
	for v, h := range cutHashes {
		if h != want[v] {
			t.Fatalf("stopped run's checkpoint %d %s, uninterrupted %s", v, h, want[v])
		}
	}

	// The old model takes one more optimiser step: a continued run that
	// trained it would go astray.
	oldModel, _ := modelOf(cut)
	var seq int64 // the model's next seq_id: the server takes them in order
	if err := e.st.Pool().QueryRow(ctx, `SELECT last_seq_id + 1 FROM tinker_models WHERE model_id = $1`, oldModel).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(tinker.OptimStepRequest{ModelID: oldModel, SeqID: &seq, Type: tinker.TypeOptimStep,
		AdamParams: tinker.AdamParams{LearningRate: 0.1, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}})
	resp, err := http.Post(srv.URL+tinker.PathOptimStep, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("extra optim_step: HTTP %d", resp.StatusCode)
	}

	out, err := e.wmrl(t, "continue", cut, "--poll", "100ms")
	if err != nil {
		t.Fatalf("continue: %v\n%s", err, out)
	}
	t.Logf("wmrl continue %s (after step %d):\n%s", cut, last, out)
	next := fmt.Sprintf("%s-resume-%d", cut, last+1)
	s := e.status(t, next)
	if s.State != "completed" || s.Checkpoint.Version != 4 {
		t.Fatalf("continued run: %+v", s)
	}
	got := hashes(next)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("continued run's checkpoint hashes\n%v\nuninterrupted\n%v", got, want)
	}
	newModel, optim := modelOf(next)
	if newModel == oldModel || optim != 3-last {
		t.Errorf("continued run's model %s took %d optimiser steps, want a new model (not %s) with %d", newModel, optim, oldModel, 3-last)
	}
	cks, err := e.st.Checkpoints(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cks[last+1:] {
		if m, _ := tinker.ModelOf(c.Location); m != newModel || c.State == "" {
			t.Errorf("continued run's checkpoint %+v: want the new model's, with its training state", c)
		}
	}
	t.Logf("checkpoint hashes of %s and %s: %v", whole, next, got)
}
