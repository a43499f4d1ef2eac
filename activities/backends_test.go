package activities

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/wmrl/wmrl/internal/backend"
)

// countingPolicy delegates to a policy and counts its calls.
type countingPolicy struct {
	backend.Policy
	calls atomic.Int64
}

func (p *countingPolicy) Init(ctx context.Context, req backend.InitRequest) (backend.Checkpoint, error) {
	p.calls.Add(1)
	return p.Policy.Init(ctx, req)
}

func (p *countingPolicy) Sample(ctx context.Context, req backend.SampleRequest) ([]backend.Completion, error) {
	p.calls.Add(1)
	return p.Policy.Sample(ctx, req)
}

// countingWM delegates to a world model and counts its calls.
type countingWM struct {
	backend.WorldModel
	calls atomic.Int64
}

func (w *countingWM) Score(ctx context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	w.calls.Add(1)
	return w.WorldModel.Score(ctx, items)
}

// countingGrader delegates to a grader and counts its calls.
type countingGrader struct {
	backend.Grader
	calls atomic.Int64
}

func (g *countingGrader) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	g.calls.Add(1)
	return g.Grader.Grade(ctx, req)
}

// A run's policy.backend, world_model.backend and sandbox.kind pick the
// worker's adapter of that name for every activity of that run, while a
// run of the same worker that names none uses the built-in ones; a run
// naming a backend the worker lacks fails for good, naming the field.
func TestRunPicksItsBackends(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	pol := &countingPolicy{Policy: a.Policy}
	wm := &countingWM{WorldModel: a.WorldModel}
	gr := &countingGrader{Grader: a.Grader}
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol},
		backend.Entry{Kind: backend.KindWorldModel, Name: backend.OpenAI, Adapter: wm},
		backend.Entry{Kind: backend.KindGrader, Name: backend.GradeHTTP, Adapter: gr})

	step := func(run string, remote bool) {
		t.Helper()
		cfg := tinyConfig(t)
		if remote {
			cfg.Policy.Backend, cfg.WorldModel.Backend, cfg.Sandbox.Kind = backend.Tinker, backend.OpenAI, backend.GradeHTTP
		}
		created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: 0, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: 0, Group: 0, SuiteSeed: cfg.SuiteSeed}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Execute(ctx, ExecuteRequest{RunID: run, Step: 0, Group: 0, Sample: 0, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits()}); err != nil {
			t.Fatal(err)
		}
	}
	step("plain", false)
	if pol.calls.Load() != 0 || wm.calls.Load() != 0 || gr.calls.Load() != 0 {
		t.Fatalf("a run naming no backend used the remote ones: policy %d, world model %d, grader %d calls",
			pol.calls.Load(), wm.calls.Load(), gr.calls.Load())
	}
	step("remote", true)
	if pol.calls.Load() != 2 || wm.calls.Load() != 1 || gr.calls.Load() != 1 {
		t.Fatalf("a run naming the remote backends: policy %d (want 2), world model %d (want 1), grader %d (want 1) calls",
			pol.calls.Load(), wm.calls.Load(), gr.calls.Load())
	}
	if _, err := a.Preflight(ctx, PreflightRequest{Kind: backend.GradeHTTP, Limits: tinyConfig(t).Sandbox.Limits()}); err != nil {
		t.Errorf("preflight of the remote grader: %v", err)
	}

	// A worker without them.
	b, _ := newTestActivities(t)
	cfg := tinyConfig(t)
	cfg.Policy.Backend = backend.Tinker
	_, err := b.CreateRun(ctx, CreateRunRequest{RunID: "lacks", Config: cfg})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), `policy.backend: "tinker"`) {
		t.Errorf("CreateRun on a worker without tinker = %v, want a non-retryable error naming policy.backend", err)
	}
	_, err = b.Preflight(ctx, PreflightRequest{Kind: backend.GradeHTTP, Limits: cfg.Sandbox.Limits()})
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), `sandbox.kind: "grade-http"`) {
		t.Errorf("Preflight of grade-http on a worker without it = %v", err)
	}
}

// tokenPolicy is the built-in policy as a remote one would answer: every
// completion with token ids and logprobs (made up from the text), and
// every update's batch kept.
type tokenPolicy struct {
	backend.Policy
	batches [][]backend.Datum
}

func (p *tokenPolicy) Sample(ctx context.Context, req backend.SampleRequest) ([]backend.Completion, error) {
	cs, err := p.Policy.Sample(ctx, req)
	for i := range cs {
		cs[i].Tokens = []int{len(cs[i].Text), i}
		cs[i].LogProbs = []float64{-float64(i), -0.5}
	}
	return cs, err
}

func (p *tokenPolicy) Update(ctx context.Context, req backend.UpdateRequest) (backend.Checkpoint, backend.UpdateStats, error) {
	p.batches = append(p.batches, req.Batch)
	return p.Policy.Update(ctx, req)
}

// A remote policy's token ids and logprobs are stored with the
// trajectories and handed back to its update, with the same checkpoints as
// the built-in policy gives without them.
func TestRemotePolicyGetsItsTokens(t *testing.T) {
	a, _ := newTestActivities(t)
	pol := &tokenPolicy{Policy: a.Policy}
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol})
	cfg := tinyConfig(t)
	cfg.Steps = 2
	want := driveRun(t, a, "builtin", cfg)
	cfg.Policy.Backend = backend.Tinker
	got := driveRun(t, a, "remote", cfg)
	if !slices.Equal(got, want) {
		t.Errorf("checkpoints through the remote policy %v, built-in %v", got, want)
	}
	if len(pol.batches) != cfg.Steps {
		t.Fatalf("%d updates, want %d", len(pol.batches), cfg.Steps)
	}
	for s, batch := range pol.batches {
		for _, d := range batch {
			if len(d.Tokens) != 2 || d.Tokens[0] != len(d.Text) || d.Tokens[1] != d.Sample ||
				!slices.Equal(d.LogProbs, []float64{-float64(d.Sample), -0.5}) {
				t.Fatalf("step %d group %d sample %d: tokens %v logprobs %v", s, d.Group, d.Sample, d.Tokens, d.LogProbs)
			}
		}
	}
}

// capacityGrader says it takes 24 executions at once.
type capacityGrader struct{ backend.Grader }

func (capacityGrader) Capacity(context.Context) (int, error) { return 24, nil }

// GraderCapacity is the run's grader's capacity, -1 when it has none to
// tell (the worker's own sandbox).
func TestGraderCapacity(t *testing.T) {
	a, _ := newTestActivities(t)
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindGrader, Name: backend.GradeHTTP, Adapter: capacityGrader{a.Grader}})
	for _, tt := range []struct {
		kind string
		want int
	}{{"auto", -1}, {backend.GradeHTTP, 24}} {
		cfg := tinyConfig(t)
		cfg.Sandbox.Kind = tt.kind
		run := "cap" + tt.kind
		if _, err := a.CreateRun(t.Context(), CreateRunRequest{RunID: run, Config: cfg}); err != nil {
			t.Fatal(err)
		}
		if n, err := a.GraderCapacity(t.Context(), GraderCapacityRequest{RunID: run}); err != nil || n != tt.want {
			t.Errorf("sandbox.kind %q: capacity %d, %v, want %d", tt.kind, n, err, tt.want)
		}
	}
}

// countingSource delegates to a task source and counts its calls.
type countingSource struct {
	backend.TaskSource
	calls atomic.Int64
}

func (s *countingSource) Tasks(ctx context.Context, suite uint64, split backend.Split) ([]backend.Task, error) {
	s.calls.Add(1)
	return s.TaskSource.Tasks(ctx, suite, split)
}

func (s *countingSource) Task(ctx context.Context, suite uint64, id string) (backend.Task, error) {
	s.calls.Add(1)
	return s.TaskSource.Task(ctx, suite, id)
}

// A run's tasks picks the worker's task source of that name for every
// activity of the run (HeldOutTasks by its run id; without one, the
// built-in suite), and a run of the built-in policy gets its sandbox.kind's
// program grader over the plain one; a worker lacking the source fails the
// run for good, naming tasks.
func TestRunPicksItsTaskSource(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	src := &countingSource{TaskSource: a.Tasks}
	plain, programs := &countingGrader{Grader: a.Grader}, &countingGrader{Grader: a.Grader}
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindTasks, Name: backend.TaskStore, Adapter: src},
		backend.Entry{Kind: backend.KindGrader, Name: backend.Python, Adapter: plain},
		backend.Entry{Kind: backend.KindProgramGrader, Name: backend.Python, Adapter: programs})
	cfg := tinyConfig(t)
	if _, err := a.HeldOutTasks(ctx, HeldOutTasksRequest{SuiteSeed: cfg.SuiteSeed}); err != nil || src.calls.Load() != 0 {
		t.Fatalf("HeldOutTasks without a run: %v, store source called %d times", err, src.calls.Load())
	}
	cfg.Tasks, cfg.Sandbox.Kind = backend.TaskStore, backend.Python
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: "real", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Generate(ctx, GenerateRequest{RunID: "real", Step: 0, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed,
		SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: "real", Step: 0, Group: 0, SuiteSeed: cfg.SuiteSeed}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Execute(ctx, ExecuteRequest{RunID: "real", Step: 0, Group: 0, Sample: 0, Seed: cfg.Seed,
		SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits()}); err != nil {
		t.Fatal(err)
	}
	before := src.calls.Load()
	if before < 4 {
		t.Errorf("store source called %d times by CreateRun, Generate, ScoreWorldModel and Execute, want at least 4", before)
	}
	if _, err := a.HeldOutTasks(ctx, HeldOutTasksRequest{RunID: "real", SuiteSeed: cfg.SuiteSeed}); err != nil || src.calls.Load() != before+1 {
		t.Errorf("HeldOutTasks of the run: %v, store source calls %d, want %d", err, src.calls.Load(), before+1)
	}
	if programs.calls.Load() != 1 || plain.calls.Load() != 0 {
		t.Errorf("built-in policy on sandbox.kind python: program grader %d calls (want 1), plain grader %d (want 0)",
			programs.calls.Load(), plain.calls.Load())
	}

	b, _ := newTestActivities(t)
	_, err = b.CreateRun(ctx, CreateRunRequest{RunID: "lacks", Config: cfg})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), `tasks: "store"`) {
		t.Errorf("CreateRun on a worker without the store = %v, want a non-retryable error naming tasks", err)
	}
}
