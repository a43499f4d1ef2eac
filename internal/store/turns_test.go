package store

import (
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/wmrl/wmrl/internal/stepsummary"
)

// turnActions returns turn t of every sample of group g, from source src.
func turnActions(run string, step, g, samples, t int, src Source) []TurnAction {
	out := make([]TurnAction, samples)
	for i := range out {
		out[i] = TurnAction{TurnKey: TurnKey{Key{run, step, g, i}, t}, Action: "model ridge(alpha=" + string(rune('0'+t)) + ")",
			Source: src}
	}
	return out
}

func answersOf(acts []TurnAction, reward float64) []TurnAnswer {
	out := make([]TurnAnswer, len(acts))
	for i, a := range acts {
		out[i] = TurnAnswer{TurnKey: a.TurnKey, Answer: Answer{Observation: "=== Execution result ===\nstatus: ok\n",
			Status: "ok", Reward: ptr(reward), CPUSeconds: 0.5, WallSeconds: 0.7}}
	}
	return out
}

// TestTurnsIdempotent: a retried Generate of a turn stores no second row
// and a changed action is a conflict; a retried answer keeps the first one;
// turn t needs turn t−1 answered, from the same source; the turns read back
// in (group, sample, turn) order with every stage.
func TestTurnsIdempotent(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	if _, err := s.InsertTrajectories(ctx, solutions(r.ID, 0, 2, 2)); err != nil {
		t.Fatal(err)
	}
	t1 := append(turnActions(r.ID, 0, 0, 2, 1, SourceReal), turnActions(r.ID, 0, 1, 2, 1, SourceWorldModel)...)
	t1[0].Completion = &Completion{Tokens: []int{3, 4}, LogProbs: []float64{-0.5, -0.25}}
	for i, want := range []int{4, 0} {
		n, err := s.InsertTurns(ctx, t1)
		if err != nil || n != want {
			t.Fatalf("insert %d: %d, %v; want %d new", i, n, err, want)
		}
	}
	changed := append([]TurnAction(nil), t1...)
	changed[1].Action = "model lasso()"
	if _, err := s.InsertTurns(ctx, changed); !errors.Is(err, ErrConflict) {
		t.Errorf("changed action: %v, want ErrConflict", err)
	}
	changed[1] = t1[1]
	changed[1].Source = SourceWorldModel
	if _, err := s.InsertTurns(ctx, changed); !errors.Is(err, ErrConflict) {
		t.Errorf("changed source: %v, want ErrConflict", err)
	}

	// Turn 2 before turn 1 is answered.
	t2 := turnActions(r.ID, 0, 0, 2, 2, SourceReal)
	if _, err := s.InsertTurns(ctx, t2); !errors.Is(err, ErrNotFound) {
		t.Errorf("turn 2 before turn 1's answer: %v, want ErrNotFound", err)
	}
	first := answersOf(t1, 0.75)
	first[3].Reward = nil
	first[3].Status = "ungraded"
	// A request_info turn: answered without an execution or a world-model
	// call.
	first[2].Answer = Answer{Observation: "=== Execution result ===\nstatus: info\n", Status: "info", Unexecuted: true}
	got, err := s.AnswerTurns(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	retry := answersOf(t1, 0.1)
	retry[0].CPUSeconds = 9
	again, err := s.AnswerTurns(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if !sameAnswer(got[i].Answer, first[i].Answer) || !sameAnswer(again[i].Answer, first[i].Answer) {
			t.Errorf("answer %d: stored %+v, after a retry %+v; want the first %+v", i, got[i].Answer, again[i].Answer, first[i].Answer)
		}
	}
	other := turnActions(r.ID, 0, 0, 2, 2, SourceWorldModel)
	if _, err := s.InsertTurns(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("turn 2 from another source: %v, want ErrConflict", err)
	}
	if n, err := s.InsertTurns(ctx, t2); err != nil || n != 2 {
		t.Fatalf("turn 2: %d, %v; want 2 new", n, err)
	}
	if err := s.SetTurnWMRewards(ctx, []TurnWM{{t1[0].TurnKey, 0.5}, {t1[1].TurnKey, 0.25}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTurnWMRewards(ctx, []TurnWM{{t1[0].TurnKey, 0.5}}); err != nil {
		t.Errorf("same grade again: %v", err)
	}
	if err := s.SetTurnWMRewards(ctx, []TurnWM{{t1[0].TurnKey, 0.6}}); !errors.Is(err, ErrConflict) {
		t.Errorf("another grade: %v, want ErrConflict", err)
	}
	if err := s.SetTurnWMRewards(ctx, []TurnWM{{t1[2].TurnKey, 0.6}}); !errors.Is(err, ErrConflict) {
		t.Errorf("grade of a world-model turn: %v, want ErrConflict", err)
	}
	if err := s.SetTurnWMRewards(ctx, []TurnWM{{TurnKey{Key{r.ID, 0, 0, 0}, 9}, 0.6}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("grade of an unknown turn: %v, want ErrNotFound", err)
	}
	if _, err := s.AnswerTurns(ctx, []TurnAnswer{{TurnKey{Key{r.ID, 0, 0, 0}, 9}, first[0].Answer}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("answer of an unknown turn: %v, want ErrNotFound", err)
	}

	ts, err := s.StepTurns(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []TurnKey{{Key{r.ID, 0, 0, 0}, 1}, {Key{r.ID, 0, 0, 0}, 2}, {Key{r.ID, 0, 0, 1}, 1}, {Key{r.ID, 0, 0, 1}, 2},
		{Key{r.ID, 0, 1, 0}, 1}, {Key{r.ID, 0, 1, 1}, 1}}
	if len(ts) != len(want) {
		t.Fatalf("%d turns, want %d: %+v", len(ts), len(want), ts)
	}
	for i, tr := range ts {
		if tr.TurnKey != want[i] {
			t.Errorf("turn %d is %s, want %s", i, tr.TurnKey, want[i])
		}
	}
	if a := ts[0]; a.Completion == nil || len(a.Completion.Tokens) != 2 || a.Answer == nil || *a.Answer.Reward != 0.75 ||
		a.WMReward == nil || *a.WMReward != 0.5 || a.AnsweredAt == nil || a.Source != SourceReal {
		t.Errorf("first turn read back as %+v", a)
	}
	if a := ts[1]; a.Answer != nil || a.WMReward != nil || a.AnsweredAt != nil {
		t.Errorf("unanswered turn 2 read back as %+v", a)
	}
	if a := ts[4]; a.Answer == nil || !a.Answer.Unexecuted || a.Answer.Status != "info" || a.Answer.CPUSeconds != 0 {
		t.Errorf("unexecuted turn read back as %+v", a)
	}
	if a := ts[0]; a.Answer.Unexecuted {
		t.Errorf("executed turn read back as unexecuted: %+v", a.Answer)
	}
	if a := ts[5]; a.Answer == nil || a.Answer.Status != "ungraded" || a.Answer.Reward != nil || a.Source != SourceWorldModel {
		t.Errorf("ungraded world-model turn read back as %+v", a)
	}
	g1, err := s.GroupTurns(ctx, r.ID, 0, 1)
	if err != nil || len(g1) != 2 || g1[0].Sample != 0 || g1[1].Sample != 1 || g1[0].Group != 1 {
		t.Errorf("GroupTurns(1) = %+v, %v; want group 1's two turns", g1, err)
	}
	one, err := s.TrajectoryTurns(ctx, Key{r.ID, 0, 0, 1})
	if err != nil || len(one) != 2 || one[0].Turn != 1 || one[1].Turn != 2 {
		t.Errorf("TrajectoryTurns = %+v, %v; want turns 1 and 2", one, err)
	}
}

func sameAnswer(a, b Answer) bool {
	if (a.Reward == nil) != (b.Reward == nil) || (a.Reward != nil && *a.Reward != *b.Reward) {
		return false
	}
	a.Reward, b.Reward = nil, nil
	return a == b
}

// TestTurnsRefused: what the store refuses before writing anything.
func TestTurnsRefused(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	if _, err := s.InsertTrajectories(ctx, solutions(r.ID, 0, 1, 2)); err != nil {
		t.Fatal(err)
	}
	ok := turnActions(r.ID, 0, 0, 2, 1, SourceReal)
	tests := []struct {
		name string
		give []TurnAction
		want error // nil: any error
	}{
		{"turn 0", []TurnAction{{TurnKey: TurnKey{Key{r.ID, 0, 0, 0}, 0}, Action: "x", Source: SourceReal}}, nil},
		{"no trajectory", []TurnAction{{TurnKey: TurnKey{Key{r.ID, 0, 5, 0}, 1}, Action: "x", Source: SourceReal}}, ErrNotFound},
		{"bad source", []TurnAction{{TurnKey: TurnKey{Key{r.ID, 0, 0, 0}, 1}, Action: "x", Source: "oracle"}}, nil},
		{"twice", []TurnAction{ok[0], ok[0]}, nil},
		{"bad logprobs", []TurnAction{{TurnKey: ok[0].TurnKey, Action: "x", Source: SourceReal,
			Completion: &Completion{Tokens: []int{1}, LogProbs: []float64{-1, -2}}}}, nil},
	}
	for _, tt := range tests {
		_, err := s.InsertTurns(ctx, tt.give)
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: %v, want an error (%v)", tt.name, err, tt.want)
		}
	}
	if ts, err := s.StepTurns(ctx, r.ID, 0); err != nil || len(ts) != 0 {
		t.Fatalf("after refused inserts: %d turns, %v", len(ts), err)
	}
	if _, err := s.InsertTurns(ctx, ok); err != nil {
		t.Fatal(err)
	}
	bad := []Answer{
		{Observation: "o"},
		{Observation: "o", Status: "ok", Reward: ptr(1.5)},
		{Observation: "o", Status: "ok", CPUSeconds: -1},
		{Observation: "o", Status: "ok", WMTokens: -1},
		{Observation: "o", Status: "info", CPUSeconds: 0.5, Unexecuted: true},
	}
	for i, a := range bad {
		if _, err := s.AnswerTurns(ctx, []TurnAnswer{{ok[0].TurnKey, a}}); err == nil {
			t.Errorf("bad answer %d %+v stored", i, a)
		}
	}
	if err := s.SetTurnWMRewards(ctx, []TurnWM{{ok[0].TurnKey, -0.1}}); err == nil {
		t.Error("a grade of -0.1 stored")
	}
}

// TestTurnsConcurrent: two Generates of the same turn racing (a retry
// while the first attempt still runs) store each turn once.
func TestTurnsConcurrent(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	if _, err := s.InsertTrajectories(ctx, solutions(r.ID, 0, 1, 4)); err != nil {
		t.Fatal(err)
	}
	acts := turnActions(r.ID, 0, 0, 4, 1, SourceReal)
	const n = 4
	got := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.InsertTurns(ctx, acts)
		}()
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("insert %d: %v", i, errs[i])
		}
		total += got[i]
	}
	ts, err := s.StepTurns(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != len(acts) || len(ts) != len(acts) {
		t.Errorf("%d inserted over %d racing calls, %d rows; want %d each", total, n, len(ts), len(acts))
	}
}

// TestTurnSummaries: TurnsByIndex, TurnImprovements and TurnPairs over a
// hand-made run of two steps (step 1 still running), two groups (real,
// world model) of two samples, two turns each, every answer 0.5 CPU and
// 0.7 wall seconds but step 1's turn 1 of sample 1, in either group,
// which executed nothing (a request_info turn: status info, no reward, no
// cost, no world-model grade).
func TestTurnSummaries(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	// rewards[step][group][sample] = {turn 1, turn 2}; nil: ungraded.
	rewards := [2][2][2][2]*float64{
		{{{ptr(0.2), ptr(0.6)}, {ptr(0.5), ptr(0.5)}}, {{ptr(0.4), ptr(0.3)}, {nil, ptr(0.9)}}},
		{{{ptr(0.1), ptr(0.9)}, {ptr(0.1), ptr(0.9)}}, {{ptr(0.1), ptr(0.9)}, {ptr(0.1), ptr(0.9)}}},
	}
	for step := range 2 {
		if err := s.StartStep(ctx, r.ID, step); err != nil {
			t.Fatal(err)
		}
		if _, err := s.InsertTrajectories(ctx, solutions(r.ID, step, 2, 2)); err != nil {
			t.Fatal(err)
		}
		for turn := 1; turn <= 2; turn++ {
			acts := append(turnActions(r.ID, step, 0, 2, turn, SourceReal), turnActions(r.ID, step, 1, 2, turn, SourceWorldModel)...)
			if _, err := s.InsertTurns(ctx, acts); err != nil {
				t.Fatal(err)
			}
			ans := answersOf(acts, 0)
			var wm []TurnWM
			for i, a := range acts {
				ans[i].Reward = rewards[step][a.Group][a.Sample][turn-1]
				if ans[i].Reward == nil {
					ans[i].Status = "ungraded"
				}
				if step == 1 && turn == 1 && a.Sample == 1 {
					ans[i].Answer = Answer{Observation: "=== Execution result ===\nstatus: info\n", Status: "info", Unexecuted: true}
					continue
				}
				if a.Source == SourceReal {
					wm = append(wm, TurnWM{a.TurnKey, 0.1 * float64(a.Sample+turn)})
				}
			}
			if _, err := s.AnswerTurns(ctx, ans); err != nil {
				t.Fatal(err)
			}
			if err := s.SetTurnWMRewards(ctx, wm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.FinishStep(ctx, r.ID, 0, StepCompleted, stepsummary.Step{}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		step int
		want []TurnIndexStats
		imp  []TurnImprovement
	}{
		// step < 0: the completed step 0 alone.
		{step: -1, want: []TurnIndexStats{
			{Turn: 1, Source: SourceReal, Turns: 2, Answered: 2, Rewarded: 2, MeanReward: 0.35, WMGraded: 2, CPUSeconds: 1, WallSeconds: 1.4},
			{Turn: 1, Source: SourceWorldModel, Turns: 2, Answered: 2, Rewarded: 1, MeanReward: 0.4, CPUSeconds: 1, WallSeconds: 1.4},
			{Turn: 2, Source: SourceReal, Turns: 2, Answered: 2, Rewarded: 2, MeanReward: 0.55, WMGraded: 2, CPUSeconds: 1, WallSeconds: 1.4},
			{Turn: 2, Source: SourceWorldModel, Turns: 2, Answered: 2, Rewarded: 2, MeanReward: 0.6, CPUSeconds: 1, WallSeconds: 1.4},
		}, imp: []TurnImprovement{{SourceReal, 2, 1}, {SourceWorldModel, 1, 0}}},
		{step: 1, want: []TurnIndexStats{
			{Turn: 1, Source: SourceReal, Turns: 2, Answered: 2, Unexecuted: 1, Rewarded: 1, MeanReward: 0.1, WMGraded: 1, CPUSeconds: 0.5,
				WallSeconds: 0.7},
			{Turn: 1, Source: SourceWorldModel, Turns: 2, Answered: 2, Unexecuted: 1, Rewarded: 1, MeanReward: 0.1, CPUSeconds: 0.5,
				WallSeconds: 0.7},
			{Turn: 2, Source: SourceReal, Turns: 2, Answered: 2, Rewarded: 2, MeanReward: 0.9, WMGraded: 2, CPUSeconds: 1, WallSeconds: 1.4},
			{Turn: 2, Source: SourceWorldModel, Turns: 2, Answered: 2, Rewarded: 2, MeanReward: 0.9, CPUSeconds: 1, WallSeconds: 1.4},
		}, imp: []TurnImprovement{{SourceReal, 1, 1}, {SourceWorldModel, 1, 1}}},
	} {
		got, err := s.TurnsByIndex(ctx, r.ID, tt.step)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) {
			t.Fatalf("step %d: %+v, want %+v", tt.step, got, tt.want)
		}
		for i := range got {
			g := got[i]
			if math.Abs(g.MeanReward-tt.want[i].MeanReward) > 1e-12 {
				t.Errorf("step %d row %d: mean %v, want %v", tt.step, i, g.MeanReward, tt.want[i].MeanReward)
			}
			g.MeanReward = tt.want[i].MeanReward
			if g != tt.want[i] {
				t.Errorf("step %d row %d: %+v, want %+v", tt.step, i, got[i], tt.want[i])
			}
		}
		imp, err := s.TurnImprovements(ctx, r.ID, tt.step)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(imp, tt.imp) {
			t.Errorf("step %d improvements %+v, want %+v", tt.step, imp, tt.imp)
		}
	}
	pairs, err := s.TurnPairs(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 7 {
		t.Fatalf("%d turn pairs, want the 7 executed real turns: %+v", len(pairs), pairs)
	}
	if p := pairs[1]; p.TurnKey != (TurnKey{Key{r.ID, 0, 0, 0}, 2}) || math.Abs(p.WM-0.2) > 1e-12 || p.Env != 0.6 {
		t.Errorf("pair 1 %+v, want step 0 group 0 sample 0 turn 2: wm 0.2, env 0.6", p)
	}
	at, err := s.AnchorTurns(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != len(pairs) {
		t.Fatalf("%d anchor turns, want one per turn pair (%d)", len(at), len(pairs))
	}
	for i, a := range at {
		if a.TurnKey != pairs[i].TurnKey || a.Reward != pairs[i].Env || a.TaskID != "task-a" ||
			a.Action != "model ridge(alpha="+string(rune('0'+a.Turn))+")" {
			t.Errorf("anchor turn %d %+v, want pair %+v's key and reward, task-a and its turn's action", i, a, pairs[i])
		}
	}
	if none, err := s.TurnsByIndex(ctx, "no-such-run", -1); err != nil || len(none) != 0 {
		t.Errorf("a run without turns: %+v, %v", none, err)
	}
	// Per step: the real group's 2 × 2 turns executed; the world model
	// answers the other group's 2 × 2 turns and grades the 4 real ones;
	// in step 1, one turn of each group executed nothing and is neither.
	us, err := s.RunUsage(ctx, r.ID)
	if err != nil || len(us) != 2 {
		t.Fatalf("RunUsage = %+v, %v", us, err)
	}
	for i, want := range [][3]int{{4, 8, 0}, {3, 6, 2}} {
		if u := us[i]; u.TurnExecutions != want[0] || u.TurnWMCalls != want[1] || u.TurnUnexecuted != want[2] {
			t.Errorf("step %d usage %+v: want %d turn executions, %d world-model calls, %d unexecuted", u.Step, u,
				want[0], want[1], want[2])
		}
	}
}
