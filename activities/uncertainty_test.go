package activities

import (
	"reflect"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/plan"
)

// TestAnchorUncertaintyAndWeights: RecordAnchors stores the anchor groups'
// weights with their pairs; AnchorUncertainty gives the prior before any
// pair and, after, the per-task root-mean-square residual of the stored
// pairs on the tasks Generate chose, the same on a retry.
func TestAnchorUncertaintyAndWeights(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	run := "unc"
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	req := AnchorUncertaintyRequest{RunID: run, Step: 0, Groups: 6, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed}
	u0, err := a.AnchorUncertainty(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	train, err := a.tasks(ctx, run, cfg.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	for g := range 6 {
		if u0.Tasks[g] != plan.TaskIndex(cfg.Seed, 0, g, len(train)) || u0.Uncertainty[g] != anchors.DefaultPriorResidual {
			t.Fatalf("step 0: %+v", u0)
		}
	}
	if u0.Sigma0 != anchors.DefaultPriorResidual {
		t.Errorf("step 0: σ0 %v, want %v", u0.Sigma0, anchors.DefaultPriorResidual)
	}

	groups, weights := []int{0, 1}, []float64{0.5, 2}
	for _, g := range groups {
		gr, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: 0, Group: g, Samples: cfg.Samples, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint})
		if err != nil {
			t.Fatal(err)
		}
		if train[u0.Tasks[g]].ID != gr.TaskID {
			t.Fatalf("group %d: Generate chose %s, AnchorUncertainty task %d (%s)", g, gr.TaskID, u0.Tasks[g], train[u0.Tasks[g]].ID)
		}
		if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: 0, Group: g, SuiteSeed: cfg.SuiteSeed}); err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Samples {
			if _, err := a.Execute(ctx, ExecuteRequest{RunID: run, Step: 0, Group: g, Sample: i, Seed: cfg.Seed,
				SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := a.RecordAnchors(ctx, RecordAnchorsRequest{RunID: run, Step: 0, Groups: groups, Weights: []float64{1}}); err == nil {
		t.Fatal("RecordAnchors accepted one weight for two groups")
	}
	if _, err := a.RecordAnchors(ctx, RecordAnchorsRequest{RunID: run, Step: 0, Groups: groups, Weights: weights}); err != nil {
		t.Fatal(err)
	}
	pairs, err := a.Store.StepAnchorPairs(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 2*cfg.Samples {
		t.Fatalf("%d pairs, want %d", len(pairs), 2*cfg.Samples)
	}
	var past []anchors.Residual
	for _, p := range pairs {
		want := weights[p.Group]
		if p.Pair().W() != want {
			t.Errorf("pair %s: weight %v, want %v", p.Key, p.Pair().W(), want)
		}
		past = append(past, anchors.Residual{Task: plan.TaskIndex(cfg.Seed, 0, p.Group, len(train)), Value: p.Env - p.WM, Weight: p.Weight})
	}

	req.Step = 1
	u1, err := a.AnchorUncertainty(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	tasks := make([]int, 6)
	for g := range tasks {
		tasks[g] = plan.TaskIndex(cfg.Seed, 1, g, len(train))
	}
	want := AnchorUncertaintyResponse{Tasks: tasks, Uncertainty: anchors.Uncertainty(tasks, past), Pairs: len(pairs),
		Sigma0: anchors.RunResidual(past)}
	if !reflect.DeepEqual(u1, want) {
		t.Errorf("step 1: %+v, want %+v", u1, want)
	}
	again, err := a.AnchorUncertainty(ctx, req)
	if err != nil || !reflect.DeepEqual(again, u1) {
		t.Errorf("retry: %+v, %v; first %+v", again, err, u1)
	}
	if _, err := a.AnchorUncertainty(ctx, AnchorUncertaintyRequest{RunID: run, Step: 1}); err == nil {
		t.Error("no groups accepted")
	}
}

// TestAnchorUncertaintyLag: in a run with pipeline.max_off_policy 1, step
// s's uncertainty with lag 1 reads the pairs of steps 0..s−2 only (the
// steps complete before step s starts): at step 1 none (the prior), at
// step 2 step 0's, the same whether step 1's pairs are recorded yet or
// not; a lag other than the run's d is refused.
func TestAnchorUncertaintyLag(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	cfg.Pipeline.MaxOffPolicy = 1
	run := "unc-lag"
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	train, err := a.tasks(ctx, run, cfg.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	// anchor records group 0 of a step as its one anchor group, sampled
	// from checkpoint 0 (step 0's own, step 1's sampler with d = 1).
	anchor := func(step int) {
		t.Helper()
		if _, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: step, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: step, Group: 0, SuiteSeed: cfg.SuiteSeed}); err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Samples {
			if _, err := a.Execute(ctx, ExecuteRequest{RunID: run, Step: step, Group: 0, Sample: i, Seed: cfg.Seed,
				SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.RecordAnchors(ctx, RecordAnchorsRequest{RunID: run, Step: step, Groups: []int{0}}); err != nil {
			t.Fatal(err)
		}
	}
	unc := func(step, lag int) AnchorUncertaintyResponse {
		t.Helper()
		u, err := a.AnchorUncertainty(ctx, AnchorUncertaintyRequest{RunID: run, Step: step, Groups: 4, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Lag: lag})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	anchor(0)
	if u := unc(1, 1); u.Pairs != 0 || u.Uncertainty[0] != anchors.DefaultPriorResidual {
		t.Errorf("step 1, lag 1: %+v, want the prior (step 0 may be in flight)", u)
	}
	if u := unc(1, 0); u.Pairs != cfg.Samples {
		t.Errorf("step 1, lag 0: %d pairs, want step 0's %d", u.Pairs, cfg.Samples)
	}
	before := unc(2, 1)
	pairs, err := a.Store.StepAnchorPairs(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	var past []anchors.Residual
	for _, p := range pairs {
		past = append(past, anchors.Residual{Task: plan.TaskIndex(cfg.Seed, 0, p.Group, len(train)), Value: p.Env - p.WM, Weight: p.Weight})
	}
	tasks := make([]int, 4)
	for g := range tasks {
		tasks[g] = plan.TaskIndex(cfg.Seed, 2, g, len(train))
	}
	want := AnchorUncertaintyResponse{Tasks: tasks, Uncertainty: anchors.Uncertainty(tasks, past), Pairs: len(pairs),
		Sigma0: anchors.RunResidual(past)}
	if !reflect.DeepEqual(before, want) {
		t.Errorf("step 2, lag 1: %+v, want step 0's pairs %+v", before, want)
	}
	anchor(1)
	if after := unc(2, 1); !reflect.DeepEqual(after, before) {
		t.Errorf("step 2, lag 1, once step 1's pairs are recorded: %+v, before %+v", after, before)
	}
	if u := unc(2, 0); u.Pairs != 2*cfg.Samples {
		t.Errorf("step 2, lag 0: %d pairs, want steps 0 and 1's %d", u.Pairs, 2*cfg.Samples)
	}
	_, err = a.AnchorUncertainty(ctx, AnchorUncertaintyRequest{RunID: run, Step: 2, Groups: 4, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed, Lag: 2})
	if err == nil || !strings.Contains(err.Error(), "pipeline.max_off_policy is 1") {
		t.Errorf("lag 2 in a run with d = 1: %v, want refused", err)
	}
}
