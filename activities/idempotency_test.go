package activities

import (
	"math"
	"reflect"
	"testing"

	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/testenv"
)

func tinyConfig(t testing.TB) runconfig.Config {
	t.Helper()
	c, err := runconfig.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.SuiteSeed = testenv.SuiteSeed
	return c
}

func TestActivitiesIdempotent(t *testing.T) {
	a, sb := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	run := "idem"

	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil || again != created {
		t.Fatalf("CreateRun twice: %+v, %v; first %+v", again, err, created)
	}

	gen := GenerateRequest{RunID: run, Step: 0, Group: 1, Samples: cfg.Samples, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed,
		Checkpoint: created.Checkpoint}
	g1, err := a.Generate(ctx, gen)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := a.Generate(ctx, gen)
	if err != nil {
		t.Fatal(err)
	}
	if g1.Inserted != cfg.Samples || g2.Inserted != 0 || g1.TaskID != g2.TaskID {
		t.Fatalf("Generate twice inserted %d then %d (tasks %s, %s)", g1.Inserted, g2.Inserted, g1.TaskID, g2.TaskID)
	}
	for _, r := range []int{0, 1} {
		if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: 0, Group: 1, SuiteSeed: cfg.SuiteSeed}); err != nil {
			t.Fatalf("ScoreWorldModel call %d: %v", r, err)
		}
	}

	exec := ExecuteRequest{RunID: run, Step: 0, Group: 1, Sample: 2, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed,
		Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget}
	e1, err := a.Execute(ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := a.Execute(ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	if e1.Reused || !e2.Reused || e1.Score != e2.Score || e1.Status != e2.Status || e1.CPUSeconds != e2.CPUSeconds {
		t.Fatalf("Execute twice: %+v then %+v", e1, e2)
	}
	if sb.Runs() > 1 {
		t.Fatalf("the sandbox ran %d times for one trajectory", sb.Runs())
	}

	// A sandbox failure is an error for the retry policy, not a score.
	sb.FailNext(1)
	exec.Sample = 3
	if _, err := a.Execute(ctx, exec); err == nil {
		t.Fatal("Execute with a failing sandbox returned no error")
	}
	if tr, err := a.Store.Trajectory(ctx, exec.key()); err != nil || tr.Exec != nil {
		t.Fatalf("failed execution stored a result: %+v, %v", tr.Exec, err)
	}

	rec := RecordAnchorsRequest{RunID: run, Step: 0, Groups: []int{1}}
	r1, err := a.RecordAnchors(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.RecordAnchors(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	// Sample 2 is executed; sample 3's execution failed: ungraded, no pair.
	if r1.Pairs != 1 || r1.New != 1 || r2.Pairs != 1 || r2.New != 0 || r1.Ungraded != cfg.Samples-1 {
		t.Fatalf("RecordAnchors twice: %+v then %+v", r1, r2)
	}
	// Choosing other anchor groups for the same step is refused.
	if _, err := a.RecordAnchors(ctx, RecordAnchorsRequest{RunID: run, Step: 0, Groups: []int{0}}); err == nil {
		t.Fatal("RecordAnchors accepted a different anchor choice")
	}

	cal := CalibrateRequest{RunID: run, Step: 0, Debias: cfg.DebiasConfig()}
	c1, err := a.Calibrate(ctx, cal)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := a.Calibrate(ctx, cal)
	if err != nil || c1 != c2 {
		t.Fatalf("Calibrate twice: %+v then %+v, %v", c1, c2, err)
	}
	fuse := FuseRequest{RunID: run, Step: 0, Mode: cfg.Mode, Anchors: []int{1}, DenoiseConfig: cfg.DenoiseConfig(),
		Advantage: cfg.AdvantageConfig()}
	f1, err := a.Fuse(ctx, fuse)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := a.Fuse(ctx, fuse)
	if err != nil || !reflect.DeepEqual(f1, f2) {
		t.Fatalf("Fuse twice: %+v then %+v, %v", f1, f2, err)
	}

	up := UpdateRequest{RunID: run, Step: 0, SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint}
	u1, err := a.Update(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	u2, err := a.Update(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	if u1.Reused || !u2.Reused || u1.Checkpoint != u2.Checkpoint || u1.Checkpoint.Version != 1 || u1.Stats != u2.Stats {
		t.Fatalf("Update twice: %+v then %+v", u1, u2)
	}
	if u1.Checkpoint.Hash == created.Checkpoint.Hash {
		t.Fatal("Update did not change the policy")
	}
	// A retry after a crash between saving and recording the checkpoint
	// recomputes it from checkpoint 0 and gets the same hash: the gradient
	// is applied once.
	if _, err := a.Store.Checkpoint(ctx, run, 2); err == nil {
		t.Fatal("checkpoint 2 exists")
	}
	cps, err := a.Store.Checkpoints(ctx, run)
	if err != nil || len(cps) != 2 {
		t.Fatalf("checkpoints %+v, %v", cps, err)
	}
	counts, err := a.Store.Count(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Trajectories != cfg.Samples || counts.Executed != 1 || counts.AnchorPairs != 1 || counts.Checkpoints != 2 {
		t.Fatalf("counts %+v", counts)
	}
}

func TestRequestsValidate(t *testing.T) {
	cfg := tinyConfig(t)
	good := GenerateRequest{RunID: "r", Step: 2, Group: 0, Samples: 4, Checkpoint: CheckpointRef{Version: 2, Hash: "h"}}
	tests := []struct {
		name string
		give interface{ Validate() error }
	}{
		{"run id with slash", GenerateRequest{RunID: "a/b", Step: 2, Samples: 4, Checkpoint: CheckpointRef{Version: 2, Hash: "h"}}},
		{"negative step", StepRequest{RunID: "r", Step: -1}},
		{"checkpoint of a later step", GenerateRequest{RunID: "r", Step: 3, Samples: 4, Checkpoint: CheckpointRef{Version: 4, Hash: "h"}}},
		{"checkpoint older than any pipeline's", GenerateRequest{RunID: "r", Step: 6, Samples: 4, Checkpoint: CheckpointRef{Version: 1, Hash: "h"}}},
		{"no samples", GenerateRequest{RunID: "r", Step: 2, Checkpoint: CheckpointRef{Version: 2, Hash: "h"}}},
		{"bad limits", ExecuteRequest{RunID: "r", Step: 0}},
		{"negative budget", ExecuteRequest{RunID: "r", Limits: cfg.Sandbox.Limits(), Budget: -1}},
		{"unsorted anchors", RecordAnchorsRequest{RunID: "r", Groups: []int{2, 1}}},
		{"bad debias", CalibrateRequest{RunID: "r"}},
		{"bad mode", FuseRequest{RunID: "r", Mode: "x", DenoiseConfig: cfg.DenoiseConfig(), Advantage: cfg.AdvantageConfig()}},
		{"unsorted left-out groups", FuseRequest{RunID: "r", Mode: cfg.Mode, DenoiseConfig: cfg.DenoiseConfig(), Advantage: cfg.AdvantageConfig(),
			Selective: &fusion.Selection{LeftOut: []int{3, 1}}}},
		{"negative cut", FuseRequest{RunID: "r", Mode: cfg.Mode, DenoiseConfig: cfg.DenoiseConfig(), Advantage: cfg.AdvantageConfig(),
			Selective: &fusion.Selection{LeftOut: []int{1}, Cut: -1}}},
		{"NaN max ratio", FuseRequest{RunID: "r", Mode: cfg.Mode, DenoiseConfig: cfg.DenoiseConfig(), Advantage: cfg.AdvantageConfig(),
			Selective: &fusion.Selection{LeftOut: []int{1}, Cut: 0.2, MaxRatio: math.NaN()}}},
		{"update from other checkpoint", UpdateRequest{RunID: "r", Step: 1, Checkpoint: CheckpointRef{Version: 0, Hash: "h"}}},
		{"update sampled from its own checkpoint", UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"},
			Sampled: &CheckpointRef{Version: 5, Hash: "h"}, RatioClip: 0.2}},
		{"update sampled from a later checkpoint", UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"},
			Sampled: &CheckpointRef{Version: 6, Hash: "h"}, RatioClip: 0.2}},
		{"update sampled too far back", UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"},
			Sampled: &CheckpointRef{Version: 0, Hash: "h"}, RatioClip: 0.2}},
		{"update sampled without a clip", UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"},
			Sampled: &CheckpointRef{Version: 4, Hash: "h"}}},
		{"update with a clip and no sampler", UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"}, RatioClip: 0.2}},
		{"update sampled from a checkpoint without hash", UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"},
			Sampled: &CheckpointRef{Version: 4}, RatioClip: 0.2}},
		{"evaluate without task", EvaluateRequest{RunID: "r", Checkpoint: CheckpointRef{Hash: "h"}, Samples: 1, Limits: cfg.Sandbox.Limits()}},
		{"bad config", CreateRunRequest{RunID: "r"}},
	}
	for _, ok := range []interface{ Validate() error }{good,
		FuseRequest{RunID: "r", Mode: cfg.Mode, DenoiseConfig: cfg.DenoiseConfig(), Advantage: cfg.AdvantageConfig(),
			Selective: &fusion.Selection{LeftOut: []int{1, 3}, Cut: 0.2, MaxRatio: 2.5}},
		UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"}},
		UpdateRequest{RunID: "r", Step: 5, Checkpoint: CheckpointRef{Version: 5, Hash: "h"}, Sampled: &CheckpointRef{Version: 1, Hash: "g"}, RatioClip: 0.2},
	} {
		if err := ok.Validate(); err != nil {
			t.Fatalf("valid request %+v refused: %v", ok, err)
		}
	}
	for _, tt := range tests {
		if err := tt.give.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", tt.name, tt.give)
		}
	}
}
