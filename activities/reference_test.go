package activities

import (
	"testing"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/grpoloop"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

// driveRun calls the activities of a run directly, in the order
// TrainingStep calls them (one at a time, groups and samples ascending), for
// cfg.Steps steps, and returns the hashes of checkpoints 0..cfg.Steps.
func driveRun(t testing.TB, a *Activities, run string, cfg runconfig.Config) []string {
	t.Helper()
	hashes, _ := driveRunSampled(t, a, run, cfg, nil, 0)
	return hashes
}

// driveRunSampled is driveRun whose Update of step s names sampled(s,
// checkpoints 0..s) as the sampling checkpoint, with ratio clip clip, when
// sampled is not nil and returns one; it also returns the updates' stats.
func driveRunSampled(t testing.TB, a *Activities, run string, cfg runconfig.Config,
	sampled func(step int, cks []CheckpointRef) *CheckpointRef, clip float64) ([]string, []UpdateResponse) {
	t.Helper()
	var ups []UpdateResponse
	var cks []CheckpointRef
	ctx := t.Context()
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ck := created.Checkpoint
	hashes := []string{ck.Hash}
	cks = append(cks, ck)
	pc := cfg.Mode.Pieces()
	G, n := cfg.Groups, cfg.Samples
	var dst denoise.State
	for s := range cfg.Steps {
		if err := a.StartStep(ctx, StepRequest{RunID: run, Step: s}); err != nil {
			t.Fatal(err)
		}
		for g := range G {
			_, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: s, Group: g, Samples: n, Seed: cfg.Seed,
				SuiteSeed: cfg.SuiteSeed, Checkpoint: ck})
			if err != nil {
				t.Fatalf("step %d: generate group %d: %v", s, g, err)
			}
		}
		anc := []int{}
		if pc.Anchors {
			anc, err = anchors.Select(cfg.Seed, s, G, cfg.Anchors.Fraction, cfg.Anchors.Min, cfg.FreeCapacity())
			if err != nil {
				t.Fatal(err)
			}
		}
		if pc.WorldModel {
			for g := range G {
				if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: s, Group: g, SuiteSeed: cfg.SuiteSeed}); err != nil {
					t.Fatalf("step %d: score group %d: %v", s, g, err)
				}
			}
		}
		execGroups := anc
		if pc.ExecuteAll {
			execGroups = make([]int, G)
			for g := range execGroups {
				execGroups[g] = g
			}
		}
		for _, g := range execGroups {
			for i := range n {
				_, err := a.Execute(ctx, ExecuteRequest{RunID: run, Step: s, Group: g, Sample: i, Seed: cfg.Seed,
					SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget})
				if err != nil {
					t.Fatalf("step %d: execute group %d sample %d: %v", s, g, i, err)
				}
			}
		}
		if len(anc) > 0 {
			if _, err := a.RecordAnchors(ctx, RecordAnchorsRequest{RunID: run, Step: s, Groups: anc}); err != nil {
				t.Fatal(err)
			}
		}
		if pc.Debias {
			if _, err := a.Calibrate(ctx, CalibrateRequest{RunID: run, Step: s, Debias: cfg.DebiasConfig()}); err != nil {
				t.Fatal(err)
			}
		}
		fused, err := a.Fuse(ctx, FuseRequest{RunID: run, Step: s, Mode: cfg.Mode, Anchors: anc, Denoise: dst,
			DenoiseConfig: cfg.DenoiseConfig(), Advantage: cfg.AdvantageConfig()})
		if err != nil {
			t.Fatalf("step %d: fuse: %v", s, err)
		}
		dst = fused.Denoise
		req := UpdateRequest{RunID: run, Step: s, SuiteSeed: cfg.SuiteSeed, Checkpoint: ck}
		if sampled != nil {
			if req.Sampled = sampled(s, cks); req.Sampled != nil {
				req.RatioClip = clip
			}
		}
		up, err := a.Update(ctx, req)
		if err != nil {
			t.Fatalf("step %d: update: %v", s, err)
		}
		ups = append(ups, up)
		ck = up.Checkpoint
		hashes = append(hashes, ck.Hash)
		cks = append(cks, ck)
	}
	return hashes, ups
}

// TestReferenceLoopAgrees runs a few steps of grpo on the small test suite
// twice: through the activities (driveRun: Postgres, the in-process
// sandbox, checkpoints saved and loaded) and with the in-process reference
// loop (grpoloop, from InitPolicy). Both take their seeded choices from
// internal/plan and their fusion from internal/fusion, so every step must
// give the same tasks, programs, metrics, scores and checkpoint hashes.
// (Scores are leaderboard positions and seldom move with the execution
// seed; the metrics of the rff programs sampled here do.) The budget is
// small enough that some programs are refused, to cover that path too.
func TestReferenceLoopAgrees(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	cfg.Mode = mode.GRPO
	cfg.Steps = 4
	cfg.Sandbox.Budget = 3e6
	const run = "agree"
	want := driveRun(t, a, run, cfg)

	s, err := testenv.SmallSuite()
	if err != nil {
		t.Fatal(err)
	}
	var train []string
	for _, tk := range s.Split(suite.Train) {
		train = append(train, tk.ID)
	}
	p, err := grpoloop.InitPolicy(builtin.PolicyConfig(policySettings(cfg), suite.VectorLen), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	l, err := grpoloop.New(s, p, train, grpoloop.Config{Seed: cfg.Seed, Groups: cfg.Groups, Samples: cfg.Samples,
		Advantage: cfg.AdvantageConfig(),
		Exec:      grpoloop.ExecConfig{Budget: cfg.Sandbox.Budget, DeadlineSeconds: cfg.Sandbox.DeadlineSeconds}})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{p.Hash()}
	var refused int
	for step := range cfg.Steps {
		r, err := l.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Hash())
		refused += r.Cost.Refused
		stored, err := a.Store.StepTrajectories(ctx, run, step)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != len(r.Trajectories) {
			t.Fatalf("step %d: %d stored trajectories, the reference loop has %d", step, len(stored), len(r.Trajectories))
		}
		for i, st := range stored {
			rt := r.Trajectories[i]
			if st.Group != rt.Group || st.Sample != rt.Sample || st.TaskID != rt.TaskID || st.Program != rt.Program ||
				st.Exec == nil || st.Exec.Status != rt.Result.Status || st.Exec.Score != rt.Result.Score ||
				st.Exec.Metric != rt.Result.Metric {
				t.Errorf("step %d trajectory %d: activities %s %s %q %+v, reference loop group %d sample %d %s %q %+v",
					step, i, st.Key, st.TaskID, st.Program, st.Exec, rt.Group, rt.Sample, rt.TaskID, rt.Program, rt.Result)
			}
		}
	}
	t.Logf("checkpoint hashes of %d grpo steps of %dx%d (%d programs refused by the budget):", cfg.Steps, cfg.Groups, cfg.Samples, refused)
	for v := range want {
		t.Logf("  %d: activities %.16s  reference loop %.16s", v, want[v], got[v])
		if got[v] != want[v] {
			t.Errorf("checkpoint %d: the reference loop has hash %s, the activities %s", v, got[v], want[v])
		}
	}
	if refused == 0 {
		t.Errorf("no program refused by the budget of %g: want some, to cover the refusal path", cfg.Sandbox.Budget)
	}
}
