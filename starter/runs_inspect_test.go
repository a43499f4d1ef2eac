package main

import (
	"encoding/json"
	"testing"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/stepsummary"
)

// inspect --json keeps the shape of the metrics stored by name: {} until
// the step completes, then an object of every metric.
func TestInspectMetricsJSON(t *testing.T) {
	tests := []struct {
		give inspectMetrics
		want string
	}{
		{give: inspectMetrics{}, want: `{}`},
		{give: inspectMetrics{&stepsummary.Step{Groups: 4, Rho: 2.5}}, want: `{"groups":4,"samples":0,"anchor_groups":0,` +
			`"anchor_fraction":0,"trajectories":0,"executed":0,"ungraded":0,"graded":0,"mean_reward":0,"mean_env":0,` +
			`"mean_wm":0,"rho":2.5,"anchor_share":0,"skipped_groups":0,"calibration_pairs":0,"bias_before":0,` +
			`"bias_after":0,"objective":0,"kl":0,"grad_norm":0,"cpu_seconds":0,"wall_seconds":0}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(inspectReport{Mode: mode.WMRL, Metrics: tt.give})
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			Metrics json.RawMessage `json:"metrics"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw.Metrics) != tt.want {
			t.Errorf("metrics %s, want %s", raw.Metrics, tt.want)
		}
		var back inspectReport
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if (back.Metrics.Step == nil) != (tt.give.Step == nil) || (back.Metrics.Step != nil && *back.Metrics.Step != *tt.give.Step) {
			t.Errorf("decoded %+v, want %+v", back.Metrics.Step, tt.give.Step)
		}
	}
}
