package activities

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wmrl/wmrl/internal/telemetry"
)

// The activities record what they did, once per real piece of work: a
// retried ScoreWorldModel is a second call, an Execute that returns the
// stored result is no execution, a failing sandbox is a sandbox failure;
// FinishStep, Calibrate and HeldOutScore set the run's gauges to what they
// stored. Every series carries the run's id and mode.
func TestActivitiesRecordMetrics(t *testing.T) {
	a, sb := newTestActivities(t)
	reg := recordTo(t, a)
	ctx := t.Context()
	cfg := tinyConfig(t)
	run := "metrics"
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: 0, Group: 1, Samples: cfg.Samples, Seed: cfg.Seed,
		SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: 0, Group: 1, SuiteSeed: cfg.SuiteSeed}); err != nil {
			t.Fatal(err)
		}
	}
	exec := ExecuteRequest{RunID: run, Step: 0, Group: 1, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed,
		Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget}
	var cpu float64
	statuses := map[string]float64{}
	for s := range cfg.Samples {
		exec.Sample = s
		if s == cfg.Samples-1 {
			sb.FailNext(1)
			if _, err := a.Execute(ctx, exec); err == nil {
				t.Fatal("Execute with a failing sandbox returned no error")
			}
		}
		r, err := a.Execute(ctx, exec)
		if err != nil {
			t.Fatal(err)
		}
		cpu += r.CPUSeconds
		statuses[string(r.Status)]++
	}
	exec.Sample = 0
	if r, err := a.Execute(ctx, exec); err != nil || !r.Reused {
		t.Fatalf("Execute again: %+v, %v", r, err)
	}
	if _, err := a.RecordAnchors(ctx, RecordAnchorsRequest{RunID: run, Step: 0, Groups: []int{1}}); err != nil {
		t.Fatal(err)
	}
	cal, err := a.Calibrate(ctx, CalibrateRequest{RunID: run, Step: 0, Debias: cfg.DebiasConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.FinishStep(ctx, FinishStepRequest{RunID: run, Step: 0, Metrics: StepMetrics{Rho: 0.75}}); err != nil {
		t.Fatal(err)
	}
	held, err := a.HeldOutTasks(ctx, HeldOutTasksRequest{RunID: run, SuiteSeed: cfg.SuiteSeed, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := a.Evaluate(ctx, EvaluateRequest{RunID: run, Checkpoint: created.Checkpoint, TaskID: held.TaskIDs[0], Samples: 1,
		Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(), Budget: cfg.Sandbox.Budget})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.HeldOutScore(ctx, HeldOutScoreRequest{RunID: run, Version: 0})
	if err != nil {
		t.Fatal(err)
	}

	samples := gathered(t, reg)
	lb := func(kv ...string) map[string]string {
		m := map[string]string{"run": run, "mode": string(cfg.Mode)}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"wmrl_world_model_calls_total", lb("outcome", "ok"), 2},
		{"wmrl_world_model_call_seconds_count", lb(), 2},
		{"wmrl_sandbox_failures_total", lb("phase", "train"), 1},
		{"wmrl_executions_total", lb("phase", "train"), float64(cfg.Samples)},
		{"wmrl_execution_cpu_seconds_total", lb("phase", "train"), cpu},
		{"wmrl_executions_total", lb("phase", "heldout"), float64(ev.Executed)},
		{"wmrl_steps_completed", lb(), 1},
		{"wmrl_rho", lb(), 0.75},
		{"wmrl_calibration_pairs", lb(), float64(cal.Pairs)},
		{"wmrl_bias_before", lb(), cal.BiasBefore},
		{"wmrl_bias_after", lb(), cal.BiasAfter},
		{"wmrl_heldout_score", lb(), h.Score},
		{"wmrl_heldout_checkpoint", lb(), 0},
	}
	for s, n := range statuses {
		tests = append(tests, struct {
			name   string
			labels map[string]string
			want   float64
		}{"wmrl_executions_total", lb("phase", "train", "status", s), n})
	}
	for _, tt := range tests {
		// (CPU seconds are summed over statuses in another order.)
		if got, n := sum(samples, tt.name, tt.labels); n == 0 || math.Abs(got-tt.want) > 1e-12*math.Max(1, math.Abs(tt.want)) {
			t.Errorf("%s%v = %v (%d samples), want %v", tt.name, tt.labels, got, n, tt.want)
		}
	}
	// (The in-process sandbox measures no CPU time: the worker's test,
	// with the process sandbox, checks the CPU seconds.)
	if cal.Pairs == 0 || ev.Executed != 1 {
		t.Errorf("calibration pairs %d, held-out executions %d: the test measured nothing", cal.Pairs, ev.Executed)
	}
}

// recordTo gives a a metrics recorder on a fresh registry and returns the
// registry.
func recordTo(t *testing.T, a *Activities) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec, err := telemetry.NewRecorder(reg)
	if err != nil {
		t.Fatal(err)
	}
	a.Metrics = rec
	return reg
}

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// gathered returns every sample of reg; a histogram gives its _count.
func gathered(t *testing.T, reg *prometheus.Registry) []sample {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []sample
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := sample{name: mf.GetName(), labels: map[string]string{}}
			switch {
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				s.name += "_count"
				s.value = float64(m.GetHistogram().GetSampleCount())
			}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

// sum adds the samples of name whose labels include labels, and counts them.
func sum(samples []sample, name string, labels map[string]string) (float64, int) {
	var total float64
	n := 0
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range labels {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
		n++
	}
	return total, n
}
