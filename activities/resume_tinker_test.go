package activities

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
)

// tinkerActivities gives a the Tinker policy over the built-in Tinker
// server on a's database.
func tinkerActivities(t *testing.T, a *Activities) *tinker.Policy {
	t.Helper()
	srv := httptest.NewServer(tinkerserve.New(a.Store.Pool(), a.Tasks, tinkerserve.Options{StrictSeq: true}))
	t.Cleanup(srv.Close)
	pol, err := tinker.New(tinker.Config{BaseURL: srv.URL, BaseModel: tinker.BuiltinBaseModel, PollMax: 20 * time.Millisecond},
		tinker.BuiltinTokenizer{}, tinker.PostgresJournal{Store: a.Store}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol})
	return pol
}

// seedTinkerRun creates run id of cfg (policy.backend tinker) and applies
// two updates through the policy, recording checkpoints 1 and 2 (with their
// training state unless noState) and steps 0 and 1 as completed. It returns
// the run's checkpoints.
func seedTinkerRun(t *testing.T, a *Activities, pol *tinker.Policy, id string, noState bool) []backend.Checkpoint {
	t.Helper()
	ctx := t.Context()
	cfg := tinkerConfig(t)
	if _, err := a.CreateRun(ctx, CreateRunRequest{RunID: id, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	c0, err := a.Store.Checkpoint(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	cks := []backend.Checkpoint{{Version: 0, Hash: c0.Hash, Location: c0.Location}}
	train, err := a.Tasks.Tasks(ctx, cfg.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	set := policySettings(cfg)
	for step := range 2 {
		ck := cks[step]
		comps, err := pol.Sample(ctx, backend.SampleRequest{Run: id, Checkpoint: ck, Task: train[0], Seeds: []uint64{uint64(step+1) << 40, 2, 3},
			Key: backend.SampleKey(id, step, 0, -1), Settings: set})
		if err != nil {
			t.Fatal(err)
		}
		batch := make([]backend.Datum, len(comps))
		for i, c := range comps {
			batch[i] = backend.Datum{Task: train[0], Sample: i, Text: c.Text, Tokens: c.Tokens, LogProbs: c.LogProbs,
				Advantage: float64(i) - 1, Weight: 1.0 / 3}
		}
		next, _, err := pol.Update(ctx, backend.UpdateRequest{Run: id, Step: step, Base: ck, Batch: batch, Settings: set, Key: backend.StepKey(id, step)})
		if err != nil {
			t.Fatal(err)
		}
		if next.State == "" {
			t.Fatalf("update %d saved no training state", step)
		}
		cks = append(cks, next)
		rec := store.Checkpoint{Run: id, Version: next.Version, Hash: next.Hash, Location: next.Location, State: next.State}
		if noState {
			rec.State = ""
		}
		if err := a.Store.PutCheckpoint(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := a.Store.FinishStep(ctx, id, step, store.StepCompleted, stepsummary.Step{Groups: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return cks
}

func tinkerConfig(t *testing.T) runconfig.Config {
	t.Helper()
	cfg := tinyConfig(t)
	cfg.Policy.Backend = backend.Tinker
	cfg.Steps = 4
	return cfg
}

// ResumeRun of a Tinker run puts a new model of the new run at the old
// run's checkpoint after its last completed step, loading the training
// weights saved with it, although the old model has moved on since; the new
// run's copy of that checkpoint names the new model and has the old hash
// (the built-in server reports content hashes). A run whose checkpoint was
// recorded without training weights is refused and nothing is stored.
func TestResumeRunTinker(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	pol := tinkerActivities(t, a)
	old := seedTinkerRun(t, a, pol, "old", false)
	oldModel, _ := tinker.ModelOf(old[2].Location)

	// The old model goes past checkpoint 2, as a run killed inside its next
	// update leaves it.
	cfg := tinkerConfig(t)
	train, err := a.Tasks.Tasks(ctx, cfg.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	comps, err := pol.Sample(ctx, backend.SampleRequest{Run: "old", Checkpoint: old[2], Task: train[1], Seeds: []uint64{7 << 40, 8},
		Key: "extra", Settings: policySettings(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	extra := []backend.Datum{{Task: train[1], Text: comps[0].Text, Tokens: comps[0].Tokens, LogProbs: comps[0].LogProbs, Advantage: 1, Weight: 1}}
	past, _, err := pol.Update(ctx, backend.UpdateRequest{Run: "old", Step: 2, Base: old[2], Batch: extra, Settings: policySettings(cfg), Key: "old/extra"})
	if err != nil {
		t.Fatal(err)
	}

	req := ResumeRunRequest{RunID: "new", From: "old", Config: cfg}
	got, err := a.ResumeRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != 2 || got.Checkpoint != (CheckpointRef{Version: 2, Hash: old[2].Hash}) {
		t.Fatalf("ResumeRun = step %d checkpoint %+v, want step 2 at %s", got.Step, got.Checkpoint, old[2].Hash)
	}
	c2, err := a.Store.Checkpoint(ctx, "new", 2)
	if err != nil {
		t.Fatal(err)
	}
	newModel, _ := tinker.ModelOf(c2.Location)
	if newModel == oldModel || c2.Hash != old[2].Hash || c2.State != old[2].State {
		t.Fatalf("new run's checkpoint 2 %+v, old run's %+v (model %s)", c2, old[2], oldModel)
	}
	if again, err := a.ResumeRun(ctx, req); err != nil || again.Checkpoint != got.Checkpoint {
		t.Fatalf("ResumeRun again: %+v %v", again.Checkpoint, err)
	}
	if c, err := a.Store.Checkpoint(ctx, "new", 1); err != nil || c.Location != old[1].Location {
		t.Errorf("new run's checkpoint 1 %+v %v: want the old run's copied", c, err)
	}

	// The new run's first update trains the new model from checkpoint 2 and
	// gives what the old model gave from it (the extra update), not a step
	// from where the old model is now.
	base, err := a.checkpoint(ctx, "new", got.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := pol.Update(ctx, backend.UpdateRequest{Run: "new", Step: 2, Base: base, Batch: extra, Settings: policySettings(cfg), Key: backend.StepKey("new", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := tinker.ModelOf(next.Location); m != newModel || next.Hash != past.Hash {
		t.Errorf("continued update: %+v, the old model's from checkpoint 2: %+v", next, past)
	}
	var models int
	if err := a.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM tinker_models WHERE user_metadata->>'wmrl_run' = 'new'`).Scan(&models); err != nil || models != 1 {
		t.Errorf("%d models of the new run (%v), want 1", models, err)
	}

	// Recorded without training weights: refused.
	seedTinkerRun(t, a, pol, "legacy", true)
	_, err = a.ResumeRun(ctx, ResumeRunRequest{RunID: "legacy-2", From: "legacy", Config: cfg})
	if !isInvalid(err) || !strings.Contains(err.Error(), "no saved training weights") {
		t.Fatalf("continue a run without training weights: %v", err)
	}
	if _, err := a.Store.Run(ctx, "legacy-2"); err == nil {
		t.Error("the refused continue stored its run")
	}
	if err := CanContinue(cfg, store.Checkpoint{Version: 2}); err == nil {
		t.Error("CanContinue took a Tinker checkpoint without a state")
	}
	cfg.Policy.Backend = ""
	if err := CanContinue(cfg, store.Checkpoint{Version: 2}); err != nil {
		t.Errorf("CanContinue refused a built-in checkpoint: %v", err)
	}
}
