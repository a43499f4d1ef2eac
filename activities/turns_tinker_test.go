package activities

import (
	"reflect"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/store"
)

// Generate of turn 2 of a Tinker run samples each trajectory from its
// token sequence so far, read from Postgres (turn 1's tokens and its
// observation): the stored turn-2 actions are the policy's completions of
// those sequences; a retried Generate of the turn inserts nothing and
// leaves the rows as they were.
func TestGenerateTurnsTinker(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	pol := tinkerActivities(t, a)
	cfg := tinkerConfig(t)
	cfg.Trajectory.Turns = 3
	cr, err := a.CreateRun(ctx, CreateRunRequest{RunID: "tt", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	gen := func(turn int) GenerateResponse {
		t.Helper()
		r, err := a.Generate(ctx, GenerateRequest{RunID: "tt", Step: 0, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed,
			Checkpoint: cr.Checkpoint, Turn: turn, Source: store.SourceWorldModel})
		if err != nil {
			t.Fatalf("generate turn %d: %v", turn, err)
		}
		return r
	}
	if r := gen(1); r.Inserted != cfg.Samples {
		t.Fatalf("turn 1 inserted %d, want %d", r.Inserted, cfg.Samples)
	}
	if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: "tt", Step: 0, Group: 0, SuiteSeed: cfg.SuiteSeed, Turn: 1, ObservationTokens: 1200}); err != nil {
		t.Fatal(err)
	}
	if r := gen(2); r.Inserted != cfg.Samples {
		t.Fatalf("turn 2 inserted %d, want %d", r.Inserted, cfg.Samples)
	}
	first, err := a.Store.GroupTurns(ctx, "tt", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := gen(2); r.Inserted != 0 {
		t.Errorf("retried turn 2 inserted %d", r.Inserted)
	}
	again, err := a.Store.GroupTurns(ctx, "tt", 0, 0)
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("turn rows changed on a retry (%v)", err)
	}
	// The policy's completions of each trajectory's sequence so far, asked
	// here under another key (so sampled again: the server samples
	// deterministically from the sequence and the seed).
	tasks, err := a.Tasks.Tasks(ctx, cfg.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	traj, err := a.Store.Trajectory(ctx, store.Key{Run: "tt", Step: 0, Group: 0, Sample: 0})
	if err != nil {
		t.Fatal(err)
	}
	var task backend.Task
	for _, x := range tasks {
		if x.ID == traj.TaskID {
			task = x
		}
	}
	ck, err := a.checkpoint(ctx, "tt", cr.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	req := backend.SampleRequest{Run: "tt", Checkpoint: ck, Task: task, Key: "tt/check", Settings: policySettings(cfg)}
	var stored [][]int
	for _, tr := range first {
		switch tr.Turn {
		case 1:
			if tr.Answer == nil || tr.Completion == nil {
				t.Fatalf("%s: %+v", tr.TurnKey, tr)
			}
			req.History = append(req.History, []backend.Exchange{{Tokens: tr.Completion.Tokens, LogProbs: tr.Completion.LogProbs, Observation: tr.Answer.Observation}})
			req.Seeds = append(req.Seeds, plan.TurnSampleSeed(cfg.Seed, 0, 0, tr.Sample, 2))
		case 2:
			stored = append(stored, tr.Completion.Tokens)
		}
	}
	comps, err := pol.Sample(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range comps {
		if !reflect.DeepEqual(c.Tokens, stored[i]) {
			t.Errorf("sample %d: turn 2 stored %v, the completion of its sequence so far %v", i, stored[i], c.Tokens)
		}
	}
}
