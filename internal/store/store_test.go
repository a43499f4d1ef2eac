package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/stepsummary"
)

// newRun stores a run named after the test and returns it.
func newRun(t *testing.T, s *Store) Run {
	t.Helper()
	r := Run{ID: t.Name(), Name: "test " + t.Name(), Mode: mode.WMRL, Config: json.RawMessage(`{"groups": 4, "lr": 0.001}`),
		Seed: math.MaxUint64 - 1, Steps: 10, State: RunRunning}
	if err := s.UpsertRun(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// solutions returns groups x samples generated solutions of a step.
func solutions(run string, step, groups, samples int) []Solution {
	var out []Solution
	for g := range groups {
		for i := range samples {
			out = append(out, Solution{Key: Key{run, step, g, i}, TaskID: "task-" + string(rune('a'+g)),
				Program: "model ridge(alpha=" + string(rune('1'+i)) + ")"})
		}
	}
	return out
}

func count(t *testing.T, s *Store, run string) Counts {
	t.Helper()
	c, err := s.Count(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func TestRunUpsert(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	if err := s.UpsertRun(ctx, r); err != nil {
		t.Fatalf("same run again: %v", err)
	}
	got, err := s.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.Name != r.Name || got.Mode != r.Mode || got.Seed != r.Seed || got.Steps != r.Steps ||
		got.State != RunRunning || got.CreatedAt.IsZero() {
		t.Errorf("Run = %+v, want %+v", got, r)
	}
	var cfg, want map[string]any
	if err := json.Unmarshal(got.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Config, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config %s, want %s", got.Config, r.Config)
	}

	// Same fixed fields, new state: updated.
	r.State = RunPaused
	if err := s.UpsertRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Run(ctx, r.ID); got.State != RunPaused {
		t.Errorf("state %s, want paused", got.State)
	}
	if err := s.SetRunState(ctx, r.ID, RunCompleted); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Run(ctx, r.ID); got.State != RunCompleted {
		t.Errorf("state %s, want completed", got.State)
	}

	tests := []struct {
		name string
		give func(Run) Run
	}{
		{"seed", func(r Run) Run { r.Seed = 7; return r }},
		{"mode", func(r Run) Run { r.Mode = mode.GRPO; return r }},
		{"config", func(r Run) Run { r.Config = json.RawMessage(`{"groups": 5}`); return r }},
		{"steps", func(r Run) Run { r.Steps = 11; return r }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.UpsertRun(ctx, tt.give(r))
			if !errors.Is(err, ErrConflict) {
				t.Errorf("UpsertRun with another %s: %v, want ErrConflict", tt.name, err)
			}
		})
	}
	runs, err := s.Runs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range runs {
		if x.ID == r.ID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d rows for run %s, want 1", n, r.ID)
	}
	if _, err := s.Run(ctx, "no-such-run"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Run(no-such-run) = %v, want ErrNotFound", err)
	}
	if err := s.SetRunState(ctx, "no-such-run", RunPaused); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetRunState(no-such-run) = %v, want ErrNotFound", err)
	}
	if err := s.UpsertRun(ctx, Run{ID: "x", Mode: "fast", State: RunRunning, Config: json.RawMessage(`{}`)}); err == nil {
		t.Error("UpsertRun accepted mode fast")
	}
}

func TestResumedRun(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	parent := newRun(t, s)
	child := parent
	child.ID, child.ResumedFrom, child.ResumedStep = parent.ID+"-resumed", parent.ID, 3
	if err := s.UpsertRun(ctx, child); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResumedFrom != parent.ID || got.ResumedStep != 3 {
		t.Errorf("resumed from %q step %d, want %q step 3", got.ResumedFrom, got.ResumedStep, parent.ID)
	}
	child.ResumedStep = 4
	if err := s.UpsertRun(ctx, child); !errors.Is(err, ErrConflict) {
		t.Errorf("other resume step: %v, want ErrConflict", err)
	}
}

func TestSteps(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	if _, ok, err := s.LastCompletedStep(ctx, r.ID); err != nil || ok {
		t.Fatalf("LastCompletedStep of a new run = %v, %v", ok, err)
	}
	for step := range 3 {
		for range 2 {
			if err := s.StartStep(ctx, r.ID, step); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := stepsummary.Step{MeanReward: 0.5, Rho: 0.25}
	for range 2 {
		if err := s.FinishStep(ctx, r.ID, 0, StepCompleted, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishStep(ctx, r.ID, 1, StepCompleted, stepsummary.Step{}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishStep(ctx, r.ID, 0, StepCompleted, stepsummary.Step{MeanReward: 0.6, Rho: 0.25}); !errors.Is(err, ErrConflict) {
		t.Errorf("finishing step 0 with other metrics: %v, want ErrConflict", err)
	}
	if err := s.FinishStep(ctx, r.ID, 0, StepFailed, m); !errors.Is(err, ErrConflict) {
		t.Errorf("failing completed step 0: %v, want ErrConflict", err)
	}
	if err := s.StartStep(ctx, r.ID, 0); err != nil {
		t.Fatal(err)
	}
	steps, err := s.Steps(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 {
		t.Fatalf("%d steps, want 3", len(steps))
	}
	wantStatus := []StepStatus{StepCompleted, StepCompleted, StepRunning}
	for i, st := range steps {
		if st.Step != i || st.Status != wantStatus[i] || (st.FinishedAt == nil) != (st.Status == StepRunning) {
			t.Errorf("step %d = %+v, want status %s", i, st, wantStatus[i])
		}
	}
	if steps[0].Metrics != m || !steps[0].FractionRecorded {
		t.Errorf("metrics %v, want %v", steps[0].Metrics, m)
	}
	last, ok, err := s.LastCompletedStep(ctx, r.ID)
	if err != nil || !ok || last != 1 {
		t.Errorf("LastCompletedStep = %d, %v, %v; want 1, true", last, ok, err)
	}
	if err := s.FinishStep(ctx, r.ID, 2, StepCompleted, stepsummary.Step{KL: math.NaN()}); err == nil {
		t.Error("FinishStep accepted a NaN metric")
	}
}

func TestTrajectoriesIdempotent(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	sols := solutions(r.ID, 0, 3, 4)
	n, err := s.InsertTrajectories(ctx, sols)
	if err != nil || n != 12 {
		t.Fatalf("first insert = %d, %v; want 12", n, err)
	}
	n, err = s.InsertTrajectories(ctx, sols)
	if err != nil || n != 0 {
		t.Fatalf("second insert = %d, %v; want 0", n, err)
	}
	// A retried batch that overlaps and adds: only the new rows are added.
	more := append(solutions(r.ID, 0, 3, 4)[6:], solutions(r.ID, 1, 1, 2)...)
	n, err = s.InsertTrajectories(ctx, more)
	if err != nil || n != 2 {
		t.Fatalf("overlapping insert = %d, %v; want 2", n, err)
	}
	if c := count(t, s, r.ID); c.Trajectories != 14 {
		t.Fatalf("%d trajectories, want 14", c.Trajectories)
	}

	// Different program for a stored key: conflict, and the new key of the
	// same batch is not stored either.
	bad := []Solution{sols[0], sols[5], {Key: Key{r.ID, 2, 0, 0}, TaskID: "t", Program: "p"}}
	bad[1].Program = "model knn(k=3)"
	if _, err := s.InsertTrajectories(ctx, bad); !errors.Is(err, ErrConflict) {
		t.Errorf("conflicting insert: %v, want ErrConflict", err)
	} else if want := "trajectories (TestTrajectoriesIdempotent, 0, 1, 1)"; !contains(err, want) {
		t.Errorf("error %q does not name the key %q", err, want)
	}
	if c := count(t, s, r.ID); c.Trajectories != 14 {
		t.Errorf("%d trajectories after a rejected batch, want 14", c.Trajectories)
	}
	if _, err := s.InsertTrajectories(ctx, []Solution{sols[0], sols[0]}); err == nil || !contains(err, "twice in one batch") {
		t.Errorf("batch with a duplicate key: %v", err)
	}
	if _, err := s.InsertTrajectories(ctx, []Solution{{Key: Key{"no-such-run", 0, 0, 0}}}); err == nil {
		t.Error("insert for an unknown run succeeded")
	}
	if _, err := s.InsertTrajectories(ctx, []Solution{{Key: Key{r.ID, -1, 0, 0}}}); err == nil {
		t.Error("insert with a negative step succeeded")
	}

	got, err := s.StepTrajectories(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sols) {
		t.Fatalf("%d trajectories at step 0, want %d", len(got), len(sols))
	}
	for i, tr := range got {
		if tr.Solution != sols[i] || tr.Anchor || tr.WMScore != nil || tr.Exec != nil || tr.ExecutedAt != nil {
			t.Errorf("trajectory %d = %+v, want %+v and nothing else", i, tr, sols[i])
		}
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

func TestTrajectoryStages(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	sols := solutions(r.ID, 0, 3, 2)
	if _, err := s.InsertTrajectories(ctx, sols); err != nil {
		t.Fatal(err)
	}

	// World-model scores: again with the same values is a no-op.
	var scores []Score
	for i, x := range sols {
		scores = append(scores, Score{Key: x.Key, WM: 0.1 * float64(i)})
	}
	for range 2 {
		if err := s.SetWMScores(ctx, scores); err != nil {
			t.Fatal(err)
		}
	}
	changed := slices.Clone(scores)
	changed[2].WM = 0.9
	if err := s.SetWMScores(ctx, changed); !errors.Is(err, ErrConflict) {
		t.Errorf("other wm score: %v, want ErrConflict", err)
	}
	if err := s.SetWMScores(ctx, []Score{{Key: Key{r.ID, 0, 9, 0}, WM: 1}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("wm score of an unknown trajectory: %v, want ErrNotFound", err)
	}
	if err := s.SetWMScores(ctx, []Score{{Key: sols[0].Key, WM: math.Inf(1)}}); err == nil {
		t.Error("SetWMScores accepted +Inf")
	}

	// Anchors: groups 0 and 2.
	for range 2 {
		if err := s.SetAnchors(ctx, r.ID, 0, []int{2, 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetAnchors(ctx, r.ID, 0, []int{1}); !errors.Is(err, ErrConflict) {
		t.Errorf("other anchor groups: %v, want ErrConflict", err)
	}
	if err := s.SetAnchors(ctx, r.ID, 0, nil); !errors.Is(err, ErrConflict) {
		t.Errorf("no anchor groups after groups 0 and 2: %v, want ErrConflict", err)
	}
	if err := s.SetAnchors(ctx, r.ID, 0, []int{0, 2, 5}); !errors.Is(err, ErrNotFound) {
		t.Errorf("anchor group without trajectories: %v, want ErrNotFound", err)
	}

	// Executions: the first write wins and is what every caller gets back.
	first := []Execution{
		{Key: sols[0].Key, Result: executor.NewResult(executor.StatusOK, 0.8, 0.75, "")},
		{Key: sols[1].Key, Result: executor.Failed(executor.StatusTimeout, "deadline")},
	}
	first[0].Result.CPUSeconds, first[0].Result.WallSeconds = 1.5, 2
	first[1].Result.CPUSeconds, first[1].Result.WallSeconds = 10, 10.5
	got, err := s.RecordExecutions(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, first) {
		t.Errorf("RecordExecutions = %+v, want %+v", got, first)
	}
	retry := slices.Clone(first)
	retry[0].Result.CPUSeconds, retry[0].Result.WallSeconds = 1.7, 2.2
	retry = append(retry, Execution{Key: sols[4].Key, Result: executor.NewResult(executor.StatusOK, 0.5, 0.5, "")})
	got, err = s.RecordExecutions(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(first), retry[2]); !reflect.DeepEqual(got, want) {
		t.Errorf("retried RecordExecutions = %+v, want %+v", got, want)
	}
	if _, err := s.RecordExecutions(ctx, []Execution{{Key: Key{r.ID, 5, 0, 0}, Result: first[0].Result}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("execution of an unknown trajectory: %v, want ErrNotFound", err)
	}
	if _, err := s.RecordExecutions(ctx, []Execution{{Key: sols[5].Key, Result: executor.Result{Status: "weird"}}}); err == nil {
		t.Error("RecordExecutions accepted an unknown status")
	}

	trs, err := s.StepTrajectories(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trs {
		if tr.WMScore == nil || *tr.WMScore != scores[i].WM {
			t.Errorf("trajectory %d wm score %v, want %v", i, tr.WMScore, scores[i].WM)
		}
		if wantAnchor := tr.Group != 1; tr.Anchor != wantAnchor {
			t.Errorf("trajectory %d anchor %v, want %v", i, tr.Anchor, wantAnchor)
		}
	}
	one, err := s.Trajectory(ctx, sols[1].Key)
	if err != nil {
		t.Fatal(err)
	}
	if one.Exec == nil || *one.Exec != first[1].Result || one.ExecutedAt == nil {
		t.Errorf("trajectory %s exec %+v, want %+v", sols[1].Key, one.Exec, first[1].Result)
	}
	// Anchor trajectories with a world-model score and an execution: group
	// 0's two and group 2's first (its second is not executed; group 1 is
	// executed nowhere and is no anchor).
	anchors, err := s.AnchorTrajectories(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var keys []Key
	for _, tr := range anchors {
		keys = append(keys, tr.Key)
		if !tr.Anchor || tr.WMScore == nil || tr.Exec == nil {
			t.Errorf("anchor trajectory %+v", tr)
		}
	}
	if want := []Key{sols[0].Key, sols[1].Key, sols[4].Key}; !reflect.DeepEqual(keys, want) {
		t.Errorf("AnchorTrajectories keys %v, want %v", keys, want)
	}
	if none, err := s.AnchorTrajectories(ctx, "no-such-run"); err != nil || len(none) != 0 {
		t.Errorf("AnchorTrajectories of an unknown run: %v, %v", none, err)
	}
	if _, err := s.Trajectory(ctx, Key{r.ID, 9, 9, 9}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Trajectory of an unknown key: %v, want ErrNotFound", err)
	}
	cost, err := s.StepCost(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Cost{Trajectories: 6, Executed: 3, CPUSeconds: 1.5 + 10 + 0, WallSeconds: 2 + 10.5 + 0}); cost != want {
		t.Errorf("StepCost = %+v, want %+v", cost, want)
	}
	c := count(t, s, r.ID)
	if c.Trajectories != 6 || c.Executed != 3 || c.Anchors != 4 {
		t.Errorf("counts %+v, want 6 trajectories, 3 executed, 4 anchors", c)
	}
}

func TestInsertTrajectoriesConcurrent(t *testing.T) {
	s := sharedStore(t)
	r := newRun(t, s)
	sols := solutions(r.ID, 0, 8, 8)
	var wg sync.WaitGroup
	ns := make([]int, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns[i], errs[i] = s.InsertTrajectories(t.Context(), sols)
		}()
	}
	wg.Wait()
	total := 0
	for i := range ns {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		total += ns[i]
	}
	if total != len(sols) {
		t.Errorf("inserted %d rows in total, want %d", total, len(sols))
	}
	if c := count(t, s, r.ID); c.Trajectories != len(sols) {
		t.Errorf("%d trajectories, want %d", c.Trajectories, len(sols))
	}
}

// storePairs stores trajectories and anchor pairs for the given keys; the
// scores are a function of the key, so expected values can be recomputed.
func storePairs(t *testing.T, s *Store, keys []Key) []AnchorPair {
	t.Helper()
	var sols []Solution
	var pairs []AnchorPair
	for _, k := range keys {
		sols = append(sols, Solution{Key: k, TaskID: "t", Program: "p"})
		pairs = append(pairs, AnchorPair{Key: k, WM: float64(k.Step) + 0.1*float64(k.Group) + 0.01*float64(k.Sample), Env: float64(k.Sample)})
	}
	if _, err := s.InsertTrajectories(t.Context(), sols); err != nil {
		t.Fatal(err)
	}
	n, err := s.RecordAnchorPairs(t.Context(), pairs)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(pairs) {
		t.Fatalf("recorded %d pairs, want %d", n, len(pairs))
	}
	return pairs
}

func TestAnchorPairsIdempotent(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	pairs := storePairs(t, s, []Key{{r.ID, 0, 0, 0}, {r.ID, 0, 0, 1}, {r.ID, 0, 2, 0}})
	n, err := s.RecordAnchorPairs(ctx, pairs)
	if err != nil || n != 0 {
		t.Fatalf("recording again = %d, %v; want 0", n, err)
	}
	bad := slices.Clone(pairs)
	bad[1].Env = 42
	if _, err := s.RecordAnchorPairs(ctx, bad); !errors.Is(err, ErrConflict) {
		t.Errorf("other env score: %v, want ErrConflict", err)
	}
	if _, err := s.RecordAnchorPairs(ctx, []AnchorPair{{Key: Key{r.ID, 3, 0, 0}}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("pair without a trajectory: %v, want ErrNotFound", err)
	}
	if _, err := s.RecordAnchorPairs(ctx, []AnchorPair{{Key: pairs[0].Key, WM: math.NaN()}}); err == nil {
		t.Error("RecordAnchorPairs accepted NaN")
	}
	if c := count(t, s, r.ID); c.AnchorPairs != 3 {
		t.Errorf("%d anchor pairs, want 3", c.AnchorPairs)
	}
	got, err := s.AnchorPairs(ctx, r.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pairs) {
		t.Errorf("AnchorPairs = %+v, want %+v", got, pairs)
	}
}

func TestAnchorPairsWindow(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	// Stored out of order, in three batches; group 10 sorts after group 9.
	var keys []Key
	for _, step := range []int{2, 0, 3, 1} {
		for _, g := range []int{10, 9, 1} {
			for _, i := range []int{1, 0} {
				keys = append(keys, Key{r.ID, step, g, i})
			}
		}
	}
	all := storePairs(t, s, keys[:8])
	all = append(all, storePairs(t, s, keys[8:15])...)
	all = append(all, storePairs(t, s, keys[15:])...)
	slices.SortFunc(all, func(a, b AnchorPair) int {
		if a.Step != b.Step {
			return a.Step - b.Step
		}
		if a.Group != b.Group {
			return a.Group - b.Group
		}
		return a.Sample - b.Sample
	})
	upTo := func(step int) []AnchorPair {
		var out []AnchorPair
		for _, p := range all {
			if p.Step <= step {
				out = append(out, p)
			}
		}
		return out
	}
	tests := []struct {
		upTo, window int
		want         []AnchorPair
	}{
		{upTo: 3, window: 0, want: all},
		{upTo: 1, window: 0, want: upTo(1)},
		{upTo: 1, window: 4, want: upTo(1)[8:]},
		{upTo: 2, window: 7, want: upTo(2)[11:]},
		{upTo: 3, window: 100, want: all},
		{upTo: 0, window: 1, want: upTo(0)[5:]},
		{upTo: -1, window: 0, want: nil},
	}
	for _, tt := range tests {
		got, err := s.AnchorPairs(ctx, r.ID, tt.upTo, tt.window)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("AnchorPairs(upTo %d, window %d) = %v, want %v", tt.upTo, tt.window, got, tt.want)
		}
		// The window is the one the debiaser would keep from the same pairs.
		cfg := debias.Config{Window: tt.window}
		var ps, wps []debias.Pair
		for _, p := range upTo(tt.upTo) {
			ps = append(ps, p.Pair())
		}
		for _, p := range got {
			wps = append(wps, p.Pair())
		}
		if w := cfg.Windowed(ps); len(w) != len(wps) || (len(w) > 0 && !reflect.DeepEqual(w, wps)) {
			t.Errorf("window %d at step %d differs from debias.Config.Windowed", tt.window, tt.upTo)
		}
	}
	for step := range 4 {
		got, err := s.StepAnchorPairs(ctx, r.ID, step)
		if err != nil {
			t.Fatal(err)
		}
		var want []AnchorPair
		for _, p := range all {
			if p.Step == step {
				want = append(want, p)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("StepAnchorPairs(%d) = %v, want %v", step, got, want)
		}
	}
	if _, err := s.AnchorPairs(ctx, r.ID, 3, -1); err == nil {
		t.Error("AnchorPairs accepted window -1")
	}
}

func TestCalibrationRoundTrip(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	m, err := isotonic.Fit([]float64{0.1, 0.4, 0.35, 0.8, 0.9, 1.0 / 3}, []float64{0.2, 0.1, 0.5, 0.7, 0.65, 0.3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Identity() {
		t.Fatal("test map is the identity")
	}
	tests := []struct {
		name string
		give Calibration
	}{
		{"fitted", Calibration{Run: r.ID, Step: 1, Map: m, NPairs: 6, BiasBefore: ptr(0.125), BiasAfter: ptr(-1e-17)}},
		{"identity", Calibration{Run: r.ID, Step: 0, NPairs: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 {
				if err := s.SaveCalibration(ctx, tt.give); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Calibration(ctx, tt.give.Run, tt.give.Step)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.give) {
				t.Errorf("Calibration = %+v, want %+v", got, tt.give)
			}
			for _, v := range []float64{-1, 0, 0.2, 0.37, 0.5, 1, 2} {
				if got.Map.Apply(v) != tt.give.Map.Apply(v) {
					t.Errorf("stored map gives %v at %v, want %v", got.Map.Apply(v), v, tt.give.Map.Apply(v))
				}
			}
		})
	}
	other := tests[0].give
	other.Map = isotonic.Map{X: slices.Clone(m.X), Y: slices.Clone(m.Y)}
	other.Map.Y[0] = math.Nextafter(other.Map.Y[0], math.Inf(-1))
	if err := s.SaveCalibration(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("map one ulp apart: %v, want ErrConflict", err)
	}
	other = tests[0].give
	other.BiasAfter = nil
	if err := s.SaveCalibration(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("bias now undefined: %v, want ErrConflict", err)
	}
	if err := s.SaveCalibration(ctx, Calibration{Run: r.ID, Step: 5, Map: isotonic.Map{X: []float64{1, 0}, Y: []float64{0, 1}}}); err == nil {
		t.Error("SaveCalibration accepted decreasing knots")
	}
	for _, tt := range []struct{ give, want int }{{give: 0, want: 0}, {give: 1, want: 1}, {give: 7, want: 1}} {
		latest, err := s.LatestCalibration(ctx, r.ID, tt.give)
		if err != nil || latest.Step != tt.want {
			t.Errorf("LatestCalibration(up to %d) = step %d, %v; want step %d", tt.give, latest.Step, err, tt.want)
		}
	}
	if _, err := s.LatestCalibration(ctx, r.ID, -1); !errors.Is(err, ErrNotFound) {
		t.Errorf("LatestCalibration(up to -1): %v, want ErrNotFound", err)
	}
	if _, err := s.Calibration(ctx, r.ID, 9); !errors.Is(err, ErrNotFound) {
		t.Errorf("Calibration of a step without one: %v, want ErrNotFound", err)
	}
	if c := count(t, s, r.ID); c.Calibrations != 2 {
		t.Errorf("%d calibration maps, want 2", c.Calibrations)
	}
	all, err := s.Calibrations(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Calibration{tests[1].give, tests[0].give}; !reflect.DeepEqual(all, want) {
		t.Errorf("Calibrations = %+v, want %+v (step order)", all, want)
	}
	if none, err := s.Calibrations(ctx, "no-such-run"); err != nil || len(none) != 0 {
		t.Errorf("Calibrations of an unknown run = %v, %v; want none", none, err)
	}
}

func TestFusionStateRoundTrip(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	cfg := denoise.Config{HalfLife: 3, WarmUp: 2, RhoMax: 4}
	var st denoise.State
	var want []FusionState
	for step, s2 := range []float64{0.03, 0.011, 0.2} {
		st.Push(cfg, s2)
		want = append(want, FusionState{Run: r.ID, Step: step, State: st, Rho: st.Rho(cfg)})
	}
	for _, f := range want {
		for range 2 {
			if err := s.SaveFusionState(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range want {
		got, err := s.FusionState(ctx, r.ID, f.Step)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, f) {
			t.Errorf("FusionState(%d) = %+v, want %+v", f.Step, got, f)
		}
	}
	latest, err := s.LatestFusionState(ctx, r.ID, 99)
	if err != nil || !reflect.DeepEqual(latest, want[2]) {
		t.Errorf("LatestFusionState = %+v, %v; want %+v", latest, err, want[2])
	}
	latest, err = s.LatestFusionState(ctx, r.ID, 1)
	if err != nil || !reflect.DeepEqual(latest, want[1]) {
		t.Errorf("LatestFusionState(up to 1) = %+v, %v; want %+v", latest, err, want[1])
	}
	other := want[1]
	other.State.Eta2 *= 2
	if err := s.SaveFusionState(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("other state: %v, want ErrConflict", err)
	}
	if _, err := s.LatestFusionState(ctx, "no-such-run", 99); !errors.Is(err, ErrNotFound) {
		t.Errorf("LatestFusionState of an unknown run: %v, want ErrNotFound", err)
	}
	if c := count(t, s, r.ID); c.FusionStates != 3 {
		t.Errorf("%d fusion states, want 3", c.FusionStates)
	}
}

func TestCheckpoints(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	if _, err := s.LatestCheckpoint(ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LatestCheckpoint of a new run: %v, want ErrNotFound", err)
	}
	var want []Checkpoint
	for v := range 4 {
		c := Checkpoint{Run: r.ID, Version: v, Hash: "sha256:" + string(rune('a'+v)), Location: "file:///ckpt/" + string(rune('0'+v))}
		want = append(want, c)
		for range 2 {
			if err := s.PutCheckpoint(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := s.Checkpoints(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Checkpoints = %+v, want %+v", got, want)
	}
	latest, err := s.LatestCheckpoint(ctx, r.ID)
	if err != nil || latest != want[3] {
		t.Errorf("LatestCheckpoint = %+v, %v; want %+v", latest, err, want[3])
	}
	one, err := s.Checkpoint(ctx, r.ID, 2)
	if err != nil || one != want[2] {
		t.Errorf("Checkpoint(2) = %+v, %v; want %+v", one, err, want[2])
	}
	twice := want[3]
	twice.Hash = "sha256:other"
	if err := s.PutCheckpoint(ctx, twice); !errors.Is(err, ErrConflict) {
		t.Errorf("other hash for version 3: %v, want ErrConflict", err)
	}
	if _, err := s.Checkpoint(ctx, r.ID, 7); !errors.Is(err, ErrNotFound) {
		t.Errorf("Checkpoint(7): %v, want ErrNotFound", err)
	}
	if err := s.PutCheckpoint(ctx, Checkpoint{Run: r.ID, Version: 5}); err == nil {
		t.Error("PutCheckpoint accepted an empty hash")
	}
}

// TestHeldOutScoreOrder: the held-out score sums its positions in (task,
// sample) order whatever order the evaluations were written in (parallel
// activities finish in any order), so a rerun of the same seed reports the
// same score to the last bit. Floating-point sums depend on their order;
// the query runs with index scans and sorts off or dear (a sequential scan
// into hash aggregates, as the planner may choose on a big table), so that
// the rows come in the order they were written: last first.
func TestHeldOutScoreOrder(t *testing.T) {
	needDB(t)
	ctx := t.Context()
	s, err := Open(ctx, withOptions(env.shared, "-c enable_indexscan=off -c enable_bitmapscan=off -c enable_indexonlyscan=off -c enable_sort=off -c random_page_cost=1000000"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	r := newRun(t, s)
	// Summed backwards, either task's mean changes the score's last bit:
	// the score is 0.45000000000000007 in order, 0.44999999999999996
	// with both tasks reversed.
	pos := [][]float64{{0.4, 0.7, 0.2}, {0.9, 0.2, 0.3}}
	const tasks, samples = 2, 3
	mean := func(xs []float64) float64 {
		var sum float64
		for _, x := range xs {
			sum += x
		}
		return sum / float64(len(xs))
	}
	task := func(i int) string { return fmt.Sprintf("t%d", i) }
	for i := tasks - 1; i >= 0; i-- {
		for k := samples - 1; k >= 0; k-- {
			ev := Evaluation{Run: r.ID, Step: 2, TaskID: task(i), Sample: k, Program: "p",
				Result: executor.NewResult(executor.StatusOK, 0, pos[i][k], "")}
			if _, err := s.SaveEvaluations(ctx, []Evaluation{ev}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var means []float64
	for i := range tasks {
		means = append(means, mean(pos[i]))
	}
	want := mean(means)
	for range 3 {
		h, err := s.HeldOutScore(ctx, r.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		if h.Score != want || h.Tasks != tasks || h.Samples != tasks*samples {
			t.Fatalf("HeldOutScore = %+v (score %v), want %v summed in (task, sample) order", h, h.Score, want)
		}
		es, err := s.RunEvaluations(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].HeldOut != h {
			t.Fatalf("RunEvaluations = %+v, want the held-out score %+v", es, h)
		}
	}
}

func TestEvaluations(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	res := func(pos float64) executor.Result { return executor.NewResult(executor.StatusOK, 0, pos, "") }
	evs := []Evaluation{
		{Run: r.ID, Step: 4, TaskID: "a", Sample: 0, Program: "p", Result: res(1)},
		{Run: r.ID, Step: 4, TaskID: "a", Sample: 1, Program: "p", Result: res(0.5)},
		{Run: r.ID, Step: 4, TaskID: "b", Sample: 0, Program: "q", Result: executor.Failed(executor.StatusRuntimeError, "boom")},
		{Run: r.ID, Step: 4, TaskID: "b", Sample: 1, Program: "q", Result: res(0.25)},
		{Run: r.ID, Step: 4, TaskID: "b", Sample: 2, Program: "q", Result: res(0.5)},
	}
	n, err := s.SaveEvaluations(ctx, evs)
	if err != nil || n != 5 {
		t.Fatalf("SaveEvaluations = %d, %v; want 5", n, err)
	}
	retry := slices.Clone(evs)
	retry[0].Result = res(0) // first write wins
	retry[0].Result.WallSeconds = 3
	n, err = s.SaveEvaluations(ctx, retry)
	if err != nil || n != 0 {
		t.Fatalf("retried SaveEvaluations = %d, %v; want 0", n, err)
	}
	stored, err := s.Evaluations(ctx, r.ID, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored, evs) {
		t.Errorf("Evaluations = %+v, want the first writes %+v", stored, evs)
	}
	if _, err := s.SaveEvaluations(ctx, []Evaluation{evs[0], evs[0]}); !contains(err, "twice in one batch") {
		t.Errorf("batch with a duplicate key: %v", err)
	}
	if _, err := s.SaveEvaluations(ctx, []Evaluation{{Run: r.ID, Step: 4, Sample: 0, Result: res(1)}}); err == nil {
		t.Error("SaveEvaluations accepted an empty task id")
	}
	h, err := s.HeldOutScore(ctx, r.ID, 4)
	if err != nil {
		t.Fatal(err)
	}
	// The mean over tasks a and b of the mean position of their samples,
	// 0 for the runtime error.
	a := (1 + 0.5) / 2.0
	b := (0 + 0.25 + 0.5) / 3.0
	want := HeldOut{Score: (a + b) / 2, Tasks: 2, Samples: 5}
	if h.Tasks != want.Tasks || h.Samples != want.Samples || math.Abs(h.Score-want.Score) > 1e-12 {
		t.Errorf("HeldOutScore = %+v, want %+v", h, want)
	}
	if h, err := s.HeldOutScore(ctx, r.ID, 3); err != nil || h != (HeldOut{}) {
		t.Errorf("HeldOutScore of a step without evaluations = %+v, %v", h, err)
	}
	if c := count(t, s, r.ID); c.Evaluations != 5 {
		t.Errorf("%d evaluations, want 5", c.Evaluations)
	}
}

// A trajectory keeps its completion's tokens and logprobs (first write
// wins, the task and the program are compared); the built-in policy's
// trajectories keep none; bad logprobs are refused.
func TestTrajectoryCompletion(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	k0, k1 := Key{Run: r.ID, Step: 0, Group: 0, Sample: 0}, Key{Run: r.ID, Step: 0, Group: 0, Sample: 1}
	c := &Completion{Tokens: []int{5, 7, 2}, LogProbs: []float64{-0.5, -1.25, -3}}
	n, err := s.InsertTrajectories(ctx, []Solution{{Key: k0, TaskID: "a", Program: "p", Completion: c}, {Key: k1, TaskID: "a", Program: "q"}})
	if err != nil || n != 2 {
		t.Fatalf("insert = %d, %v", n, err)
	}
	again := &Completion{Tokens: []int{5, 7, 2}, LogProbs: []float64{-0.5, -1.2, -3}}
	if n, err := s.InsertTrajectories(ctx, []Solution{{Key: k0, TaskID: "a", Program: "p", Completion: again}}); err != nil || n != 0 {
		t.Fatalf("retried insert with other logprobs = %d, %v, want 0, nil", n, err)
	}
	ts, err := s.StepTrajectories(ctx, r.ID, 0)
	if err != nil || len(ts) != 2 {
		t.Fatalf("step trajectories = %v, %v", ts, err)
	}
	if !reflect.DeepEqual(ts[0].Completion, c) || ts[1].Completion != nil {
		t.Errorf("completions %+v, %+v, want %+v and nil", ts[0].Completion, ts[1].Completion, c)
	}
	bad := Solution{Key: Key{Run: r.ID, Step: 0, Group: 1, Sample: 0}, TaskID: "a", Program: "p",
		Completion: &Completion{Tokens: []int{1, 2}, LogProbs: []float64{-1}}}
	if _, err := s.InsertTrajectories(ctx, []Solution{bad}); err == nil || !strings.Contains(err.Error(), "1 logprobs for 2 tokens") {
		t.Errorf("mismatched logprobs: %v", err)
	}
}

func TestAnchorPairsWeight(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	keys := []Key{{r.ID, 0, 0, 0}, {r.ID, 0, 1, 0}, {r.ID, 0, 2, 0}}
	var sols []Solution
	for _, k := range keys {
		sols = append(sols, Solution{Key: k, TaskID: "t", Program: "p"})
	}
	if _, err := s.InsertTrajectories(ctx, sols); err != nil {
		t.Fatal(err)
	}
	pairs := []AnchorPair{{Key: keys[0], WM: 0.1, Env: 0.2}, {Key: keys[1], WM: 0.3, Env: 0.4, Weight: 2.5},
		{Key: keys[2], WM: 0.5, Env: 0.6, Weight: 1}}
	if _, err := s.RecordAnchorPairs(ctx, pairs); err != nil {
		t.Fatal(err)
	}
	got, err := s.AnchorPairs(ctx, r.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(pairs)
	want[2].Weight = 0 // a stored 1 reads back as 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AnchorPairs = %+v, want %+v", got, want)
	}
	if p := got[1].Pair(); p.Weight != 2.5 || got[0].Pair().W() != 1 {
		t.Errorf("Pair weights %v, %v", p.Weight, got[0].Pair().W())
	}
	// Recording the same pair with another weight is a conflict.
	other := slices.Clone(pairs)
	other[1].Weight = 3
	if _, err := s.RecordAnchorPairs(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("other weight: %v, want ErrConflict", err)
	}
	if n, err := s.RecordAnchorPairs(ctx, pairs); err != nil || n != 0 {
		t.Errorf("same pairs again: %d, %v", n, err)
	}
	for _, w := range []float64{-1, math.Inf(1), math.NaN()} {
		if _, err := s.RecordAnchorPairs(ctx, []AnchorPair{{Key: keys[0], WM: 0.1, Env: 0.2, Weight: w}}); err == nil {
			t.Errorf("weight %v accepted", w)
		}
	}
}

// TestExecutedTrajectories: every executed trajectory, anchor or not, with or
// without a world-model score (grpo's), and none that was not executed.
func TestExecutedTrajectories(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	sols := solutions(r.ID, 0, 2, 2) // groups 0 and 1, two samples each
	if _, err := s.InsertTrajectories(ctx, sols); err != nil {
		t.Fatal(err)
	}
	if err := s.SetWMScores(ctx, []Score{{Key: sols[0].Key, WM: 0.3}}); err != nil {
		t.Fatal(err)
	}
	// Executed: sols[0] (scored, no anchor), sols[3] (unscored); not sols[1], sols[2].
	execs := []Execution{
		{Key: sols[3].Key, Result: executor.NewResult(executor.StatusOK, 0.5, 0.5, "")},
		{Key: sols[0].Key, Result: executor.NewResult(executor.StatusOK, 0.8, 0.75, "")},
	}
	if _, err := s.RecordExecutions(ctx, execs); err != nil {
		t.Fatal(err)
	}
	got, err := s.ExecutedTrajectories(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var keys []Key
	for _, tr := range got {
		keys = append(keys, tr.Key)
		if tr.Exec == nil {
			t.Errorf("trajectory %s without its execution", tr.Key)
		}
	}
	if want := []Key{sols[0].Key, sols[3].Key}; !reflect.DeepEqual(keys, want) {
		t.Errorf("ExecutedTrajectories keys %v, want %v", keys, want)
	}
	if anchors, err := s.AnchorTrajectories(ctx, r.ID); err != nil || len(anchors) != 0 {
		t.Errorf("AnchorTrajectories with no anchor groups: %v, %v", anchors, err)
	}
}
