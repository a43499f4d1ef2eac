package main

import (
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/workflows"
)

// A step with selective scoring shows its decision in status's step line
// and inspect's text; one without shows none.
func TestScoringShown(t *testing.T) {
	const want = "world model scored 4 groups, 2 left out (uncertainty above 0.2000; highest u/σ0 2.500)"
	for _, sc := range []*anchors.Scoring{{Scored: 4, LeftOut: 2, Cut: 0.2, MaxRatio: 2.5}, nil} {
		m := stepsummary.Step{Scoring: sc}
		line := stepLine(workflows.StepSummary{Step: 2, Metrics: m}, nil, nil)
		var b strings.Builder
		if err := printInspect(&b, inspectReport{Run: "r", Metrics: inspectMetrics{Step: &m}}, 0); err != nil {
			t.Fatal(err)
		}
		if sc == nil {
			if strings.Contains(line, "left out") || strings.Contains(b.String(), "selective") {
				t.Errorf("no decision, but shown: %q / %q", line, b.String())
			}
			continue
		}
		if !strings.HasSuffix(line, ", "+want) || !strings.Contains(b.String(), "selective    "+want+"\n") {
			t.Errorf("step line %q, inspect %q", line, b.String())
		}
	}
}

// A step with execution memory shows its count in status's step line and
// inspect's text; one that remembered nothing shows none.
func TestRememberedShown(t *testing.T) {
	for _, n := range []int{5, 0} {
		m := stepsummary.Step{Remembered: n}
		line := stepLine(workflows.StepSummary{Step: 2, Metrics: m}, nil, nil)
		var b strings.Builder
		if err := printInspect(&b, inspectReport{Run: "r", Metrics: inspectMetrics{Step: &m}}, 0); err != nil {
			t.Fatal(err)
		}
		shown := strings.HasSuffix(line, ", 5 remembered") && strings.Contains(b.String(), "memory       5 trajectories scored by an earlier execution")
		hidden := !strings.Contains(line, "remembered") && !strings.Contains(b.String(), "memory ")
		if (n > 0 && !shown) || (n == 0 && !hidden) {
			t.Errorf("%d remembered: step line %q, inspect %q", n, line, b.String())
		}
	}
}
