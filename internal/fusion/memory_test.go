package fusion

import (
	"fmt"
	"testing"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
)

func TestMemory(t *testing.T) {
	m := NewMemory([]Execution{
		{TaskID: "a", Program: "mean", Score: 0.2},
		{TaskID: "a", Program: "mean", Score: 0.4},
		{TaskID: "b", Program: "mean", Score: 0.9},
		{TaskID: "a", Program: "knn k=3", Score: 0.5},
	})
	if m.Len() != 3 {
		t.Errorf("Len %d, want 3", m.Len())
	}
	for _, tt := range []struct {
		task, prog string
		want       float64
		ok         bool
	}{
		{"a", "mean", 0.3, true}, // the mean of both executions
		{"b", "mean", 0.9, true},
		{"a", "knn k=3", 0.5, true},
		{"b", "knn k=3", 0, false}, // the program, but on another task
		{"c", "mean", 0, false},
	} {
		if got, ok := m.Score(tt.task, tt.prog); ok != tt.ok || !near(got, tt.want) {
			t.Errorf("Score(%s, %s) = %v, %v; want %v, %v", tt.task, tt.prog, got, ok, tt.want, tt.ok)
		}
	}
	ts := []Trajectory{{TaskID: "a", Program: "mean"}, {TaskID: "b", Program: "knn k=3"}, {TaskID: "b", Program: "mean"}}
	if n := m.Fill(ts); n != 2 || ts[0].Known == nil || !near(*ts[0].Known, 0.3) || ts[1].Known != nil ||
		ts[2].Known == nil || *ts[2].Known != 0.9 {
		t.Errorf("Fill set %d: %+v", n, ts)
	}
	if n := NewMemory(nil).Fill(ts[1:2]); n != 0 || ts[1].Known != nil {
		t.Errorf("an empty memory filled %d", n)
	}
}

// TestMemoryReplacesWorldModel: a remembered world-model trajectory trains
// on the earlier real score, not on its calibrated world-model score; one
// the world model failed to score is graded by it; an anchor keeps its own
// execution as its reward; Stats.Remembered counts the scores the update
// reads (not an anchor's without an execution of its own).
func TestMemoryReplacesWorldModel(t *testing.T) {
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0.5, 0.5}} // flattens every world-model score to 0.5
	var ts []Trajectory
	for g := range 3 {
		for s := range 4 {
			ts = append(ts, Trajectory{Group: g, Sample: s, TaskID: fmt.Sprint("t", g), Program: fmt.Sprint("p", s),
				WM: fp(0.1 * float64(s)), Env: fp(0.2 * float64(s))})
		}
	}
	for i := range ts {
		if ts[i].Group != 0 {
			ts[i].Env = nil // group 0 is the anchor
		}
	}
	ts[5].WM = nil                              // group 1, sample 1: not scored
	ts[1].Known = fp(0.7)                       // an anchor: its reward stays 0.2
	ts[5].Known, ts[6].Known = fp(0.9), fp(0.1) // group 1
	// An anchor whose execution failed: nothing reads its remembered
	// score, so it is ungraded and not counted.
	ts[2].Env, ts[2].Known = nil, fp(0.3)
	cfg := denoise.Config{HalfLife: 4, WarmUp: 2, RhoMax: 10}
	b, _, stats := Step(ts, mode.WMRL, []int{0}, m, denoise.State{}, cfg, advantage.Default())
	if stats.Remembered != 3 || stats.Ungraded != 1 || b.Items[2].Graded {
		t.Errorf("remembered %d, ungraded %d, anchor without execution graded %v; want 3, 1, false",
			stats.Remembered, stats.Ungraded, b.Items[2].Graded)
	}
	want := map[int]float64{1: 0.2, 4: 0.5, 5: 0.9, 6: 0.1, 7: 0.5, 8: 0.5}
	for i, w := range want {
		if it := b.Items[i]; !it.Graded || !near(it.Reward, w) {
			t.Errorf("item %d (%d/%d): graded %v reward %v, want %v", i, it.Group, it.Sample, it.Graded, it.Reward, w)
		}
	}
	// Without memory the same step calibrates every world-model score.
	for i := range ts {
		ts[i].Known = nil
	}
	_, _, off := Step(ts, mode.WMRL, []int{0}, m, denoise.State{}, cfg, advantage.Default())
	if off.Remembered != 0 || off.Ungraded != 2 {
		t.Errorf("without memory: remembered %d, ungraded %d; want 0 and 2", off.Remembered, off.Ungraded)
	}
}

// TestDifferenceUnbiasedWithMemory is TestDifferenceUnbiasedOverAnchorDraws
// with half the programs remembered (their earlier real score, the same
// function of (task, program) in anchors and world-model groups): the
// update averaged over the anchor draws is still GRPO's, and its spread is
// below the estimator's without memory.
func TestDifferenceUnbiasedWithMemory(t *testing.T) {
	base, grad := diffFixture()
	// Name each of the fixture's four score pairs as a program (the groups
	// hold the same four, rotated), and remember pairs 0 and 2.
	mem := append([]Trajectory(nil), base...)
	for i := range mem {
		g, s := mem[i].Group, mem[i].Sample
		pair := (s + g) % 4
		mem[i].Program = fmt.Sprint("p", pair)
		base[i].Program = mem[i].Program
		if pair%2 == 0 {
			mem[i].Known = fp(*mem[i].Env)
		}
	}
	m := isotonic.Map{X: []float64{0, 1}, Y: []float64{0, 1}}
	acfg := advantage.Default()
	diff := denoise.Config{HalfLife: 4, WarmUp: 2, RhoMax: 10, SignalWindow: 16, Estimator: denoise.EstimatorDifference}
	grpo, _, _ := Step(base, mode.GRPO, nil, m, denoise.State{}, diff, acfg)
	want := update(grpo, grad)
	spread := map[bool]float64{}
	for _, remember := range []bool{false, true} {
		ts := base
		if remember {
			ts = mem
		}
		var st denoise.State
		for range 3 {
			_, st, _ = Step(ts, mode.WMRL, []int{0, 1}, m, st, diff, acfg)
		}
		var sum [3]float64
		draws := 0
		for a := range 6 {
			for b := a + 1; b < 6; b++ {
				bd, _, stats := Step(ts, mode.WMRL, []int{a, b}, m, st, diff, acfg)
				if stats.Gate == nil || stats.Gate.Lambda == nil || *stats.Gate.Lambda <= 0 {
					t.Fatalf("memory %v, anchors %d,%d: gate %+v, want λ > 0", remember, a, b, stats.Gate)
				}
				if remember && stats.Remembered != 12 {
					t.Fatalf("anchors %d,%d: %d remembered, want 12", a, b, stats.Remembered)
				}
				u := update(bd, grad)
				for k := range 3 {
					sum[k] += u[k]
					spread[remember] += (u[k] - want[k]) * (u[k] - want[k])
				}
				draws++
			}
		}
		for k := range 3 {
			if d := sum[k] / float64(draws); !near(d, want[k]) {
				t.Errorf("memory %v, component %d: mean update %v, want GRPO's %v", remember, k, d, want[k])
			}
		}
	}
	if !(spread[true] < spread[false]) {
		t.Errorf("spread over the draws: with memory %v, without %v; want below", spread[true], spread[false])
	}
	t.Logf("squared error summed over the draws: with memory %.5f, without %.5f", spread[true], spread[false])
}
