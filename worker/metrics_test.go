package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/telemetry"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
	"github.com/wmrl/wmrl/workflows"
)

// metricsNamespace keeps this test's workflows and queues apart from other
// tests' workers on the same Temporal server.
const metricsNamespace = "wmrl-worker-metrics-test"

// TestMetricsScrapedByPrometheus serves every queue the way wmrl-worker
// does with --metrics-addr (openMetrics, serveQueues), on a real Temporal
// server and Postgres, with the small test suite and the process sandbox
// (whose first two executions fail like a broken sandbox's), runs the tiny
// preset to its end, and has a real Prometheus server (Debian's) scrape
// the worker: wmrl's series, read back through Prometheus's query API,
// agree with what the run stored and the sandbox counted, and the Temporal
// SDK's series are there too. It skips without a Temporal server or
// Prometheus, except in CI, where it fails.
func TestMetricsScrapedByPrometheus(t *testing.T) {
	tc, addr := testenv.Temporal(t, metricsNamespace, workflows.SearchAttributes())
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	o := options{address: addr, namespace: metricsNamespace, queues: workflows.QueueNames(), metricsAddr: "127.0.0.1:0"}
	exp, err := openMetrics(o.metricsAddr, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	target := exp.Addr().String()
	prom := testenv.StartPrometheus(t, target)

	st := testenv.FreshStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	o.sandboxKind, o.executor = runconfig.SandboxProcess, testenv.BuildExecutor(t)
	proc, closeSB, err := openSandbox(ctx, o, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSB()
	sb := testenv.NewFailing(proc, 2)
	b := builtin.New(testenv.Suites{}, wm, sb)
	acts := &activities.Activities{Store: st, Tasks: b.Tasks, Policy: b.Policy, WorldModel: b.WorldModel, Grader: b.Grader,
		DataDir: t.TempDir(), Logger: logger, Metrics: exp.Recorder(), SandboxKind: runconfig.SandboxProcess}
	wctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serveQueues(wctx, o, acts, exp, logger) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serveQueues: %v", err)
		}
	}()

	cfg, err := runconfig.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.SuiteSeed = testenv.SuiteSeed
	runID := fmt.Sprintf("metrics-%d", time.Now().UnixNano())
	we, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: workflows.QueueControl},
		workflows.TrainingRun, workflows.RunInput{RunID: runID, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.RunResult
	if err := we.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Steps != cfg.Steps || res.HeldOut == nil {
		t.Fatalf("result %+v", res)
	}

	// What the run stored and the sandbox counted.
	steps, err := st.Steps(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	var executed int
	var cpu float64
	for _, s := range steps {
		executed += s.Metrics.Executed
		cpu += s.Metrics.CPUSeconds
	}
	last := steps[len(steps)-1].Metrics
	if executed == 0 || cpu <= 0 || last.CalibrationPairs == 0 || sb.Runs() <= executed {
		t.Fatalf("the run executed %d trajectories (%v CPU s), last calibration window %d pairs", executed, cpu, last.CalibrationPairs)
	}

	sel := fmt.Sprintf(`{run=%q, mode=%q}`, runID, cfg.Mode)
	tests := []struct {
		expr string
		want float64
	}{
		{"wmrl_steps_completed" + sel, float64(cfg.Steps)},
		{"wmrl_rho" + sel, last.Rho},
		{"wmrl_bias_before" + sel, last.BiasBefore},
		{"wmrl_bias_after" + sel, last.BiasAfter},
		{"wmrl_calibration_pairs" + sel, float64(last.CalibrationPairs)},
		{"wmrl_heldout_score" + sel, res.HeldOut.Score},
		{"wmrl_heldout_checkpoint" + sel, float64(res.HeldOut.Version)},
		{fmt.Sprintf(`sum(wmrl_executions_total{run=%q, phase="train"})`, runID), float64(executed)},
		{fmt.Sprintf(`sum(wmrl_execution_cpu_seconds_total{run=%q, phase="train"})`, runID), cpu},
		// Every execution the sandbox ran, training and held-out.
		{fmt.Sprintf(`sum(wmrl_executions_total{run=%q})`, runID), float64(sb.Runs())},
		{fmt.Sprintf(`sum(wmrl_sandbox_failures_total{run=%q})`, runID), 2},
		// One world-model call per group and step, none failed.
		{fmt.Sprintf(`sum(wmrl_world_model_calls_total{run=%q, outcome="ok"})`, runID), float64(cfg.Steps * cfg.Groups)},
		{fmt.Sprintf(`sum(wmrl_world_model_call_seconds_count{run=%q})`, runID), float64(cfg.Steps * cfg.Groups)},
		// The last step's stage times as stored; its steps ran one after
		// another, so nothing overlapped.
		{fmt.Sprintf(`wmrl_stage_seconds{run=%q, stage="update"}`, runID), last.Stages.Update.Seconds()},
		{fmt.Sprintf(`wmrl_stage_seconds{run=%q, stage="step"}`, runID), last.Stages.Step.Seconds()},
		{fmt.Sprintf(`sum(wmrl_stage_overlap_seconds{run=%q})`, runID), 0},
	}
	for _, tt := range tests {
		vec := prom.Query(t, tt.expr, 30*time.Second, func(v model.Vector) bool {
			return len(v) == 1 && near(float64(v[0].Value), tt.want)
		})
		t.Logf("prometheus: %s = %v", tt.expr, vec[0].Value)
	}
	logScrape(t, "http://"+target+telemetry.Path, runID)
	// The Temporal SDK's own series, from the same endpoint: the
	// activities this worker ran in the test's namespace.
	vec := prom.Query(t, fmt.Sprintf(`sum(temporal_activity_execution_latency_seconds_count{namespace=%q, activity_type="Execute"})`,
		metricsNamespace), 30*time.Second, func(v model.Vector) bool { return v[0].Value > 0 })
	t.Logf("prometheus: Execute activities in the SDK's series: %v", vec[0].Value)
	up := prom.Query(t, fmt.Sprintf(`up{job="wmrl", instance=%q}`, target), 30*time.Second, nil)
	if up[0].Value != 1 {
		t.Errorf("up = %v", up[0].Value)
	}
}

// near says whether got is want, to 1e-9 relative (CPU seconds are summed
// in another order than the step metrics sum them).
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// logScrape logs the worker's wmrl series of the run, as scraped.
func logScrape(t *testing.T, url, runID string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines, temporal []string
	seen := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if (strings.HasPrefix(l, "wmrl_") && strings.Contains(l, runID) && !strings.Contains(l, "_bucket")) ||
			(strings.HasPrefix(l, "temporal_activity_execution_latency_seconds_count") && strings.Contains(l, `"Execute"`)) {
			lines = append(lines, l)
		}
		if name, _, _ := strings.Cut(l, "{"); strings.HasPrefix(name, "temporal_") && !seen[name] {
			seen[name] = true
			temporal = append(temporal, name)
		}
	}
	t.Logf("GET %s (wmrl series of the run, the SDK's count of Execute activities):\n%s", url, strings.Join(lines, "\n"))
	t.Logf("the Temporal SDK's series: %s", strings.Join(temporal, " "))
}
