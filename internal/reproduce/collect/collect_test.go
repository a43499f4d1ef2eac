package collect

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/reproduce"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

// write stores a 3-step wmrl-like run directly: 2 groups of 2 per step, all
// scored by the world model, group 1 executed (CPU 1 s and 0.5 s, wall
// twice that), evaluations of checkpoints 2 and 3 (2 samples of one task),
// step 2 still running when done is false.
func write(t *testing.T, st *store.Store, id string, done bool) {
	t.Helper()
	ctx := t.Context()
	run := store.Run{ID: id, Name: id, Mode: mode.WMRL, Config: json.RawMessage(`{}`), Seed: 7, Steps: 3, State: store.RunRunning}
	if err := st.UpsertRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		if err := st.StartStep(ctx, id, step); err != nil {
			t.Fatal(err)
		}
		var sols []store.Solution
		var scores []store.Score
		for g := range 2 {
			for i := range 2 {
				k := store.Key{Run: id, Step: step, Group: g, Sample: i}
				sols = append(sols, store.Solution{Key: k, TaskID: "t", Program: "p"})
				scores = append(scores, store.Score{Key: k, WM: 0.5})
			}
		}
		if _, err := st.InsertTrajectories(ctx, sols); err != nil {
			t.Fatal(err)
		}
		if err := st.SetWMScores(ctx, scores); err != nil {
			t.Fatal(err)
		}
		var execs []store.Execution
		for i, cpu := range []float64{1, 0.5} {
			e := store.Execution{Key: store.Key{Run: id, Step: step, Group: 1, Sample: i},
				Result: executor.NewResult(executor.StatusOK, 0.6, 0.4, "")}
			e.Result.CPUSeconds, e.Result.WallSeconds = cpu, 2*cpu
			execs = append(execs, e)
		}
		if _, err := st.RecordExecutions(ctx, execs); err != nil {
			t.Fatal(err)
		}
		if step == 2 && !done {
			break
		}
		m := stepsummary.Step{Groups: 2, AnchorGroups: 1, Rho: 1 + float64(step), BiasBefore: 0.3, BiasAfter: -0.1}
		if err := st.FinishStep(ctx, id, step, store.StepCompleted, m); err != nil {
			t.Fatal(err)
		}
		if step >= 1 {
			var evs []store.Evaluation
			for i := range 2 {
				r := executor.NewResult(executor.StatusOK, 0.7, 0.25*float64(step+i), "")
				r.CPUSeconds, r.WallSeconds = 0.25, 0.5
				evs = append(evs, store.Evaluation{Run: id, Step: step + 1, TaskID: "h", Sample: i, Program: "p", Result: r})
			}
			if _, err := st.SaveEvaluations(ctx, evs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if done {
		if err := st.SetRunState(ctx, id, store.RunCompleted); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunCompleted(t *testing.T) {
	st := testenv.FreshStore(t)
	write(t, st, "bench-wmrl-7", true)
	rec, run, err := Run(t.Context(), st, "bench-wmrl-7")
	if err != nil {
		t.Fatal(err)
	}
	if run.State != store.RunCompleted || rec.Mode != mode.WMRL || rec.Seed != 7 || rec.RunID != "bench-wmrl-7" {
		t.Fatalf("run %+v record %+v", run, rec)
	}
	if len(rec.Steps) != 3 {
		t.Fatalf("%d steps, want 3", len(rec.Steps))
	}
	for i, s := range rec.Steps {
		if s.Step != i || s.Groups != 2 || s.AnchorGroups != 1 || s.Executions != 2 || s.CPUSeconds != 1.5 ||
			s.WallSeconds != 3 || s.WMCalls != 4 || s.Rho != float64(1+i) || s.BiasBefore != 0.3 || s.BiasAfter != -0.1 {
			t.Errorf("step %d: %+v", i, s)
		}
		// Checkpoints 2 and 3 (after steps 1 and 2) were evaluated:
		// positions (0.25·(s+1), 0.25·(s+2)).
		switch i {
		case 0:
			if s.HeldOut != nil || s.EvalExecutions != 0 {
				t.Errorf("step 0 evaluated: %+v", s)
			}
		default:
			want := 0.25 * (float64(i) + 0.5)
			if s.HeldOut == nil || *s.HeldOut != want || s.EvalExecutions != 2 || s.EvalCPUSeconds != 0.5 {
				t.Errorf("step %d evaluation: %+v (want held-out %v)", i, s, want)
			}
		}
	}
	if rec.WallSeconds < 0 || rec.WallSeconds > 60 {
		t.Errorf("wall seconds %v", rec.WallSeconds)
	}
	tot, err := reproduce.Totals(rec)
	if err != nil {
		t.Fatal(err)
	}
	if tot.Executions != 6 || tot.SandboxCPUSeconds != 4.5 || tot.EvalExecutions != 4 || tot.WMCalls != 12 ||
		tot.HeldOutScore != 0.625 || tot.AnchorFraction != 0.5 || tot.FinalRho != 3 {
		t.Errorf("totals %+v", tot)
	}
}

func TestRunPartial(t *testing.T) {
	st := testenv.FreshStore(t)
	write(t, st, "bench-partial", false)
	rec, run, err := Run(t.Context(), st, "bench-partial")
	if err != nil {
		t.Fatal(err)
	}
	// Step 2 runs: only steps 0 and 1 are read, and its executions are not
	// counted.
	if run.State != store.RunRunning || len(rec.Steps) != 2 || rec.Steps[1].HeldOut == nil {
		t.Fatalf("partial record %+v", rec)
	}
	if _, _, err := Run(t.Context(), st, "no-such-run"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v, want ErrNotFound", err)
	}
}

// turnReader is a Reader of one completed multi-turn step.
type turnReader struct{}

func (turnReader) Run(context.Context, string) (store.Run, error) {
	return store.Run{ID: "r", Mode: mode.GRPO, Seed: 1, State: store.RunCompleted}, nil
}

func (turnReader) Steps(context.Context, string) ([]store.Step, error) {
	return []store.Step{{Step: 0, Status: store.StepCompleted, Metrics: stepsummary.Step{Groups: 2}}}, nil
}

func (turnReader) RunUsage(context.Context, string) ([]store.StepUsage, error) {
	return []store.StepUsage{{Step: 0, Trajectories: 4, Executed: 4, CPUSeconds: 3, TurnExecutions: 12, TurnWMCalls: 0}}, nil
}

func (turnReader) RunEvaluations(context.Context, string) ([]store.EvalUsage, error) {
	return []store.EvalUsage{{Step: 1, Executions: 6, HeldOut: store.HeldOut{Score: 0.5, Tasks: 1, Samples: 2}}}, nil
}

// TestRunTurns: a multi-turn step's executions are its executed turns
// (store.StepUsage.TurnExecutions), not its executed trajectories; its
// evaluation's executions count every turn of its samples.
func TestRunTurns(t *testing.T) {
	rec, _, err := Run(t.Context(), turnReader{}, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Steps) != 1 {
		t.Fatalf("record %+v", rec)
	}
	if s := rec.Steps[0]; s.Executions != 12 || s.CPUSeconds != 3 || s.EvalExecutions != 6 || s.HeldOut == nil || *s.HeldOut != 0.5 {
		t.Errorf("step %+v: want 12 executions, 3 CPU s, 6 held-out executions, held-out 0.5", s)
	}
}
