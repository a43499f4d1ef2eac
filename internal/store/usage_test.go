package store

import (
	"math"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
)

func TestRunUsage(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	// Step 0: 2 groups of 2, all scored, group 1 executed. Step 1: 1 group
	// of 2, not scored, both executed.
	sols := append(solutions(r.ID, 0, 2, 2), solutions(r.ID, 1, 1, 2)...)
	if _, err := s.InsertTrajectories(ctx, sols); err != nil {
		t.Fatal(err)
	}
	var scores []Score
	for _, x := range sols[:4] {
		scores = append(scores, Score{Key: x.Key, WM: 0.5})
	}
	if err := s.SetWMScores(ctx, scores); err != nil {
		t.Fatal(err)
	}
	exec := func(k Key, cpu, wall float64) Execution {
		e := Execution{Key: k, Result: executor.NewResult(executor.StatusOK, 0.5, 0.5, "")}
		e.Result.CPUSeconds, e.Result.WallSeconds = cpu, wall
		return e
	}
	execs := []Execution{exec(sols[2].Key, 1, 2), exec(sols[3].Key, 0.5, 1), exec(sols[4].Key, 2, 3), exec(sols[5].Key, 4, 5)}
	if _, err := s.RecordExecutions(ctx, execs); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunUsage(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []StepUsage{
		{Step: 0, Trajectories: 4, WMScored: 4, Executed: 2, CPUSeconds: 1.5, WallSeconds: 3},
		{Step: 1, Trajectories: 2, WMScored: 0, Executed: 2, CPUSeconds: 6, WallSeconds: 8},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("RunUsage = %+v, want %+v", got, want)
	}
	if us, err := s.RunUsage(ctx, "no such run"); err != nil || len(us) != 0 {
		t.Errorf("RunUsage of an unknown run = %v, %v", us, err)
	}
}

func TestRunEvaluations(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	res := func(pos, cpu float64) executor.Result {
		x := executor.NewResult(executor.StatusOK, 0, pos, "")
		x.CPUSeconds, x.WallSeconds = cpu, 2*cpu
		return x
	}
	fail := executor.Failed(executor.StatusRuntimeError, "boom")
	fail.CPUSeconds, fail.WallSeconds = 1, 2
	evs := []Evaluation{
		{Run: r.ID, Step: 2, TaskID: "a", Sample: 0, Program: "p", Result: res(1, 0.5)},
		{Run: r.ID, Step: 2, TaskID: "a", Sample: 1, Program: "p", Result: res(0.5, 0.5)},
		{Run: r.ID, Step: 2, TaskID: "b", Sample: 0, Program: "q", Result: fail},
		{Run: r.ID, Step: 2, TaskID: "b", Sample: 1, Program: "q", Result: res(0.25, 1)},
		{Run: r.ID, Step: 4, TaskID: "a", Sample: 0, Program: "p", Result: res(0.75, 3)},
		// A sample of a 3-turn evaluation: three executions, one row.
		{Run: r.ID, Step: 5, TaskID: "a", Sample: 0, Program: "p", Result: res(0.5, 3), Executions: 3},
		// Of a 3-turn sample's turns, 2 executed nothing (request_info,
		// malformed): one execution.
		{Run: r.ID, Step: 5, TaskID: "a", Sample: 1, Program: "p", Result: res(0.5, 1), Executions: 3, Unexecuted: 2},
	}
	if _, err := s.SaveEvaluations(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunEvaluations(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("RunEvaluations = %+v, want 3 steps", got)
	}
	for _, e := range got {
		h, err := s.HeldOutScore(ctx, r.ID, e.Step)
		if err != nil {
			t.Fatal(err)
		}
		if e.HeldOut.Tasks != h.Tasks || e.HeldOut.Samples != h.Samples || e.HeldOut.Score != h.Score {
			t.Errorf("step %d: held-out %+v, HeldOutScore %+v", e.Step, e.HeldOut, h)
		}
	}
	if e := got[0]; e.Step != 2 || e.Executions != 4 || e.CPUSeconds != 3 || e.WallSeconds != 6 ||
		math.Abs(e.HeldOut.Score-((1+0.5)/2+(0+0.25)/2)/2) > 1e-12 {
		t.Errorf("step 2: %+v", e)
	}
	if e := got[1]; e.Step != 4 || e.Executions != 1 || e.CPUSeconds != 3 || e.HeldOut.Score != 0.75 {
		t.Errorf("step 4: %+v", e)
	}
	if e := got[2]; e.Step != 5 || e.Executions != 4 || e.Unexecuted != 2 || e.HeldOut.Samples != 2 || e.HeldOut.Score != 0.5 {
		t.Errorf("step 5 (3 turns): %+v, want 4 executions, 2 unexecuted turns, 2 samples", e)
	}
	if back, err := s.Evaluations(ctx, r.ID, 5); err != nil || len(back) != 2 || back[0].Executions != 3 || back[0].Unexecuted != 0 ||
		back[1].Executions != 3 || back[1].Unexecuted != 2 {
		t.Errorf("Evaluations of step 5 = %+v, %v: want rows of 3 turns, 0 and 2 of them unexecuted", back, err)
	}
	if _, err := s.SaveEvaluations(ctx, []Evaluation{{Run: r.ID, Step: 6, TaskID: "a", Sample: 0, Program: "p", Result: res(0.5, 1),
		Executions: 2, Unexecuted: 3}}); !contains(err, "3 unexecuted of 2 executions") {
		t.Errorf("more unexecuted turns than turns: %v", err)
	}
	if back, err := s.Evaluations(ctx, r.ID, 4); err != nil || len(back) != 1 || back[0].Executions != 0 {
		t.Errorf("Evaluations of step 4 = %+v, %v: want one row of 1 execution (read as 0)", back, err)
	}
}
