package activities

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/turns"
)

// TestReduceAttempts: a sample's row is the attempt the reduction chooses
// among its graded attempts (max: the best, the first of a tie; last: the
// last graded), with the CPU and wall seconds of all of them and their
// count; a sample with no graded attempt has no row.
func TestReduceAttempts(t *testing.T) {
	req := EvaluateRequest{RunID: "r", Checkpoint: CheckpointRef{Version: 2}}
	ok := func(pos float64) backend.Grade {
		return backend.Grade{Graded: true, Status: string(executor.StatusOK), Score: executor.Reward(executor.StatusOK, pos),
			Position: pos, CPUSeconds: 1, WallSeconds: 2}
	}
	fail := backend.Grade{Graded: true, Status: string(executor.StatusRuntimeError),
		Score: executor.Reward(executor.StatusRuntimeError, 0), CPUSeconds: 0.5, WallSeconds: 1}
	ungraded := backend.Grade{Status: backend.StatusUngraded, CPUSeconds: 0.25}
	progs := []string{"p1", "p2", "p3"}
	tests := []struct {
		name   string
		how    string
		word   string
		grades []backend.Grade
		at     int // -1: no row
		detail string
	}{
		{"max picks the best", turns.Max, "turn", []backend.Grade{ok(0.2), ok(0.7), ok(0.4)}, 1, "max over 3 turns: turn 2"},
		{"max tie is the first", turns.Max, "turn", []backend.Grade{fail, ok(0.5), ok(0.5)}, 1, "max over 3 turns: turn 2"},
		{"max over failures", turns.Max, "turn", []backend.Grade{fail, fail, fail}, 0, "max over 3 turns: turn 1"},
		{"last graded", turns.Last, "turn", []backend.Grade{ok(0.9), fail, ungraded}, 1, "last over 3 turns: turn 2"},
		{"ungraded left out", turns.Max, "turn", []backend.Grade{ungraded, fail, ungraded}, 1, "max over 3 turns: turn 2"},
		{"no verdict", turns.Max, "turn", []backend.Grade{ungraded, ungraded, ungraded}, -1, ""},
		{"best of", turns.Max, "attempt", []backend.Grade{ok(0.1), fail, ok(0.3)}, 2, "best of 3: attempt 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, got, err := reduceAttempts(req, "task", 4, tt.how, tt.word, progs, tt.grades)
			if err != nil {
				t.Fatal(err)
			}
			if got != (tt.at >= 0) {
				t.Fatalf("row %v, want %v", got, tt.at >= 0)
			}
			if !got {
				return
			}
			var cpu, wall float64
			for _, g := range tt.grades {
				cpu, wall = cpu+g.CPUSeconds, wall+g.WallSeconds
			}
			want := tt.grades[tt.at]
			if ev.Program != progs[tt.at] || string(ev.Result.Status) != want.Status || ev.Result.Position != want.Position ||
				ev.Result.CPUSeconds != cpu || ev.Result.WallSeconds != wall || ev.Executions != 3 ||
				ev.Result.Detail != tt.detail || ev.Sample != 4 || ev.Step != 2 || ev.TaskID != "task" {
				t.Errorf("row %+v, want attempt %d (%s), cpu %v wall %v, 3 executions, detail %q", ev, tt.at+1, progs[tt.at],
					cpu, wall, tt.detail)
			}
		})
	}
	if _, _, err := reduceAttempts(req, "task", 0, "mean", "turn", progs, []backend.Grade{fail, fail, fail}); err == nil {
		t.Error("reduction mean: no error")
	}
	// Turns that executed nothing: request_info only scores 0, as a
	// training trajectory; a malformed turn is the ladder's rung of 0.
	info := gradeOfUnexecuted(turns.InfoAnswer("columns"))
	ev, got, err := reduceAttempts(req, "task", 1, turns.Max, "turn", progs, []backend.Grade{info, info, info})
	if err != nil || !got || ev.Result.Status != executor.StatusInvalidProgram || ev.Result.Score != 0 || ev.Executions != 3 ||
		ev.Result.Detail != "max over 3 turns: no execute turn (all request_info)" {
		t.Errorf("request_info only: %+v, %v, %v; want a row of invalid_program, 0, no execute turn", ev, got, err)
	}
	malformed := gradeOfUnexecuted(turns.MalformedAnswer())
	ev, got, err = reduceAttempts(req, "task", 1, turns.Max, "turn", progs, []backend.Grade{info, malformed, info})
	if err != nil || !got || ev.Result.Status != executor.StatusInvalidProgram || ev.Result.Score != 0 ||
		ev.Result.Detail != "max over 3 turns: turn 2" {
		t.Errorf("request_info and malformed: %+v, %v, %v; want turn 2's invalid_program, 0", ev, got, err)
	}
}

// TestEvaluateRequestAttempts: turns and best_of are bounded, exclusive,
// and the reduction named.
func TestEvaluateRequestAttempts(t *testing.T) {
	base := EvaluateRequest{RunID: "r", Checkpoint: CheckpointRef{Version: 0, Hash: strings.Repeat("a", 64)}, TaskID: "t",
		Samples: 1, Limits: runconfig.Default().Sandbox.Limits()}
	if err := base.Validate(); err != nil {
		t.Fatalf("base request: %v", err)
	}
	for _, tt := range []struct {
		give func(*EvaluateRequest)
		want string
	}{
		{func(r *EvaluateRequest) { r.Turns = -1 }, "turns -1"},
		{func(r *EvaluateRequest) { r.BestOf = 65 }, "turns 0 best_of 65"},
		{func(r *EvaluateRequest) { r.Turns, r.BestOf = 3, 3 }, "turns 3 with best_of 3"},
		{func(r *EvaluateRequest) { r.Turns, r.Reward = 3, "mean" }, "reward \"mean\""},
	} {
		r := base
		tt.give(&r)
		if err := r.Validate(); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error starting %q", r, err, tt.want)
		}
	}
}

// evalRows evaluates the first tasks held-out tasks of run at its
// checkpoint 0 with samples programs each, req's Turns, Reward and BestOf,
// and returns the rows by task/sample and the held-out score.
func evalRows(t *testing.T, a *Activities, run string, cfg runconfig.Config, ck CheckpointRef, tasks, samples int,
	set func(*EvaluateRequest)) (map[string]store.Evaluation, HeldOutScoreResponse, int) {
	t.Helper()
	ctx := t.Context()
	held, err := a.HeldOutTasks(ctx, HeldOutTasksRequest{RunID: run, SuiteSeed: cfg.SuiteSeed, Limit: tasks})
	if err != nil {
		t.Fatal(err)
	}
	executed := 0
	for _, id := range held.TaskIDs {
		req := EvaluateRequest{RunID: run, Checkpoint: ck, TaskID: id, Samples: samples, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget}
		set(&req)
		r, err := a.Evaluate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		executed += r.Executed
	}
	evs, err := a.Store.Evaluations(ctx, run, ck.Version)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]store.Evaluation{}
	for _, e := range evs {
		rows[fmt.Sprintf("%s/%d", e.TaskID, e.Sample)] = e
	}
	h, err := a.HeldOutScore(ctx, HeldOutScoreRequest{RunID: run, Version: ck.Version})
	if err != nil {
		t.Fatal(err)
	}
	return rows, h, executed
}

// heldOutOf is a row's held-out score (store.HeldOutScore's per sample).
func heldOutOf(e store.Evaluation) float64 {
	if e.Result.Status == executor.StatusOK {
		return e.Result.Position
	}
	return 0
}

// TestEvaluateTurns: a multi-turn policy's checkpoint evaluated over 3
// real turns (each turn t > 1 sampled from the previous attempt and its
// grade) executes 3 times per sample, keeps the best turn (max), and scores
// at least its turn-1-only evaluation on every sample, whose program its
// turn 1 is; under last it keeps the last turn. The same checkpoint of a
// single-shot run evaluated best-of-3 scores at least best-of-1 on every
// sample, and best_of 1 is the single-shot evaluation itself.
func TestEvaluateTurns(t *testing.T) {
	a, sb := newTestActivities(t)
	ctx := t.Context()
	const tasks, samples, K = 2, 8, 3 // the tiny suite has 2 held-out tasks
	multi := tinyConfig(t)
	multi.Trajectory.Turns = K
	cks := map[string]CheckpointRef{}
	for _, run := range []string{"turn1", "turns3", "last3"} {
		c, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: multi})
		if err != nil {
			t.Fatal(err)
		}
		cks[run] = c.Checkpoint
	}
	if cks["turn1"] != cks["turns3"] || cks["turn1"] != cks["last3"] {
		t.Fatalf("same config and seed, different checkpoints 0: %+v", cks)
	}
	before := sb.Runs()
	one, h1, x1 := evalRows(t, a, "turn1", multi, cks["turn1"], tasks, samples, func(*EvaluateRequest) {})
	if x1 != tasks*samples || sb.Runs()-before != tasks*samples {
		t.Fatalf("turn 1 only: %d executions, sandbox %d; want %d", x1, sb.Runs()-before, tasks*samples)
	}
	before = sb.Runs()
	three, h3, x3 := evalRows(t, a, "turns3", multi, cks["turns3"], tasks, samples, func(r *EvaluateRequest) {
		r.Turns, r.Reward = K, turns.Max
	})
	if x3 != K*tasks*samples || sb.Runs()-before != K*tasks*samples {
		t.Fatalf("3 turns: %d executions, sandbox %d; want %d", x3, sb.Runs()-before, K*tasks*samples)
	}
	if len(three) != len(one) || len(one) != tasks*samples {
		t.Fatalf("%d rows over 3 turns, %d over turn 1; want %d", len(three), len(one), tasks*samples)
	}
	later := 0
	for k, e := range three {
		o := one[k]
		if e.Executions != K || o.Executions != 0 {
			t.Errorf("%s: %d and %d executions, want %d and 1 (read as 0)", k, e.Executions, o.Executions, K)
		}
		if heldOutOf(e) < heldOutOf(o) {
			t.Errorf("%s: max over 3 turns %v below turn 1's %v", k, heldOutOf(e), heldOutOf(o))
		}
		if strings.HasPrefix(e.Result.Detail, "max over 3 turns: turn 1") && e.Program != o.Program {
			t.Errorf("%s: turn 1 chosen but its program is not the turn-1 evaluation's", k)
		}
		if !strings.HasPrefix(e.Result.Detail, "max over 3 turns: turn ") {
			t.Errorf("%s: detail %q", k, e.Result.Detail)
		}
		if !strings.HasPrefix(e.Result.Detail, "max over 3 turns: turn 1") {
			later++
		}
	}
	if h3.Score < h1.Score || h3.Samples != h1.Samples {
		t.Errorf("held-out over 3 turns %+v, turn 1 only %+v", h3, h1)
	}
	if later == 0 {
		t.Error("no sample's best turn is after turn 1: the later turns changed nothing")
	}
	t.Logf("held-out: turn 1 only %.4f, max over 3 turns %.4f (%d of %d samples best after turn 1)",
		h1.Score, h3.Score, later, len(three))
	last, _, _ := evalRows(t, a, "last3", multi, cks["last3"], tasks, samples, func(r *EvaluateRequest) {
		r.Turns, r.Reward = K, turns.Last
	})
	for k, e := range last {
		if e.Result.Status != backend.StatusUngraded && !strings.HasPrefix(e.Result.Detail, "last over 3 turns: turn 3") {
			t.Errorf("%s under last: detail %q", k, e.Result.Detail)
		}
	}
	us, err := a.Store.RunEvaluations(ctx, "turns3")
	if err != nil || len(us) != 1 || us[0].Executions != K*tasks*samples || us[0].HeldOut.Samples != tasks*samples {
		t.Errorf("run evaluations %+v, %v: want %d executions of %d samples", us, err, K*tasks*samples, tasks*samples)
	}

	single := tinyConfig(t)
	for _, run := range []string{"plain", "best1", "best3"} {
		c, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: single})
		if err != nil {
			t.Fatal(err)
		}
		cks[run] = c.Checkpoint
	}
	plain, hp, _ := evalRows(t, a, "plain", single, cks["plain"], tasks, samples, func(*EvaluateRequest) {})
	b1, hb1, _ := evalRows(t, a, "best1", single, cks["best1"], tasks, samples, func(r *EvaluateRequest) { r.BestOf = 1 })
	before = sb.Runs()
	b3, hb3, xb3 := evalRows(t, a, "best3", single, cks["best3"], tasks, samples, func(r *EvaluateRequest) { r.BestOf = 3 })
	if xb3 != 3*tasks*samples || sb.Runs()-before != 3*tasks*samples {
		t.Fatalf("best of 3: %d executions, sandbox %d; want %d", xb3, sb.Runs()-before, 3*tasks*samples)
	}
	if hb1 != hp {
		t.Errorf("best_of 1 %+v is not the single-shot evaluation %+v", hb1, hp)
	}
	for k, e := range b3 {
		if b1[k].Program != plain[k].Program || b1[k].Result != plain[k].Result {
			t.Errorf("%s: best_of 1 row differs from the single-shot one", k)
		}
		if heldOutOf(e) < heldOutOf(b1[k]) || e.Executions != 3 {
			t.Errorf("%s: best of 3 %v (%d executions) below best of 1 %v", k, heldOutOf(e), e.Executions, heldOutOf(b1[k]))
		}
		if strings.HasPrefix(e.Result.Detail, "best of 3: attempt 1") && e.Program != b1[k].Program {
			t.Errorf("%s: attempt 1 chosen but its program is not the single-shot one", k)
		}
	}
	if hb3.Score < hb1.Score {
		t.Errorf("best of 3 %+v below best of 1 %+v", hb3, hb1)
	}
	t.Logf("held-out of a single-shot checkpoint 0: best of 1 %.4f, best of 3 %.4f", hb1.Score, hb3.Score)
}
