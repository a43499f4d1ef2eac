package activities

import (
	"testing"

	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/mode"
)

// TestFuseMemory drives a wmrl run with denoise.memory through the
// activities (Postgres, the in-process sandbox) and checks every stored
// batch against the run's executions read back from the store: a
// world-model trajectory whose task and program were executed at an
// earlier step trains on the mean of those real scores; one executed only
// at the same or a later step does not.
func TestFuseMemory(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	cfg.Mode, cfg.Steps = mode.WMRL, 6
	cfg.Denoise.Memory = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	const run = "memory"
	driveRun(t, a, run, cfg)

	executed, err := a.Store.ExecutedTrajectories(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ task, prog string }
	var hits, misses int
	for s := range cfg.Steps {
		sum, n := map[key]float64{}, map[key]int{}
		for _, e := range executed {
			if e.Step < s {
				k := key{e.TaskID, e.Program}
				sum[k] += e.Exec.Score
				n[k]++
			}
		}
		var b fusion.Batch
		if err := readJSON(a.batchPath(run, s), &b); err != nil {
			t.Fatal(err)
		}
		ts, err := a.Store.StepTrajectories(ctx, run, s)
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range b.Items {
			if it.Anchor || !it.Graded {
				continue
			}
			k := key{it.TaskID, it.Program}
			if n[k] == 0 {
				misses++
				if ts[i].WMScore == nil {
					t.Errorf("step %d item %d/%d graded without a world-model score or a memory", s, it.Group, it.Sample)
				}
				continue
			}
			hits++
			if want := sum[k] / float64(n[k]); it.Reward != want {
				t.Errorf("step %d item %d/%d (%s on %s): reward %v, want the earlier executions' mean %v",
					s, it.Group, it.Sample, it.Program, it.TaskID, it.Reward, want)
			}
		}
	}
	if hits == 0 || misses == 0 {
		t.Fatalf("%d world-model trajectories remembered, %d not: the run shows nothing", hits, misses)
	}
	t.Logf("%d world-model trajectories remembered, %d scored by the world model", hits, misses)
}

// FinishStep sets wmrl_remembered_trajectories for a run with memory, to 0
// when its step remembered nothing, and leaves it out for a run without.
func TestFinishStepRemembered(t *testing.T) {
	a, _ := newTestActivities(t)
	reg := recordTo(t, a)
	ctx := t.Context()
	for _, run := range []string{"with", "without"} {
		cfg := tinyConfig(t)
		cfg.Denoise.Memory = run == "with"
		if _, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	for step, n := range []int{5, 0} {
		for _, run := range []string{"with", "without"} {
			if err := a.FinishStep(ctx, FinishStepRequest{RunID: run, Step: step, Metrics: StepMetrics{Remembered: n}}); err != nil {
				t.Fatal(err)
			}
		}
		samples := gathered(t, reg)
		with := map[string]string{"run": "with", "mode": "wmrl"}
		if got, k := sum(samples, "wmrl_remembered_trajectories", with); k != 1 || got != float64(n) {
			t.Errorf("step %d: with memory %v (%d samples), want %d", step, got, k, n)
		}
		if _, k := sum(samples, "wmrl_remembered_trajectories", map[string]string{"run": "without"}); k != 0 {
			t.Errorf("step %d: the run without memory has %d samples", step, k)
		}
	}
}
