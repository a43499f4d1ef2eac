package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/stepsummary"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func sp(a, b float64) stepsummary.Span {
	return stepsummary.Span{Start: t0.Add(time.Duration(a * float64(time.Second))), End: t0.Add(time.Duration(b * float64(time.Second)))}
}

func TestRollout(t *testing.T) {
	got := rollout(stepsummary.Stages{Generate: sp(1, 2), Score: sp(1.5, 3), Execute: sp(1.5, 4)})
	if got != sp(1, 4) {
		t.Errorf("rollout %v, want 1 s .. 4 s", got)
	}
	if got := rollout(stepsummary.Stages{Turns: sp(0, 9), Generate: sp(1, 2)}); got != sp(0, 9) {
		t.Errorf("multi-turn rollout %v, want the turn loop", got)
	}
}

// The report: a refused d is skipped with the validation's message; the
// ideals come from d = 0's stages.
func TestReport(t *testing.T) {
	var b bytes.Buffer
	report(&b, []result{
		{d: 0, steps: 4, span: 16 * time.Second, rollout: 2, fuse: 0.1, update: 1.9, step: 4},
		{d: 1, skipped: "pipeline.max_off_policy: 1: not built"},
	})
	out := b.String()
	for _, w := range []string{"900", "1.00x", "d = 1 skipped: pipeline.max_off_policy: 1: not built",
		"3600/max(stage) = 1800 steps/hour", "3600/sum(stages) = 900 steps/hour"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-d", "0, 2", "-steps", "3"})
	if err != nil || len(o.offPolicy) != 2 || o.offPolicy[1] != 2 || o.steps != 3 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, args := range [][]string{{"-d", "x"}, {"-steps", "1"}, {"-capacity", "0"}, {"extra"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
