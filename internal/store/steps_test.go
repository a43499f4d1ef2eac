package store

import (
	"testing"

	"github.com/wmrl/wmrl/internal/stepsummary"
)

// TestStepsOldMetricsRows reads rows written before the metrics were stored
// as stepsummary.Step: the name → number object of StepMetrics.Map, whose keys
// json.Marshal sorted and whose counts were float64, and an older one
// without anchor_fraction.
func TestStepsOldMetricsRows(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	rows := []string{
		`{"anchor_fraction":0.25,"anchor_groups":1,"anchor_share":0.5,"bias_after":-0.1,"bias_before":0.3,` +
			`"calibration_pairs":16,"cpu_seconds":1.5,"executed":8,"grad_norm":0.75,"graded":14,"groups":4,` +
			`"kl":0.01,"mean_env":0.4,"mean_reward":0.45,"mean_wm":0.6,"objective":-0.2,"rho":2.5,"samples":4,` +
			`"skipped_groups":1,"trajectories":16,"ungraded":2,"wall_seconds":3.25}`,
		`{"groups":4,"anchor_groups":0,"rho":1}`,
	}
	for step, m := range rows {
		if _, err := s.pool.Exec(ctx, `INSERT INTO steps (run_id, step, status, metrics, finished_at)
			VALUES ($1, $2, 'completed', $3, now())`, r.ID, step, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StartStep(ctx, r.ID, 2); err != nil {
		t.Fatal(err)
	}
	steps, err := s.Steps(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		metrics  stepsummary.Step
		recorded bool
	}{
		{stepsummary.Step{Groups: 4, Samples: 4, AnchorGroups: 1, AnchorFraction: 0.25, Trajectories: 16, Executed: 8,
			Ungraded: 2, Graded: 14, MeanReward: 0.45, MeanEnv: 0.4, MeanWM: 0.6, Rho: 2.5, AnchorShare: 0.5,
			SkippedGroups: 1, CalibrationPairs: 16, BiasBefore: 0.3, BiasAfter: -0.1, Objective: -0.2, KL: 0.01,
			GradNorm: 0.75, CPUSeconds: 1.5, WallSeconds: 3.25}, true},
		{stepsummary.Step{Groups: 4, Rho: 1}, false},
		{stepsummary.Step{}, false}, // running: '{}'
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(steps), len(want))
	}
	for i, w := range want {
		if steps[i].Metrics != w.metrics || steps[i].FractionRecorded != w.recorded {
			t.Errorf("step %d: metrics %+v recorded %v, want %+v %v", i, steps[i].Metrics, steps[i].FractionRecorded, w.metrics, w.recorded)
		}
	}
	// A retried FinishStep of an old row with the same values stores the
	// same jsonb, so it is the no-op it was.
	if err := s.FinishStep(ctx, r.ID, 0, StepCompleted, want[0].metrics); err != nil {
		t.Errorf("finishing an old-format step again with its metrics: %v", err)
	}
}
