package main

import (
	"testing"

	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/workflows"
)

// TestStepLineTurnCost: a multi-turn step's line shows its turns, its
// executions, their CPU seconds, its world-model calls and its turns that
// executed nothing, each per turn up to shortTurns turns and as totals only
// beyond.
func TestStepLineTurnCost(t *testing.T) {
	s := workflows.StepSummary{Step: 1, Metrics: stepsummary.Step{Executed: 8, AnchorGroups: 1, MeanReward: 0.5}}
	tc := &turnCost{Turns: 2, WMCalls: 20, Executions: 8, CPUSeconds: 0.75, ByTurn: []turnIndexCost{
		{Turn: 1, Executions: 4, CPUSeconds: 0.5, WMCalls: 10}, {Turn: 2, Executions: 4, CPUSeconds: 0.25, WMCalls: 10}}}
	want := "step 1: rho 0.000, anchors 1 groups, 2 turns, 8 executed (4/4), 0.750 CPU-s (0.500/0.250), " +
		"20 world-model calls (10/10), reward 0.500, bias +0.000 -> +0.000"
	if got := stepLine(s, nil, tc); got != want {
		t.Errorf("2 turns:\n got %q\nwant %q", got, want)
	}
	long := &turnCost{Turns: shortTurns + 1, WMCalls: 60, Executions: 8, CPUSeconds: 1.5,
		ByTurn: make([]turnIndexCost, shortTurns+1)}
	want = "step 1: rho 0.000, anchors 1 groups, 6 turns, 8 executed, 1.500 CPU-s, 60 world-model calls, reward 0.500, " +
		"bias +0.000 -> +0.000"
	if got := stepLine(s, nil, long); got != want {
		t.Errorf("6 turns:\n got %q\nwant %q", got, want)
	}
	// Turns that executed nothing (request_info, malformed) are shown
	// apart, per turn too.
	s.Metrics.Executed, s.Metrics.Unexecuted = 7, 1
	tc.Executions, tc.Unexecuted, tc.WMCalls = 7, 3, 18
	tc.ByTurn[0].Executions, tc.ByTurn[0].Unexecuted, tc.ByTurn[0].WMCalls = 3, 1, 10
	tc.ByTurn[1].Unexecuted, tc.ByTurn[1].WMCalls = 2, 8
	want = "step 1: rho 0.000, anchors 1 groups, 2 turns, 7 executed (3/4), 0.750 CPU-s (0.500/0.250), " +
		"18 world-model calls (10/8), 3 unexecuted (1/2), reward 0.500, bias +0.000 -> +0.000"
	if got := stepLine(s, nil, tc); got != want {
		t.Errorf("2 turns, 3 unexecuted:\n got %q\nwant %q", got, want)
	}
}
