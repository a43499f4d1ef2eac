package telemetry

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"

	"github.com/wmrl/wmrl/internal/testenv"
)

// A recorder's series, scraped over HTTP from a listening exporter, hold
// what was recorded, under the run's labels; the Temporal SDK's handler
// reaches the same registry (through tally, within its report interval).
func TestExporterServes(t *testing.T) {
	var errs []error
	e, err := New(func(err error) { errs = append(errs, err) })
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := e.Recorder()
	run := Run{ID: "r1", Mode: "wmrl"}
	r.StepCompleted(run, 0, 0.5)
	r.StepCompleted(run, 1, 0.25)
	r.GateDecided(run, 1, 0.3)
	r.GateDecided(run, 0, -0.125)
	r.ScoringDecided(run, 6, 0)
	r.ScoringDecided(run, 4, 2)
	r.Remembered(run, 7)
	r.Remembered(run, 3)
	r.Execution(run, PhaseTrain, "ok", 1.5)
	r.Execution(run, PhaseTrain, "ok", 0.5)
	r.Execution(run, PhaseTrain, "timeout", 2)
	r.Execution(run, PhaseHeldOut, "ungraded", 0)
	r.Execution(run, PhaseTrain, "timeout", math.NaN())
	r.SandboxFailure(run, PhaseTrain)
	r.WorldModelCall(run, 3*time.Millisecond, nil)
	r.WorldModelCall(run, 2*time.Second, errors.New("down"))
	r.Calibration(run, 12, 0.2, -0.01)
	r.HeldOut(run, 3, 0.75)
	r.HeldOut(Run{ID: "r2", Mode: "grpo"}, 1, 0.5)
	r.StageTimes(run, []StageTime{{Stage: "update", Seconds: 3, Overlapped: 1}, {Stage: "step", Seconds: 10}})
	r.StageTimes(run, []StageTime{{Stage: "update", Seconds: 2.5, Overlapped: 0.5}})

	e.TemporalHandler().WithTags(map[string]string{"namespace": "wmrl-test", "task_queue": "wmrl-control"}).
		Counter("temporal_request").Inc(2)

	url := "http://" + e.Addr().String() + Path
	want := `
# HELP wmrl_steps_completed Steps of the run completed (the last finished step + 1), as recorded by this worker's FinishStep.
# TYPE wmrl_steps_completed gauge
wmrl_steps_completed{mode="wmrl",run="r1"} 2
# HELP wmrl_rho The anchor weight rho of the run's last completed step.
# TYPE wmrl_rho gauge
wmrl_rho{mode="wmrl",run="r1"} 0.25
# HELP wmrl_world_model_weight 1 when the no-harm signal gate let the world-model groups into the run's last step's update, 0 when it closed (runs with a gate); under denoise.estimator difference, that step's lambda (0 to 1).
# TYPE wmrl_world_model_weight gauge
wmrl_world_model_weight{mode="wmrl",run="r1"} 0
# HELP wmrl_signal_lower_bound Lower confidence bound of the world model's mean within-group correlation with the real scores on the recent anchor groups (the gate opens above 0).
# TYPE wmrl_signal_lower_bound gauge
wmrl_signal_lower_bound{mode="wmrl",run="r1"} -0.125
# HELP wmrl_world_model_groups World-model groups of the run's last completed step whose scores selective scoring let into the update (decision scored) or left out as too uncertain (left_out); runs with anchors.selective.
# TYPE wmrl_world_model_groups gauge
wmrl_world_model_groups{decision="left_out",mode="wmrl",run="r1"} 2
wmrl_world_model_groups{decision="scored",mode="wmrl",run="r1"} 4
# HELP wmrl_remembered_trajectories Trajectories of the run's last completed step whose world-model score was the real score of an earlier execution of their program on their task; runs with denoise.memory.
# TYPE wmrl_remembered_trajectories gauge
wmrl_remembered_trajectories{mode="wmrl",run="r1"} 3
# HELP wmrl_executions_total Real executions this worker ran, by phase (train, heldout) and status (the reward ladder's, or ungraded).
# TYPE wmrl_executions_total counter
wmrl_executions_total{mode="wmrl",phase="heldout",run="r1",status="ungraded"} 1
wmrl_executions_total{mode="wmrl",phase="train",run="r1",status="ok"} 2
wmrl_executions_total{mode="wmrl",phase="train",run="r1",status="timeout"} 2
# HELP wmrl_execution_cpu_seconds_total CPU seconds of the real executions this worker ran, by phase and status.
# TYPE wmrl_execution_cpu_seconds_total counter
wmrl_execution_cpu_seconds_total{mode="wmrl",phase="heldout",run="r1",status="ungraded"} 0
wmrl_execution_cpu_seconds_total{mode="wmrl",phase="train",run="r1",status="ok"} 2
wmrl_execution_cpu_seconds_total{mode="wmrl",phase="train",run="r1",status="timeout"} 2
# HELP wmrl_sandbox_failures_total Executions whose grader or sandbox failed (an error the retry policy retries, or a permanent one), by phase.
# TYPE wmrl_sandbox_failures_total counter
wmrl_sandbox_failures_total{mode="wmrl",phase="train",run="r1"} 1
# HELP wmrl_world_model_calls_total Calls of the world model (one per group scored), by outcome (ok, error).
# TYPE wmrl_world_model_calls_total counter
wmrl_world_model_calls_total{mode="wmrl",outcome="error",run="r1"} 1
wmrl_world_model_calls_total{mode="wmrl",outcome="ok",run="r1"} 1
# HELP wmrl_calibration_pairs Anchor pairs in the window of the run's last calibration map.
# TYPE wmrl_calibration_pairs gauge
wmrl_calibration_pairs{mode="wmrl",run="r1"} 12
# HELP wmrl_bias_before Mean bias r_wm - r_env of the last calibration window before the map (before debiasing).
# TYPE wmrl_bias_before gauge
wmrl_bias_before{mode="wmrl",run="r1"} 0.2
# HELP wmrl_bias_after Mean bias r_wm - r_env of the last calibration window after the map (after debiasing).
# TYPE wmrl_bias_after gauge
wmrl_bias_after{mode="wmrl",run="r1"} -0.01
# HELP wmrl_heldout_score Held-out score of the run's last evaluated checkpoint.
# TYPE wmrl_heldout_score gauge
wmrl_heldout_score{mode="grpo",run="r2"} 0.5
wmrl_heldout_score{mode="wmrl",run="r1"} 0.75
# HELP wmrl_heldout_checkpoint Checkpoint version that wmrl_heldout_score evaluated.
# TYPE wmrl_heldout_checkpoint gauge
wmrl_heldout_checkpoint{mode="grpo",run="r2"} 1
wmrl_heldout_checkpoint{mode="wmrl",run="r1"} 3
# HELP wmrl_stage_seconds Wall seconds of each stage of the run's last completed step (generate, score, execute, turns, calibrate_fuse, update; step: the whole step).
# TYPE wmrl_stage_seconds gauge
wmrl_stage_seconds{mode="wmrl",run="r1",stage="step"} 10
wmrl_stage_seconds{mode="wmrl",run="r1",stage="update"} 2.5
# HELP wmrl_stage_overlap_seconds Seconds of each stage of the run's last completed step during which a stage of a step completed before it was running (0 when steps run one after another).
# TYPE wmrl_stage_overlap_seconds gauge
wmrl_stage_overlap_seconds{mode="wmrl",run="r1",stage="step"} 0
wmrl_stage_overlap_seconds{mode="wmrl",run="r1",stage="update"} 0.5
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "wmrl_steps_completed", "wmrl_rho",
		"wmrl_world_model_weight", "wmrl_signal_lower_bound", "wmrl_world_model_groups", "wmrl_remembered_trajectories",
		"wmrl_executions_total", "wmrl_execution_cpu_seconds_total", "wmrl_sandbox_failures_total",
		"wmrl_world_model_calls_total", "wmrl_calibration_pairs", "wmrl_bias_before", "wmrl_bias_after",
		"wmrl_heldout_score", "wmrl_heldout_checkpoint", "wmrl_stage_seconds", "wmrl_stage_overlap_seconds"); err != nil {
		t.Error(err)
	}
	// The latency histogram: the 3 ms call in the 4 ms bucket, both in +Inf.
	body := scrape(t, url)
	for _, w := range []string{
		`wmrl_world_model_call_seconds_bucket{mode="wmrl",run="r1",le="0.004"} 1`,
		`wmrl_world_model_call_seconds_bucket{mode="wmrl",run="r1",le="+Inf"} 2`,
		`wmrl_world_model_call_seconds_count{mode="wmrl",run="r1"} 2`,
		"go_goroutines ", "process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, w) {
			t.Errorf("scrape lacks %q", w)
		}
	}
	// tally reports every second: the SDK's counter, named the Prometheus
	// way, with its labels' values as they were, appears within a few.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(body, `temporal_request_total{namespace="wmrl-test",task_queue="wmrl-control"} 2`) {
		if time.Now().After(deadline) {
			t.Fatalf("no temporal_request_total in:\n%s", body)
		}
		time.Sleep(200 * time.Millisecond)
		body = scrape(t, url)
	}
	if len(errs) > 0 {
		t.Errorf("errors: %v", errs)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// Without metrics (a nil exporter), every recording is a no-op and the
// SDK gets its own no-op handler (a nil interface, not a typed nil).
func TestNilExporter(t *testing.T) {
	var e *Exporter
	r := e.Recorder()
	if r != nil || e.TemporalHandler() != nil || e.Addr() != nil || e.Close() != nil {
		t.Fatalf("nil exporter: recorder %v, handler %v, addr %v", r, e.TemporalHandler(), e.Addr())
	}
	run := Run{ID: "r", Mode: "wmrl"}
	r.StepCompleted(run, 0, 1)
	r.Execution(run, PhaseTrain, "ok", 1)
	r.SandboxFailure(run, PhaseTrain)
	r.WorldModelCall(run, time.Second, nil)
	r.Calibration(run, 1, 0, 0)
	r.HeldOut(run, 0, 0)
}

// A taken address fails Listen, saying which.
func TestListenTaken(t *testing.T) {
	a, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := a.Addr().String()
	if err := b.Listen(addr); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("second listener on %s: %v", addr, err)
	}
}

// A real Prometheus server (Debian's) scrapes the exporter and answers
// queries of its series with the recorded values. It skips without
// /usr/bin/prometheus, except in CI, where it fails.
func TestScrapedByPrometheus(t *testing.T) {
	e, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	run := Run{ID: "scraped", Mode: "debias"}
	e.Recorder().Calibration(run, 40, 0.125, -0.0625)
	e.Recorder().Execution(run, PhaseTrain, "ok", 0.5)
	e.Recorder().Execution(run, PhaseTrain, "ok", 0.25)
	prom := testenv.StartPrometheus(t, e.Addr().String())
	for _, tt := range []struct {
		expr string
		want float64
	}{
		{`wmrl_bias_before{run="scraped", mode="debias"}`, 0.125},
		{`wmrl_bias_after{run="scraped", mode="debias"}`, -0.0625},
		{`wmrl_execution_cpu_seconds_total{run="scraped", phase="train", status="ok"}`, 0.75},
		{`wmrl_executions_total{run="scraped", phase="train", status="ok"}`, 2},
	} {
		prom.Query(t, tt.expr, 30*time.Second, func(v model.Vector) bool {
			return len(v) == 1 && float64(v[0].Value) == tt.want
		})
	}
}
