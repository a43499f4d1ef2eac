package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Run names the run a series belongs to: its id (the run name, the
// workflow id) and its mode. They are the only labels every wmrl series
// has; no series is labelled by task, group or sample.
type Run struct {
	ID   string
	Mode string
}

// Phase says which executions a series counts: a step's training
// executions (the Execute activity) or the held-out evaluation's
// (Evaluate).
type Phase string

// The phases.
const (
	PhaseTrain   Phase = "train"
	PhaseHeldOut Phase = "heldout"
)

// Recorder holds wmrl's own series. The activities record into it; a nil
// *Recorder records nothing, so a worker without --metrics-addr (and every
// test that does not look) passes nil. It is safe for concurrent use.
type Recorder struct {
	stepsCompleted   *prometheus.GaugeVec
	rho              *prometheus.GaugeVec
	wmWeight         *prometheus.GaugeVec
	signalLow        *prometheus.GaugeVec
	wmGroups         *prometheus.GaugeVec
	remembered       *prometheus.GaugeVec
	executions       *prometheus.CounterVec
	executionCPU     *prometheus.CounterVec
	sandboxFailures  *prometheus.CounterVec
	wmCalls          *prometheus.CounterVec
	wmSeconds        *prometheus.HistogramVec
	calibrationPairs *prometheus.GaugeVec
	biasBefore       *prometheus.GaugeVec
	biasAfter        *prometheus.GaugeVec
	heldOutScore     *prometheus.GaugeVec
	heldOutVersion   *prometheus.GaugeVec
	stageSeconds     *prometheus.GaugeVec
	stageOverlap     *prometheus.GaugeVec
}

// Label names.
const (
	labelRun     = "run"
	labelMode    = "mode"
	labelPhase   = "phase"
	labelStatus  = "status"
	labelOutcome = "outcome"
	labelStage   = "stage"
	labelScoring = "decision"
)

// The decisions of selective scoring on a world-model group.
const (
	DecisionScored  = "scored"
	DecisionLeftOut = "left_out"
)

// The outcomes of a world-model call.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// WorldModelBuckets are the buckets of wmrl_world_model_call_seconds, in
// seconds: from the built-in model's milliseconds to a remote language
// model's minutes (1 ms × 4^k).
var WorldModelBuckets = prometheus.ExponentialBuckets(0.001, 4, 10)

// NewRecorder creates wmrl's series and registers them with reg.
func NewRecorder(reg prometheus.Registerer) (*Recorder, error) {
	run := []string{labelRun, labelMode}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, run)
	}
	r := &Recorder{
		stepsCompleted: gauge("wmrl_steps_completed",
			"Steps of the run completed (the last finished step + 1), as recorded by this worker's FinishStep."),
		rho: gauge("wmrl_rho", "The anchor weight rho of the run's last completed step."),
		wmWeight: gauge("wmrl_world_model_weight",
			"1 when the no-harm signal gate let the world-model groups into the run's last step's update, 0 when it closed (runs with a gate); under denoise.estimator difference, that step's lambda (0 to 1)."),
		signalLow: gauge("wmrl_signal_lower_bound",
			"Lower confidence bound of the world model's mean within-group correlation with the real scores on the recent anchor groups (the gate opens above 0)."),
		wmGroups: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wmrl_world_model_groups",
			Help: "World-model groups of the run's last completed step whose scores selective scoring let into the update (decision scored) or left out as too uncertain (left_out); runs with anchors.selective."},
			[]string{labelRun, labelMode, labelScoring}),
		remembered: gauge("wmrl_remembered_trajectories",
			"Trajectories of the run's last completed step whose world-model score was the real score of an earlier execution of their program on their task; runs with denoise.memory."),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wmrl_executions_total",
			Help: "Real executions this worker ran, by phase (train, heldout) and status (the reward ladder's, or ungraded)."},
			[]string{labelRun, labelMode, labelPhase, labelStatus}),
		executionCPU: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wmrl_execution_cpu_seconds_total",
			Help: "CPU seconds of the real executions this worker ran, by phase and status."},
			[]string{labelRun, labelMode, labelPhase, labelStatus}),
		sandboxFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wmrl_sandbox_failures_total",
			Help: "Executions whose grader or sandbox failed (an error the retry policy retries, or a permanent one), by phase."},
			[]string{labelRun, labelMode, labelPhase}),
		wmCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wmrl_world_model_calls_total",
			Help: "Calls of the world model (one per group scored), by outcome (ok, error)."},
			[]string{labelRun, labelMode, labelOutcome}),
		wmSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wmrl_world_model_call_seconds",
			Help: "Latency of the world model's calls, in seconds.", Buckets: WorldModelBuckets}, run),
		calibrationPairs: gauge("wmrl_calibration_pairs", "Anchor pairs in the window of the run's last calibration map."),
		biasBefore: gauge("wmrl_bias_before",
			"Mean bias r_wm - r_env of the last calibration window before the map (before debiasing)."),
		biasAfter: gauge("wmrl_bias_after",
			"Mean bias r_wm - r_env of the last calibration window after the map (after debiasing)."),
		heldOutScore:   gauge("wmrl_heldout_score", "Held-out score of the run's last evaluated checkpoint."),
		heldOutVersion: gauge("wmrl_heldout_checkpoint", "Checkpoint version that wmrl_heldout_score evaluated."),
		stageSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wmrl_stage_seconds",
			Help: "Wall seconds of each stage of the run's last completed step (generate, score, execute, turns, calibrate_fuse, update; step: the whole step)."},
			[]string{labelRun, labelMode, labelStage}),
		stageOverlap: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wmrl_stage_overlap_seconds",
			Help: "Seconds of each stage of the run's last completed step during which a stage of a step completed before it was running (0 when steps run one after another)."},
			[]string{labelRun, labelMode, labelStage}),
	}
	for _, c := range []prometheus.Collector{r.stepsCompleted, r.rho, r.wmWeight, r.signalLow, r.wmGroups, r.remembered, r.executions, r.executionCPU, r.sandboxFailures,
		r.wmCalls, r.wmSeconds, r.calibrationPairs, r.biasBefore, r.biasAfter, r.heldOutScore, r.heldOutVersion, r.stageSeconds, r.stageOverlap} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// StepCompleted records a completed step and its ρ. Finishing a step again
// (a retried FinishStep) sets the same values.
func (r *Recorder) StepCompleted(run Run, step int, rho float64) {
	if r == nil {
		return
	}
	r.stepsCompleted.WithLabelValues(run.ID, run.Mode).Set(float64(step + 1))
	r.rho.WithLabelValues(run.ID, run.Mode).Set(rho)
}

// GateDecided records the signal gate's decision of the run's last
// completed step: the world-model stream's weight w (1 open, 0 closed, or
// the difference estimator's λ) and the lower bound low.
func (r *Recorder) GateDecided(run Run, w, low float64) {
	if r == nil {
		return
	}
	r.wmWeight.WithLabelValues(run.ID, run.Mode).Set(w)
	r.signalLow.WithLabelValues(run.ID, run.Mode).Set(low)
}

// ScoringDecided records selective scoring's decision of the run's last
// completed step: its world-model groups scored in and left out.
func (r *Recorder) ScoringDecided(run Run, scored, leftOut int) {
	if r == nil {
		return
	}
	r.wmGroups.WithLabelValues(run.ID, run.Mode, DecisionScored).Set(float64(scored))
	r.wmGroups.WithLabelValues(run.ID, run.Mode, DecisionLeftOut).Set(float64(leftOut))
}

// Remembered records how many trajectories of the run's last completed
// step execution memory scored (denoise.memory).
func (r *Recorder) Remembered(run Run, n int) {
	if r == nil {
		return
	}
	r.remembered.WithLabelValues(run.ID, run.Mode).Set(float64(n))
}

// Execution records one real execution that ran (a result reused from the
// store is not one) with its status and CPU seconds.
func (r *Recorder) Execution(run Run, phase Phase, status string, cpuSeconds float64) {
	if r == nil {
		return
	}
	r.executions.WithLabelValues(run.ID, run.Mode, string(phase), status).Inc()
	if !(cpuSeconds > 0) { // a counter cannot go down; NaN is no time
		cpuSeconds = 0
	}
	r.executionCPU.WithLabelValues(run.ID, run.Mode, string(phase), status).Add(cpuSeconds)
}

// SandboxFailure records an execution whose grader failed.
func (r *Recorder) SandboxFailure(run Run, phase Phase) {
	if r == nil {
		return
	}
	r.sandboxFailures.WithLabelValues(run.ID, run.Mode, string(phase)).Inc()
}

// WorldModelCall records one call of the world model, its latency and
// whether it failed.
func (r *Recorder) WorldModelCall(run Run, d time.Duration, err error) {
	if r == nil {
		return
	}
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeError
	}
	r.wmCalls.WithLabelValues(run.ID, run.Mode, outcome).Inc()
	r.wmSeconds.WithLabelValues(run.ID, run.Mode).Observe(d.Seconds())
}

// Calibration records a calibration map's window size and its mean bias
// before and after the map.
func (r *Recorder) Calibration(run Run, pairs int, before, after float64) {
	if r == nil {
		return
	}
	r.calibrationPairs.WithLabelValues(run.ID, run.Mode).Set(float64(pairs))
	r.biasBefore.WithLabelValues(run.ID, run.Mode).Set(before)
	r.biasAfter.WithLabelValues(run.ID, run.Mode).Set(after)
}

// HeldOut records the held-out score of a checkpoint version.
func (r *Recorder) HeldOut(run Run, version int, score float64) {
	if r == nil {
		return
	}
	r.heldOutScore.WithLabelValues(run.ID, run.Mode).Set(score)
	r.heldOutVersion.WithLabelValues(run.ID, run.Mode).Set(float64(version))
}

// StageTime is one stage of a completed step: its name, wall seconds and
// the seconds of it that overlapped other steps' stages.
type StageTime struct {
	Stage               string
	Seconds, Overlapped float64
}

// StageTimes records the stages of the run's last completed step. A stage
// it did not run keeps the value of the last step that did.
func (r *Recorder) StageTimes(run Run, stages []StageTime) {
	if r == nil {
		return
	}
	for _, s := range stages {
		r.stageSeconds.WithLabelValues(run.ID, run.Mode, s.Stage).Set(s.Seconds)
		r.stageOverlap.WithLabelValues(run.ID, run.Mode, s.Stage).Set(s.Overlapped)
	}
}
