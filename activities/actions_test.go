package activities

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/store"
)

// scriptedPolicy is a language model's policy in miniature: completion i
// of every turn is, by sample, 0: request_info at turn 1, then an analysis
// and the built-in policy's program in a fence; 1: request_info always;
// 2: nothing (no action); 3: an analysis and the program.
type scriptedPolicy struct{ backend.Policy }

func (p scriptedPolicy) Sample(ctx context.Context, req backend.SampleRequest) ([]backend.Completion, error) {
	first := len(req.Previous) == 0
	req.Previous = nil // the built-in checkpoint is a single-shot one
	cs, err := p.Policy.Sample(ctx, req)
	if err != nil {
		return nil, err
	}
	for i := range cs {
		script := "The baseline first.\n```\n" + cs[i].Text + "\n```\n"
		switch {
		case i == 0 && first, i == 1:
			cs[i].Text = "I need the columns first.\n<action>request_info</action>"
		case i == 2:
			// Nothing: in the built-in language a bare text is a program
			// (prompt.ParseAction), so the completion with no action is
			// an empty one.
			cs[i].Text = " \n"
		default:
			cs[i].Text = script
		}
	}
	return cs, nil
}

// recordingGrader records the items it grades.
type recordingGrader struct {
	backend.Grader
	mu    sync.Mutex
	items []backend.GradeItem
}

func (g *recordingGrader) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	g.mu.Lock()
	g.items = append(g.items, req.Items...)
	g.mu.Unlock()
	return g.Grader.Grade(ctx, req)
}

// TestTurnActions: a language model's turns by their action. A
// request_info turn is answered from the task's data (status info, no
// reward, the same for either source) and executes nothing; a completion
// with no action is invalid_program with reward 0 and says so, executing
// nothing; the fenced script is executed as the script alone. A
// trajectory of request_info turns only is rewarded 0 (no execute turn),
// from either source; one with an execute turn takes the maximum over its
// execute turns. Execute says which turns executed nothing
// (ExecuteResponse.Unexecuted), a retry the same; the stored answers of
// either source mark them, and the turn summaries count them apart from
// the executions and the world model's answers.
func TestTurnActions(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	rec := &recordingGrader{Grader: a.Grader}
	a.Grader = rec
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: scriptedPolicy{a.Policy}})
	cfg := tinyConfig(t)
	cfg.Policy.Backend = backend.Tinker
	const run, K = "actions", 2
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Samples
	if n < 4 {
		t.Fatalf("the tiny preset has %d samples, the test scripts 4", n)
	}
	sources := []store.Source{store.SourceReal, store.SourceWorldModel}
	// nothing reports whether sample i's turn t executes nothing, by the
	// script: request_info (sample 0's turn 1, sample 1's turns) or
	// malformed (sample 2's).
	nothing := func(i, turn int) bool { return i == 0 && turn == 1 || i == 1 || i == 2 }
	for g, src := range sources {
		for turn := 1; turn <= K; turn++ {
			if _, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: 0, Group: g, Samples: n, Seed: cfg.Seed,
				SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint, Turn: turn, Source: src}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: 0, Group: g, SuiteSeed: cfg.SuiteSeed,
				Turn: turn, ObservationTokens: 1200}); err != nil {
				t.Fatal(err)
			}
			if src != store.SourceReal {
				continue
			}
			for i := range n {
				req := ExecuteRequest{RunID: run, Step: 0, Group: g, Sample: i, Seed: cfg.Seed,
					SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget,
					Turn: turn, ObservationTokens: 1200}
				r, err := a.Execute(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				again, err := a.Execute(ctx, req) // a retry: the stored answer
				if err != nil {
					t.Fatal(err)
				}
				want := nothing(i, turn)
				if r.Unexecuted != want || again.Unexecuted != want || !again.Reused || r.Reused {
					t.Errorf("sample %d turn %d: unexecuted %v, on a retry %v (reused %v); want %v", i, turn, r.Unexecuted,
						again.Unexecuted, again.Reused, want)
				}
				if want && (r.CPUSeconds != 0 || r.WallSeconds != 0) {
					t.Errorf("sample %d turn %d executed nothing but cost %v CPU s, %v wall s", i, turn, r.CPUSeconds, r.WallSeconds)
				}
			}
		}
		if _, err := a.ReduceTurns(ctx, ReduceTurnsRequest{RunID: run, Step: 0, Group: g, Turns: K, Reward: "max"}); err != nil {
			t.Fatal(err)
		}
	}
	// Executed: sample 0's turn 2 and sample 3's two turns (and more
	// samples' scripts when the preset has more), each the script alone.
	if want := 3 + 2*(n-4); len(rec.items) != want {
		t.Errorf("the grader ran %d items, want %d", len(rec.items), want)
	}
	for _, it := range rec.items {
		if it.Action != backend.ActionExecuteCode || strings.Contains(it.Solution, "```") || strings.Contains(it.Solution, "baseline") {
			t.Errorf("graded %q (action %q), want the fenced program alone", it.Solution, it.Action)
		}
	}
	for g, src := range sources {
		ts, err := a.Store.GroupTurns(ctx, run, 0, g)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ts {
			ans := tr.Answer
			if ans == nil {
				t.Fatalf("%s unanswered", tr.TurnKey)
			}
			info := tr.Sample == 1 || tr.Sample == 0 && tr.Turn == 1
			if ans.Unexecuted != nothing(tr.Sample, tr.Turn) {
				t.Errorf("%s (%s): stored unexecuted %v, want %v", tr.TurnKey, src, ans.Unexecuted, !ans.Unexecuted)
			}
			switch {
			case info:
				if ans.Status != backend.StatusInfo || ans.Reward != nil || tr.WMReward != nil || ans.CPUSeconds != 0 ||
					!strings.Contains(ans.Observation, "status: info\nscore bucket: none\nDATA STRUCTURE") {
					t.Errorf("%s (%s) request_info: %+v wm %v", tr.TurnKey, src, ans, tr.WMReward)
				}
			case tr.Sample == 2:
				if ans.Status != "invalid_program" || ans.Reward == nil || *ans.Reward != 0 || ans.CPUSeconds != 0 ||
					!strings.Contains(ans.Observation, "No valid action found") {
					t.Errorf("%s (%s) malformed: %+v", tr.TurnKey, src, ans)
				}
			default:
				if ans.Reward == nil || ans.Status == backend.StatusInfo || strings.Contains(ans.Observation, "No valid action") {
					t.Errorf("%s (%s) script: %+v", tr.TurnKey, src, ans)
				}
			}
		}
		for i := range 4 {
			tr, err := a.Store.Trajectory(ctx, store.Key{Run: run, Step: 0, Group: g, Sample: i})
			if err != nil {
				t.Fatal(err)
			}
			var r *float64
			if src == store.SourceReal {
				if tr.Exec != nil {
					r = &tr.Exec.Score
				}
			} else {
				r = tr.WMScore
			}
			if r == nil {
				t.Errorf("group %d sample %d (%s): no reward", g, i, src)
				continue
			}
			switch i {
			case 1:
				if *r != 0 || src == store.SourceReal && (tr.Exec.Status != "invalid_program" || !strings.Contains(tr.Exec.Detail, "no execute turn")) {
					t.Errorf("group %d sample 1 (%s), request_info only: reward %v %+v, want 0", g, src, *r, tr.Exec)
				}
			case 0:
				// Its only execute turn, turn 2.
				if want := turnReward(t, ts, 0, 2); *r != want {
					t.Errorf("group %d sample 0 (%s): reward %v, want turn 2's %v", g, src, *r, want)
				}
			}
		}
	}
	// Per turn and source: samples 0 (turn 1), 1 and 2 executed nothing,
	// whoever answered; the other answers are the grader's executions or
	// the world model's predictions.
	byIndex, err := a.Store.TurnsByIndex(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	executions := 0
	for _, x := range byIndex {
		want := 2 // samples 1 and 2
		if x.Turn == 1 {
			want = 3 // and sample 0
		}
		if x.Answered != n || x.Unexecuted != want {
			t.Errorf("turn %d %s: %d answered, %d unexecuted; want %d, %d", x.Turn, x.Source, x.Answered, x.Unexecuted, n, want)
		}
		if x.Source == store.SourceReal {
			executions += x.Answered - x.Unexecuted
		}
	}
	if executions != len(rec.items) {
		t.Errorf("%d real turns executed by the summaries, the grader ran %d", executions, len(rec.items))
	}
	us, err := a.Store.RunUsage(ctx, run)
	if err != nil || len(us) != 1 || us[0].TurnExecutions != len(rec.items) || us[0].TurnUnexecuted != 2*5 {
		t.Errorf("usage %+v, %v: want %d turn executions, 10 unexecuted turns", us, err, len(rec.items))
	}
}

// evalScriptedPolicy is scriptedPolicy for a held-out evaluation, whose
// samples come one per request (the sample and turn from its key): sample
// 0 asks request_info at turn 1, then writes the program; sample 1 asks
// request_info always; sample 2 has no action at turn 1, then the program;
// the others write the program.
type evalScriptedPolicy struct{ backend.Policy }

func (p evalScriptedPolicy) Sample(ctx context.Context, req backend.SampleRequest) ([]backend.Completion, error) {
	_, rest, _ := strings.Cut(req.Key, "/sample-")
	turn := 1
	if s, t, ok := strings.Cut(rest, "/turn-"); ok {
		rest = s
		turn, _ = strconv.Atoi(t)
	}
	sample, err := strconv.Atoi(rest)
	if err != nil || len(req.Seeds) != 1 {
		return nil, fmt.Errorf("key %q with %d seeds: want one sample's", req.Key, len(req.Seeds))
	}
	req.Previous = nil // the built-in checkpoint is a single-shot one
	cs, err := p.Policy.Sample(ctx, req)
	if err != nil {
		return nil, err
	}
	switch {
	case sample == 0 && turn == 1, sample == 1:
		cs[0].Text = "I need the columns first.\n<action>request_info</action>"
	case sample == 2 && turn == 1:
		cs[0].Text = " \n"
	default:
		cs[0].Text = "The baseline first.\n```\n" + cs[0].Text + "\n```\n"
	}
	return cs, nil
}

// TestEvaluateTurnActions: a held-out evaluation over 2 turns reads each
// turn's action as training does: a request_info or malformed turn is not
// sent to the grader and is counted apart from the executions (the
// response's Unexecuted, the row's, RunEvaluations'); a sample of
// request_info turns only scores 0 (invalid_program, no execute turn), as
// a training trajectory does, rather than being left out.
func TestEvaluateTurnActions(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	rec := &recordingGrader{Grader: a.Grader}
	a.Grader = rec
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: evalScriptedPolicy{a.Policy}})
	cfg := tinyConfig(t)
	cfg.Policy.Backend = backend.Tinker
	cfg.Trajectory.Turns = 2
	const run, samples = "eval-actions", 4
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	held, err := a.HeldOutTasks(ctx, HeldOutTasksRequest{RunID: run, SuiteSeed: cfg.SuiteSeed, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Evaluate(ctx, EvaluateRequest{RunID: run, Checkpoint: created.Checkpoint, TaskID: held.TaskIDs[0], Samples: samples,
		Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget, Turns: 2, Reward: "max"})
	if err != nil {
		t.Fatal(err)
	}
	// Executed: sample 0's turn 2, sample 2's turn 2, sample 3's two
	// turns; unexecuted: sample 0's turn 1, sample 1's two, sample 2's
	// turn 1.
	if r.Executed != 4 || r.Unexecuted != 4 || len(rec.items) != 4 {
		t.Fatalf("response %+v, grader ran %d items; want 4 executions (the grader's), 4 unexecuted turns", r, len(rec.items))
	}
	for _, it := range rec.items {
		if strings.Contains(it.Solution, "request_info") || strings.TrimSpace(it.Solution) == "" {
			t.Errorf("graded %q, which executes nothing", it.Solution)
		}
	}
	evs, err := a.Store.Evaluations(ctx, run, created.Checkpoint.Version)
	if err != nil || len(evs) != samples {
		t.Fatalf("evaluations %+v, %v: want %d rows", evs, err, samples)
	}
	for i, want := range []int{1, 2, 1, 0} {
		if e := evs[i]; e.Sample != i || e.Executions != 2 || e.Unexecuted != want {
			t.Errorf("sample %d row: %d turns, %d unexecuted; want 2, %d", e.Sample, e.Executions, e.Unexecuted, want)
		}
	}
	if e := evs[1]; e.Result.Status != executor.StatusInvalidProgram || e.Result.Score != 0 ||
		!strings.Contains(e.Result.Detail, "no execute turn") {
		t.Errorf("request_info only: %+v, want invalid_program, 0, no execute turn", e.Result)
	}
	us, err := a.Store.RunEvaluations(ctx, run)
	if err != nil || len(us) != 1 || us[0].Executions != 4 || us[0].Unexecuted != 4 || us[0].HeldOut.Samples != samples {
		t.Errorf("run evaluations %+v, %v: want 4 executions, 4 unexecuted turns, %d samples", us, err, samples)
	}
}

func turnReward(t *testing.T, ts []store.Turn, sample, turn int) float64 {
	t.Helper()
	for _, tr := range ts {
		if tr.Sample == sample && tr.Turn == turn && tr.Answer != nil && tr.Answer.Reward != nil {
			return *tr.Answer.Reward
		}
	}
	t.Fatalf("sample %d turn %d has no reward", sample, turn)
	return 0
}
