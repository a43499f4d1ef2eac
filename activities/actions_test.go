package activities

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
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
// execute turns.
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
				if _, err := a.Execute(ctx, ExecuteRequest{RunID: run, Step: 0, Group: g, Sample: i, Seed: cfg.Seed,
					SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget,
					Turn: turn, ObservationTokens: 1200}); err != nil {
					t.Fatal(err)
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
