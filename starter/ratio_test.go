package main

import (
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/workflows"
)

// A step whose update reported an importance ratio (a Tinker policy's)
// shows it in status's step line and inspect's text; one without shows none.
func TestImportanceRatioShown(t *testing.T) {
	with := stepsummary.Step{ImportanceRatioMean: 1.02, ImportanceRatioMax: 1.5}
	for _, c := range []struct {
		m    stepsummary.Step
		line string
	}{{with, ", ratio 1.020 (max 1.500)"}, {stepsummary.Step{}, ""}} {
		line := stepLine(workflows.StepSummary{Step: 2, Metrics: c.m}, nil, nil)
		var b strings.Builder
		m := c.m
		if err := printInspect(&b, inspectReport{Run: "r", Metrics: inspectMetrics{Step: &m}}, 0); err != nil {
			t.Fatal(err)
		}
		if c.line == "" {
			if strings.Contains(line, "ratio") || strings.Contains(b.String(), "importance ratio") {
				t.Errorf("no ratio, but shown: %q / %q", line, b.String())
			}
			continue
		}
		if !strings.HasSuffix(line, c.line) || !strings.Contains(b.String(), "importance ratio mean 1.0200, max 1.5000") {
			t.Errorf("ratio %v: step line %q, inspect %q", c.m.ImportanceRatioMean, line, b.String())
		}
	}
}
