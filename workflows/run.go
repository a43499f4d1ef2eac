package workflows

import (
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
)

// Names of the run workflow's query, signals and update.
const (
	QueryStatus             = "status"
	SignalPause             = "pause"
	SignalResume            = "resume"
	SignalStop              = "stop"
	UpdateSetAnchorFraction = "set-anchor-fraction"
	// UpdateSetAnchorFractionFrom is set-anchor-fraction answering with a
	// FractionChange (the previous fraction and the first step the new one
	// applies to); set-anchor-fraction keeps its reply, the previous
	// fraction, for the clients that decode it.
	UpdateSetAnchorFractionFrom = "set-anchor-fraction-from"
)

// FractionChange is the reply of UpdateSetAnchorFractionFrom.
type FractionChange struct {
	Previous float64 `json:"previous"`
	// FromStep is the first step that starts with the new fraction: the
	// first step not started yet.
	FromStep int `json:"from_step"`
}

// Run states reported by the status query.
const (
	StateRunning   = "running"
	StatePaused    = "paused"
	StateStopping  = "stopping"
	StateCompleted = "completed"
)

// RunInput is the input of TrainingRun. State is nil when a run starts and
// carries the run's state across continue-as-new. ResumeFrom, on a start
// (State nil), names a run whose history up to its last completed step the
// new run copies and continues from (activity ResumeRun, the one writer of
// the resumed run's state); `wmrl continue` starts the run this way.
type RunInput struct {
	RunID      string           `json:"run_id"`
	Config     runconfig.Config `json:"config"`
	State      *RunState        `json:"state,omitempty"`
	ResumeFrom string           `json:"resume_from,omitempty"`
}

// RunState is everything a run carries from step to step: small values
// only; trajectories and checkpoints stay in Postgres and the data
// directory.
type RunState struct {
	// Step is the next step to run, the number of completed steps.
	Step int `json:"step"`
	// Checkpoint is checkpoint Step, the latest policy.
	Checkpoint activities.CheckpointRef `json:"checkpoint"`
	Denoise    denoise.State            `json:"denoise"`
	Rho        float64                  `json:"rho"`
	Tracker    anchors.Tracker          `json:"tracker"`
	// AnchorFraction is the current anchor fraction.
	AnchorFraction float64 `json:"anchor_fraction"`
	Paused         bool    `json:"paused"`
	Stopping       bool    `json:"stopping"`
	// Last are the metrics of the last completed step.
	Last        *StepSummary                   `json:"last,omitempty"`
	Calibration *activities.CalibrationSummary `json:"calibration,omitempty"`
	HeldOut     *HeldOut                       `json:"held_out,omitempty"`
	// WorldModel is the run's current refreshed world model
	// (world_model.refresh); nil: the frozen one.
	WorldModel *activities.WorldModelRef `json:"world_model,omitempty"`
	// Planned (pipeline.max_off_policy d > 0) are the anchor fraction and
	// world-model version decided for the steps not started yet, up to
	// step Step+d: step t's are the run's after step t−d−1 (pipeline.go).
	// Recent are checkpoints max(0, Step−d)..Step, the steps' samplers.
	// Both are absent in sequential runs.
	Planned []PlannedStep              `json:"planned,omitempty"`
	Recent  []activities.CheckpointRef `json:"recent,omitempty"`
	// InFlight (changePipelineCarry) are the steps Step, Step+1, ...
	// started and not folded yet when the run continued as new; the next
	// execution folds them. Absent otherwise.
	InFlight []CarriedStep `json:"in_flight,omitempty"`
}

// CarriedStep is a pipelined step in flight across continue-as-new
// (changePipelineCarry): what it started with and what the run has handed
// it or received from it so far.
type CarriedStep struct {
	Step           int                       `json:"step"`
	Sampler        activities.CheckpointRef  `json:"sampler"`
	AnchorFraction float64                   `json:"anchor_fraction"`
	WorldModel     *activities.WorldModelRef `json:"world_model,omitempty"`
	// Delivered: step Step−1's checkpoint and denoiser state were given
	// to it (in its input or by signal SignalPreviousStep).
	Delivered bool `json:"delivered,omitempty"`
	// Report is the step's report, received and not folded yet.
	Report *StepReport `json:"report,omitempty"`
}

// PlannedStep is what a pipelined step not started yet will start with.
type PlannedStep struct {
	Step           int                       `json:"step"`
	AnchorFraction float64                   `json:"anchor_fraction"`
	WorldModel     *activities.WorldModelRef `json:"world_model,omitempty"`
}

// StepSummary is a completed step's metrics.
type StepSummary struct {
	Step    int                    `json:"step"`
	Anchors []int                  `json:"anchors"`
	Metrics activities.StepMetrics `json:"metrics"`
}

// HeldOut is the held-out score (avg@samples by real execution) of a
// checkpoint version.
type HeldOut struct {
	Version int     `json:"version"`
	Score   float64 `json:"score"`
	Tasks   int     `json:"tasks"`
	Samples int     `json:"samples"`
}

// RunResult is the outcome of a run.
type RunResult struct {
	RunID string `json:"run_id"`
	// Steps is the number of completed steps; Stopped is true when a stop
	// signal ended the run before Config.Steps.
	Steps      int                      `json:"steps"`
	Stopped    bool                     `json:"stopped"`
	Checkpoint activities.CheckpointRef `json:"checkpoint"`
	HeldOut    *HeldOut                 `json:"held_out,omitempty"`
}

// Status is the answer to the status query.
type Status struct {
	Run   string    `json:"run"`
	Name  string    `json:"name"`
	State string    `json:"state"`
	Mode  mode.Mode `json:"mode"`
	// Step is the number of completed steps, Steps the planned number.
	Step                   int                            `json:"step"`
	Steps                  int                            `json:"steps"`
	AnchorFraction         float64                        `json:"anchor_fraction"`
	RealisedAnchorFraction float64                        `json:"realised_anchor_fraction"`
	Rho                    float64                        `json:"rho"`
	Checkpoint             activities.CheckpointRef       `json:"checkpoint"`
	Last                   *StepSummary                   `json:"last,omitempty"`
	Calibration            *activities.CalibrationSummary `json:"calibration,omitempty"`
	HeldOut                *HeldOut                       `json:"held_out,omitempty"`
	// WorldModel is the current refreshed world model; nil: the frozen one.
	WorldModel *activities.WorldModelRef `json:"world_model,omitempty"`
	// InFlight (pipeline.max_off_policy > 0) are the steps started and not
	// completed, ascending.
	InFlight []int `json:"in_flight,omitempty"`
}

func invalidInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, err)
}

// TrainingRun runs a training run: one TrainingStep child per step, held-out
// evaluations every Eval.Every steps and at the end, continue-as-new every
// ContinueAsNewEvery steps (or when Temporal suggests it). It reads as its
// three parts: setup (the run's state: carried over, resumed or created),
// handlers (status query, set-anchor-fraction update, pause/resume/stop
// signals) and loop (the steps).
func TrainingRun(ctx workflow.Context, in RunInput) (RunResult, error) {
	if err := in.Config.Validate(); err != nil {
		return RunResult{}, invalidInput(err)
	}
	r := &runFlow{in: in, cfg: in.Config, logger: workflow.GetLogger(ctx)}
	r.ui = uiSummaries(ctx)
	if d := in.Config.Pipeline.OffPolicy(); d > 0 {
		// Only pipelined runs ask, and none existed before the change.
		if workflow.GetVersion(ctx, changeAsyncPipeline, workflow.DefaultVersion, 1) < 1 {
			return RunResult{}, invalidInput(fmt.Errorf("pipeline.max_off_policy %d: this run predates the asynchronous pipeline", d))
		}
		if in.State == nil && in.ResumeFrom != "" &&
			workflow.GetVersion(ctx, changePipelineResume, workflow.DefaultVersion, 1) < 1 {
			return RunResult{}, invalidInput(fmt.Errorf("pipeline.max_off_policy %d: continuing a pipelined run (resume from %s) "+
				"is not built yet: its first steps sample from checkpoints the resumed run does not copy", d, in.ResumeFrom))
		}
		r.pipelined = true
		// Only pipelined runs ask (after changeAsyncPipeline), so no
		// sequential history meets it.
		r.carry = workflow.GetVersion(ctx, changePipelineCarry, workflow.DefaultVersion, 1) >= 1
	}
	if err := r.setup(ctx); err != nil {
		return RunResult{}, err
	}
	if err := r.handlers(ctx); err != nil {
		return RunResult{}, err
	}
	return r.loop(ctx)
}

// runFlow is one TrainingRun execution's state, shared by its parts.
type runFlow struct {
	in        RunInput
	cfg       runconfig.Config
	logger    log.Logger
	st        *RunState
	completed bool
	// ui is changeUISummaries: activity and step summaries, and the
	// run's progress as its current details.
	ui bool
	// pipelined is changeAsyncPipeline: pipeline.max_off_policy > 0.
	pipelined bool
	// inFlight are a pipelined run's steps in flight, ascending, and next
	// the first step it has not started; stepping is true while a
	// sequential run's step child runs.
	inFlight []int
	next     int
	stepping bool
	// carry is changePipelineCarry: continue-as-new carries the steps in
	// flight; flights are they, by step (pipeline.go), and reportCh their
	// reports (signal SignalStepReport).
	carry    bool
	flights  map[int]*flight
	reportCh workflow.ReceiveChannel

	pauseCh, resumeCh, stopCh workflow.ReceiveChannel
}

// setup sets the run's state: the one carried across continue-as-new, or
// one rebuilt from the run it resumes (activity ResumeRun), or a new run's
// (activity CreateRun: the initial checkpoint).
func (r *runFlow) setup(ctx workflow.Context) error {
	cfg, ctl := r.cfg, withControl(ctx)
	r.st = r.in.State
	if r.st == nil && r.in.ResumeFrom != "" {
		req := activities.ResumeRunRequest{RunID: r.in.RunID, From: r.in.ResumeFrom, Config: cfg}
		rctx := summarized(ctl, r.ui, "run %s from %s", r.in.RunID, r.in.ResumeFrom)
		res, err := activities.ResumeRun.Execute(rctx, req).Result(ctx)
		if err != nil {
			return fmt.Errorf("resume from %s: %w", r.in.ResumeFrom, err)
		}
		r.st = &RunState{Step: res.Step, Checkpoint: res.Checkpoint, Denoise: res.Denoise, Rho: res.Rho,
			Tracker: res.Tracker, AnchorFraction: cfg.Anchors.Fraction, Calibration: res.Calibration,
			Last: &StepSummary{Step: res.Step - 1, Anchors: []int{}, Metrics: res.LastMetrics}}
		if workflow.GetVersion(ctx, changeResumeV2, workflow.DefaultVersion, 1) >= 1 {
			r.st.AnchorFraction = res.AnchorFraction
			if res.LastAnchors != nil {
				r.st.Last.Anchors = res.LastAnchors
			}
			if h := res.HeldOut; h != nil {
				r.st.HeldOut = &HeldOut{Version: res.Step, Score: h.Score, Tasks: h.Tasks, Samples: h.Samples}
			}
		}
		if a := cfg.Anchors.Adaptive; a.Enabled() && res.Step > 0 && res.Denoise.Calibrated &&
			workflow.GetVersion(ctx, changeAdaptiveAnchors, workflow.DefaultVersion, 1) >= 1 {
			// The fraction the old run's last step used, moved by that
			// step's ρ as the old run would have moved it.
			r.st.AnchorFraction = anchors.Adapt(r.st.AnchorFraction, res.Rho, a.Controller())
		}
		if r.pipelined {
			return r.resumePipeline(ctx, res)
		}
		// The old run's latest refresh, after step last, is made again from
		// the copied anchor pairs: the same pairs give the same version.
		if rf := cfg.WorldModel.Refresh; rf.On() {
			if last := r.st.Step/rf.Every*rf.Every - 1; last >= 0 {
				if err := r.refreshWorldModel(ctx, last); err != nil {
					return err
				}
			}
		}
	}
	if r.st == nil {
		req := activities.CreateRunRequest{RunID: r.in.RunID, Config: cfg}
		cctx := summarized(ctl, r.ui, "run %s: %s, %d steps, seed %d", r.in.RunID, cfg.Mode, cfg.Steps, cfg.Seed)
		created, err := activities.CreateRun.Execute(cctx, req).Result(ctx)
		if err != nil {
			return fmt.Errorf("create run: %w", err)
		}
		r.st = &RunState{Checkpoint: created.Checkpoint, AnchorFraction: cfg.Anchors.Fraction, Rho: 1}
	}
	r.details(ctx)
	return nil
}

// details sets the run's current details (changeUISummaries).
func (r *runFlow) details(ctx workflow.Context) {
	if r.ui {
		workflow.SetCurrentDetails(ctx, runDetails(r.in.RunID, r.cfg.Steps, r.st, r.state()))
	}
}

func (r *runFlow) state() string {
	switch {
	case r.completed:
		return StateCompleted
	case r.st.Stopping:
		return StateStopping
	case r.st.Paused:
		return StatePaused
	}
	return StateRunning
}

// handlers answers the status query and the set-anchor-fraction update and
// listens to the pause, resume and stop signals.
func (r *runFlow) handlers(ctx workflow.Context) error {
	st, cfg := r.st, r.cfg
	err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		return Status{
			Run: r.in.RunID, Name: cfg.Name, State: r.state(), Mode: cfg.Mode, Step: st.Step, Steps: cfg.Steps,
			AnchorFraction: st.AnchorFraction, RealisedAnchorFraction: st.Tracker.Realised(), Rho: st.Rho,
			Checkpoint: st.Checkpoint, Last: st.Last, Calibration: st.Calibration, HeldOut: st.HeldOut,
			WorldModel: st.WorldModel, InFlight: slices.Clone(r.inFlight),
		}, nil
	})
	if err != nil {
		return fmt.Errorf("set query handler: %w", err)
	}
	set := func(f float64) FractionChange {
		c := FractionChange{Previous: st.AnchorFraction, FromStep: st.Step}
		st.AnchorFraction = f
		if r.pipelined {
			// From the first step not started yet on.
			for i := range st.Planned {
				st.Planned[i].AnchorFraction = f
			}
			c.FromStep = r.next
		} else if r.stepping {
			c.FromStep = st.Step + 1
		}
		return c
	}
	validator := workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, f float64) error {
		return validateFraction(cfg, f)
	}}
	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateSetAnchorFraction,
		func(ctx workflow.Context, f float64) (float64, error) { return set(f).Previous, nil }, validator)
	if err != nil {
		return fmt.Errorf("set update handler: %w", err)
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateSetAnchorFractionFrom,
		func(ctx workflow.Context, f float64) (FractionChange, error) { return set(f), nil }, validator)
	if err != nil {
		return fmt.Errorf("set update handler: %w", err)
	}
	r.pauseCh = workflow.GetSignalChannel(ctx, SignalPause)
	r.resumeCh = workflow.GetSignalChannel(ctx, SignalResume)
	r.stopCh = workflow.GetSignalChannel(ctx, SignalStop)
	listen := func(ch workflow.ReceiveChannel, apply func()) {
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				ch.Receive(ctx, nil)
				apply()
			}
		})
	}
	listen(r.pauseCh, func() { st.Paused = true })
	listen(r.resumeCh, func() { st.Paused = false })
	listen(r.stopCh, func() { st.Stopping = true })
	if r.carry {
		r.flights = map[int]*flight{}
		r.reportCh = workflow.GetSignalChannel(ctx, SignalStepReport)
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				var rep StepReport
				r.reportCh.Receive(ctx, &rep)
				r.applyReport(rep)
			}
		})
	}
	return nil
}

func (r *runFlow) setState(ctx workflow.Context, s activities.RunState) error {
	req := activities.SetRunStateRequest{RunID: r.in.RunID, State: s}
	cctx := summarized(withControl(ctx), r.ui, "%s at step %d", s, r.st.Step)
	return activities.SetRunState.Execute(cctx, req).Wait(ctx)
}

// loop runs the steps: it waits while paused, ends early when stopped,
// continues as new every ContinueAsNewEvery steps, evaluates every
// Eval.Every steps and at the end, and records the run's end.
func (r *runFlow) loop(ctx workflow.Context) (RunResult, error) {
	st, cfg, logger := r.st, r.cfg, r.logger
	if err := workflow.UpsertTypedSearchAttributes(ctx, keyRunName().ValueSet(cfg.Name),
		keyMode().ValueSet(string(cfg.Mode)), keyStep().ValueSet(int64(st.Step))); err != nil {
		return RunResult{}, fmt.Errorf("upsert search attributes: %w", err)
	}
	if r.pipelined {
		return r.pipelineLoop(ctx)
	}
	stepsHere := 0
	for st.Step < cfg.Steps {
		if st.Paused && !st.Stopping {
			if err := r.setState(ctx, activities.RunPaused); err != nil {
				return RunResult{}, fmt.Errorf("record pause: %w", err)
			}
			logger.Info("paused", "step", st.Step)
			r.details(ctx)
			if err := workflow.Await(ctx, func() bool { return !st.Paused || st.Stopping }); err != nil {
				return RunResult{}, err
			}
			if err := r.setState(ctx, activities.RunRunning); err != nil {
				return RunResult{}, fmt.Errorf("record resume: %w", err)
			}
			r.details(ctx)
		}
		if st.Stopping {
			break
		}
		if stepsHere >= cfg.ContinueAsNewEvery || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return RunResult{}, r.continueAsNew(ctx)
		}
		if err := r.step(ctx); err != nil {
			return RunResult{}, err
		}
		stepsHere++
		if rf := cfg.WorldModel.Refresh; rf.On() && st.Step%rf.Every == 0 && st.Step < cfg.Steps {
			if err := r.refreshWorldModel(ctx, st.Step-1); err != nil {
				return RunResult{}, err
			}
		}
		if cfg.Eval.Every > 0 && st.Step%cfg.Eval.Every == 0 && st.Step < cfg.Steps {
			if err := evaluate(ctx, r.in.RunID, cfg, st, r.ui); err != nil {
				return RunResult{}, err
			}
			r.details(ctx)
		}
	}
	return r.end(ctx)
}

// continueAsNew hands the run's state, with the signals already
// delivered, to a new execution (once every handler is done).
func (r *runFlow) continueAsNew(ctx workflow.Context) error {
	st := r.st
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	if workflow.GetVersion(ctx, changeRunSignalsAtCAN, workflow.DefaultVersion, 1) >= 1 {
		// A signal delivered in this workflow task may be held for
		// its blocked listener, out of drain's reach, until the
		// listener runs: let it run before the state is handed on.
		yield(ctx)
	}
	drain(r.pauseCh, func() { st.Paused = true })
	drain(r.resumeCh, func() { st.Paused = false })
	drain(r.stopCh, func() { st.Stopping = true })
	if r.carry {
		for {
			var rep StepReport
			if !r.reportCh.ReceiveAsync(&rep) {
				break
			}
			r.applyReport(rep)
		}
		st.InFlight = r.carried()
	}
	r.logger.Info("continue as new", "step", st.Step, "in_flight", len(st.InFlight))
	return workflow.NewContinueAsNewError(ctx, TrainingRun, RunInput{RunID: r.in.RunID, Config: r.cfg, State: st})
}

// end evaluates the last checkpoint (unless it was just evaluated) and
// records the run's end.
func (r *runFlow) end(ctx workflow.Context) (RunResult, error) {
	st, cfg := r.st, r.cfg
	if st.Step > 0 && (st.HeldOut == nil || st.HeldOut.Version != st.Step) {
		if err := evaluate(ctx, r.in.RunID, cfg, st, r.ui); err != nil {
			return RunResult{}, err
		}
	}
	if err := r.setState(ctx, activities.RunCompleted); err != nil {
		return RunResult{}, fmt.Errorf("record completion: %w", err)
	}
	r.completed = true
	r.details(ctx)
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return RunResult{}, err
	}
	return RunResult{RunID: r.in.RunID, Steps: st.Step, Stopped: st.Step < cfg.Steps, Checkpoint: st.Checkpoint,
		HeldOut: st.HeldOut}, nil
}

// step runs step st.Step as a child workflow and folds its result into the
// run's state.
func (r *runFlow) step(ctx workflow.Context) error {
	st, cfg := r.st, r.cfg
	var res StepResult
	sin := StepInput{RunID: r.in.RunID, Step: st.Step, Config: cfg, AnchorFraction: st.AnchorFraction,
		Checkpoint: st.Checkpoint, Denoise: st.Denoise, WorldModel: st.WorldModel}
	co := workflow.ChildWorkflowOptions{
		WorkflowID: StepWorkflowID(r.in.RunID, st.Step),
		TaskQueue:  QueueControl,
	}
	if r.ui {
		co.StaticSummary, co.StaticDetails = stepSummary(sin), stepDetails(sin)
	}
	cctx := workflow.WithChildOptions(ctx, co)
	r.stepping = true
	defer func() { r.stepping = false }()
	if err := workflow.ExecuteChildWorkflow(cctx, TrainingStep, sin).Get(ctx, &res); err != nil {
		// Record the failure for `wmrl list`; the run can be resumed
		// from its last completed step.
		if serr := r.setState(ctx, activities.RunFailed); serr != nil {
			r.logger.Error("record failure", "error", serr)
		}
		return fmt.Errorf("step %d: %w", st.Step, err)
	}
	return r.fold(ctx, res)
}

// fold folds step st.Step's result into the run's state: checkpoint
// st.Step+1, the denoiser's state, ρ, the adaptive anchor fraction, the
// last step's metrics and calibration.
func (r *runFlow) fold(ctx workflow.Context, res StepResult) error {
	st, cfg := r.st, r.cfg
	st.Tracker.Add(cfg.Groups, len(res.Anchors))
	st.Checkpoint, st.Denoise, st.Rho = res.Checkpoint, res.Denoise, res.Rho
	if a := cfg.Anchors.Adaptive; a.Enabled() && res.Denoise.Calibrated &&
		workflow.GetVersion(ctx, changeAdaptiveAnchors, workflow.DefaultVersion, 1) >= 1 {
		// ρ is 1 by definition until the denoiser is calibrated: the
		// controller acts from then on. Its state is the fraction itself,
		// carried in RunState across continue-as-new; a fraction set by
		// set-anchor-fraction is where it goes on from.
		st.AnchorFraction = anchors.Adapt(st.AnchorFraction, res.Rho, a.Controller())
	}
	st.Last = &StepSummary{Step: res.Step, Anchors: res.Anchors, Metrics: res.Metrics}
	if res.Calibration != nil {
		st.Calibration = res.Calibration
	}
	st.Step++
	if err := workflow.UpsertTypedSearchAttributes(ctx, keyStep().ValueSet(int64(st.Step))); err != nil {
		return fmt.Errorf("upsert search attributes: %w", err)
	}
	r.details(ctx)
	return nil
}

// refreshWorldModel retrains the run's world model on its anchor pairs of
// steps 0..last (world_model.refresh, behind changeWorldModelRefresh): the
// version it returns scores the next steps. With fewer than min_pairs pairs
// the model stays as it is.
func (r *runFlow) refreshWorldModel(ctx workflow.Context, last int) error {
	if workflow.GetVersion(ctx, changeWorldModelRefresh, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	req := activities.RefreshRequest{RunID: r.in.RunID, Step: last, SuiteSeed: r.cfg.SuiteSeed,
		MinPairs: r.cfg.WorldModel.Refresh.MinPairs}
	rctx := summarized(withRefresh(ctx), r.ui, "on the anchor pairs of steps 0..%d", last)
	res, err := activities.RefreshWorldModel.Execute(rctx, req).Result(ctx)
	if err != nil {
		if serr := r.setState(ctx, activities.RunFailed); serr != nil {
			r.logger.Error("record failure", "error", serr)
		}
		return fmt.Errorf("refresh world model after step %d: %w", last, err)
	}
	if res.Version != nil {
		r.st.WorldModel = res.Version
		r.logger.Info("world model refreshed", "step", last, "hash", res.Version.Hash, "pairs", res.Pairs)
	}
	return nil
}

// validateFraction is the validator of set-anchor-fraction.
func validateFraction(cfg runconfig.Config, f float64) error {
	if !cfg.Mode.Pieces().Anchors {
		return fmt.Errorf("mode %s has no anchor groups", cfg.Mode)
	}
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("anchor fraction must be in [0,1], got %v", f)
	}
	return nil
}

// yield lets every other coroutine of the workflow run until it blocks
// (the signal listeners apply what they were handed), then returns. It adds
// no command to the history.
func yield(ctx workflow.Context) {
	ch := workflow.NewChannel(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) { ch.Send(ctx, struct{}{}) })
	ch.Receive(ctx, nil)
}

// drain applies every signal already delivered on ch.
func drain(ch workflow.ReceiveChannel, apply func()) {
	for ch.ReceiveAsync(nil) {
		apply()
	}
}

// evaluate measures the held-out score of checkpoint st.Step: Eval.Samples
// programs per held-out task, each really executed (sandbox queue), counted
// apart from training. From changeEvalV2 on, a task's evaluation is retried
// until it has a verdict and an evaluation of nothing is an error; before
// it, a task whose evaluation failed five times counted with the samples
// it stored before failing, or was left out when it stored none. ui is
// changeUISummaries: summaries on its activities.
func evaluate(ctx workflow.Context, runID string, cfg runconfig.Config, st *RunState, ui bool) error {
	version := workflow.GetVersion(ctx, changeEvalV2, workflow.DefaultVersion, 1)
	logger := workflow.GetLogger(ctx)
	ctl := withControl(ctx)
	treq := activities.HeldOutTasksRequest{SuiteSeed: cfg.SuiteSeed, Limit: cfg.Eval.Tasks}
	if workflow.GetVersion(ctx, changeEvalTasksOfRun, workflow.DefaultVersion, 1) >= 1 {
		treq.RunID = runID
	}
	v := st.Checkpoint.Version
	tctx := summarized(ctl, ui, "checkpoint %d: %d tasks", v, cfg.Eval.Tasks)
	tasks, err := activities.HeldOutTasks.Execute(tctx, treq).Result(ctx)
	if err != nil {
		return fmt.Errorf("held-out tasks: %w", err)
	}
	ev := withEvaluate(ctx, cfg)
	if version >= 1 {
		ev = withEvaluateUntilVerdict(ctx, cfg)
	}
	limits := cfg.Sandbox.Limits()
	// A multi-turn run's samples are its K turns, a best_of run's its N
	// attempts (changeEvalAttempts); a single-shot run's evaluation never
	// asks.
	attempts := 1
	if cfg.EvalAttempts() > 1 && workflow.GetVersion(ctx, changeEvalAttempts, workflow.DefaultVersion, 1) >= 1 {
		attempts = cfg.EvalAttempts()
		ev = withEvaluateAttempts(ctx, cfg, attempts)
	}
	err = forEach(ctx, len(tasks.TaskIDs), cfg.Parallelism, func(i int) activities.Future[activities.EvaluateResponse] {
		req := activities.EvaluateRequest{
			RunID: runID, Checkpoint: st.Checkpoint, TaskID: tasks.TaskIDs[i], Samples: cfg.Eval.Samples,
			Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed, Limits: limits, Budget: cfg.Sandbox.Budget}
		ectx := summarized(ev, ui, "checkpoint %d %s: %d samples", v, tasks.TaskIDs[i], cfg.Eval.Samples)
		if attempts > 1 {
			what := "attempts (best of)"
			if cfg.Trajectory.MultiTurn() {
				req.Turns, req.Reward, what = cfg.Trajectory.TurnCount(), cfg.Trajectory.Reduction(), "turns"
			} else {
				req.BestOf = attempts
			}
			ectx = summarized(ev, ui, "checkpoint %d %s: %d samples × %d %s", v, tasks.TaskIDs[i], cfg.Eval.Samples, attempts, what)
		}
		return activities.Evaluate.Execute(ectx, req)
	}, func(i int, f activities.Future[activities.EvaluateResponse]) error {
		err := f.Wait(ctx)
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == activities.ErrInvalidInput {
			return fmt.Errorf("evaluate %s: %w", tasks.TaskIDs[i], err)
		}
		if err != nil && version >= 1 {
			return fmt.Errorf("evaluate %s: no verdict within sandbox.retry_hours (%v): %w", tasks.TaskIDs[i],
				cfg.Sandbox.RetryBudget(), err)
		}
		if err != nil {
			logger.Warn("held-out task not evaluated", "task", tasks.TaskIDs[i], "error", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	hreq := activities.HeldOutScoreRequest{RunID: runID, Version: st.Checkpoint.Version}
	hctx := summarized(ctl, ui, "checkpoint %d", v)
	h, err := activities.HeldOutScore.Execute(hctx, hreq).Result(ctx)
	if err != nil {
		return fmt.Errorf("held-out score: %w", err)
	}
	if version >= 1 && (h.Tasks == 0 || h.Samples == 0) {
		return invalidInput(fmt.Errorf("held-out evaluation of checkpoint %d evaluated no program (%d tasks, %d samples): "+
			"no score is reported for it", st.Checkpoint.Version, h.Tasks, h.Samples))
	}
	st.HeldOut = &HeldOut{Version: st.Checkpoint.Version, Score: h.Score, Tasks: h.Tasks, Samples: h.Samples}
	if err := workflow.UpsertTypedSearchAttributes(ctx, keyHeldOut().ValueSet(h.Score)); err != nil {
		return fmt.Errorf("upsert search attributes: %w", err)
	}
	return nil
}
