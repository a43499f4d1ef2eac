package workflows

import (
	"errors"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
)

// The asynchronous bounded-staleness pipeline (pipeline.max_off_policy d >
// 0, changeAsyncPipeline; docs/design.md, "Asynchronous pipeline"). The run
// keeps up to d+1 TrainingStep children in flight: step t starts once step
// t−d−1 is done, samples from checkpoint max(0, t−d), and waits inside
// its child for step t−1's checkpoint and denoiser state (delivered by
// signal as soon as step t−1 is done) before CalibrateAndFuse and Update.
// Steps complete in step order and are folded into the run's state in that
// order. Every value a step reads is fixed by step numbers — its sampler,
// the anchor fraction and world-model version the run had after step t−d−1
// (RunState.Planned), step t−1's outcome — never by which activity
// finished first, so the run's checkpoints are a function of config and
// seed alone.
//
// Pause and stop drain: no new step starts, the steps in flight complete,
// then the run pauses or ends with nothing in flight. Continue-as-new
// (changePipelineCarry) carries the steps in flight: they are started with
// the parent close policy abandon, so the run's continue-as-new does not
// end them, and report by signal (SignalStepReport) to the run's workflow
// ID, which reaches the execution current when they end. RunState.InFlight
// hands the next execution each step in flight (what it started with,
// whether step t−1's outcome was delivered to it, a report received and
// not folded yet) besides the planned values of the next steps and the
// checkpoints they sample from; the next execution folds them in step
// order and delivers step t−1's outcome to a step it did not start by
// signalling that step's workflow ID. A report is never lost at the
// handover: one delivered to the old execution before it closes is drained
// into RunState.InFlight (the server refuses to close an execution with a
// signal it has not handed to the workflow), one delivered later reaches
// the new execution; a report of a step already folded is recognised by
// its step number and ignored. Before changePipelineCarry, continue-as-new
// drained as pause does.

// flight is a step in flight.
type flight struct {
	// fut is the child's future; nil for a step started by an earlier
	// execution of the run (changePipelineCarry), known by its reports.
	fut  workflow.ChildWorkflowFuture
	done bool
	res  StepResult
	err  error
	// What the step started with and, under changePipelineCarry, whether
	// step t−1's outcome was handed to it and its report.
	sampler   activities.CheckpointRef
	fraction  float64
	wm        *activities.WorldModelRef
	delivered bool
	report    *StepReport
}

// ended reports whether the step's outcome is known.
func (f *flight) ended() bool { return f.report != nil || f.done }

// outcome is the step's result, from its report or its child's future; a
// failure is the child's error (with its type) when this execution started
// it.
func (f *flight) outcome() (StepResult, error) {
	if f.done && f.err != nil {
		return StepResult{}, f.err
	}
	if rep := f.report; rep != nil {
		if rep.Error != "" || rep.Result == nil {
			return StepResult{}, fmt.Errorf("reported: %s", rep.Error)
		}
		return *rep.Result, nil
	}
	return f.res, f.err
}

// pipelineLoop is loop for a pipelined run. Under changePipelineCarry the
// step children outlive the run's execution (abandon), so a run that fails
// asks the steps still in flight to cancel: none outlives it.
func (r *runFlow) pipelineLoop(ctx workflow.Context) (RunResult, error) {
	res, err := r.pipelineSteps(ctx)
	var can *workflow.ContinueAsNewError
	if err != nil && r.carry && !errors.As(err, &can) {
		if ctx.Err() != nil {
			ctx, _ = workflow.NewDisconnectedContext(ctx)
		}
		for _, t := range r.inFlight {
			f := r.flights[t]
			if f.ended() {
				continue
			}
			if cerr := workflow.RequestCancelExternalWorkflow(ctx, StepWorkflowID(r.in.RunID, t), "").Get(ctx, nil); cerr != nil {
				r.logger.Warn("cancel step in flight", "step", t, "error", cerr)
			}
		}
	}
	return res, err
}

// pipelineSteps runs a pipelined run's steps.
func (r *runFlow) pipelineSteps(ctx workflow.Context) (RunResult, error) {
	st, cfg := r.st, r.cfg
	d := cfg.Pipeline.OffPolicy()
	if len(st.Recent) == 0 {
		st.Recent = []activities.CheckpointRef{st.Checkpoint}
	}
	if r.flights == nil {
		r.flights = map[int]*flight{}
	}
	inFlight := r.flights
	next := st.Step
	// The steps an earlier execution started and carried over.
	for _, c := range st.InFlight {
		if c.Step != next || !r.carry {
			return RunResult{}, fmt.Errorf("carried step %d: want step %d in flight (carry %v)", c.Step, next, r.carry)
		}
		inFlight[c.Step] = &flight{sampler: c.Sampler, fraction: c.AnchorFraction, wm: c.WorldModel,
			delivered: c.Delivered, report: c.Report}
		r.inFlight = append(r.inFlight, c.Step)
		next++
	}
	if len(st.InFlight) > 0 {
		r.logger.Info("carried steps", "in_flight", r.inFlight)
	}
	st.InFlight = nil
	r.next = next
	// A new run plans its first d+1 steps with its initial values; a
	// continued execution has them from the one before.
	for t := next; t <= st.Step+d && t < cfg.Steps; t++ {
		if _, ok := r.planned(t); !ok {
			st.Planned = append(st.Planned, PlannedStep{Step: t, AnchorFraction: st.AnchorFraction, WorldModel: st.WorldModel})
		}
	}
	if f := inFlight[st.Step]; f != nil && !f.delivered {
		if err := r.deliver(ctx, st.Step, f); err != nil {
			return RunResult{}, err
		}
	}
	started, canDue := 0, false
	mayStart := func() bool {
		return !st.Paused && !st.Stopping && !canDue && next < cfg.Steps && next <= st.Step+d
	}
	for {
		for mayStart() {
			if started >= cfg.ContinueAsNewEvery || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
				canDue = true
				break
			}
			f, err := r.startPipelined(ctx, next)
			if err != nil {
				return RunResult{}, err
			}
			inFlight[next] = f
			r.inFlight = append(r.inFlight, next)
			next++
			r.next = next
			started++
		}
		if canDue && r.carry {
			return RunResult{}, r.continueCarrying(ctx)
		}
		if next == st.Step { // nothing in flight
			switch {
			case st.Step >= cfg.Steps || st.Stopping:
				return r.end(ctx)
			case canDue:
				return RunResult{}, r.continueAsNew(ctx)
			case st.Paused:
				if err := r.pause(ctx); err != nil {
					return RunResult{}, err
				}
				continue
			}
		}
		f := inFlight[st.Step]
		if f == nil {
			return RunResult{}, fmt.Errorf("step %d: not in flight (next %d)", st.Step, next)
		}
		if err := workflow.Await(ctx, func() bool { return f.ended() || mayStart() }); err != nil {
			return RunResult{}, err
		}
		if !f.ended() {
			continue // a resume: start what may start
		}
		if rep := f.report; rep != nil && rep.Error != "" && f.fut != nil {
			// A failure of a child this execution started: its error.
			if err := f.fut.Get(ctx, nil); err != nil {
				f.done, f.err = true, err
			}
		}
		delete(inFlight, st.Step)
		r.inFlight = slices.DeleteFunc(r.inFlight, func(t int) bool { return t == st.Step })
		res, err := f.outcome()
		if err := r.foldPipelined(ctx, res, err, inFlight); err != nil {
			return RunResult{}, err
		}
	}
}

// continueCarrying continues a pipelined run as new with its steps in
// flight (changePipelineCarry), once each child it started has started: a
// child still to start when its parent closes is never started.
func (r *runFlow) continueCarrying(ctx workflow.Context) error {
	for _, t := range r.inFlight {
		if f := r.flights[t]; f.fut != nil {
			if err := f.fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
				if serr := r.setState(ctx, activities.RunFailed); serr != nil {
					r.logger.Error("record failure", "error", serr)
				}
				return fmt.Errorf("step %d: %w", t, err)
			}
		}
	}
	return r.continueAsNew(ctx)
}

// applyReport records a step's report (signal SignalStepReport) for the
// fold; a report of a step already folded, or a second one, is ignored.
func (r *runFlow) applyReport(rep StepReport) {
	f := r.flights[rep.Step]
	switch {
	case rep.Step < r.st.Step:
		r.logger.Info("report of a folded step ignored", "step", rep.Step)
	case f == nil:
		r.logger.Warn("report of a step not in flight ignored", "step", rep.Step)
	case f.report != nil:
		r.logger.Info("second report ignored", "step", rep.Step)
	default:
		f.report = &rep
	}
}

// carried is RunState.InFlight: the steps in flight, ascending, each with
// its report when it has ended (from its signal or, when that did not
// come, its child's future).
func (r *runFlow) carried() []CarriedStep {
	var out []CarriedStep
	for _, t := range r.inFlight {
		f := r.flights[t]
		rep := f.report
		if rep == nil && f.done {
			rep = &StepReport{Step: t}
			if f.err != nil {
				rep.Error = f.err.Error()
			} else {
				res := f.res
				rep.Result = &res
			}
		}
		out = append(out, CarriedStep{Step: t, Sampler: f.sampler, AnchorFraction: f.fraction, WorldModel: f.wm,
			Delivered: f.delivered, Report: rep})
	}
	return out
}

// deliver hands step t−1's outcome (the run's checkpoint and denoiser
// state, step t−1 just folded) to step t in flight: by its child future
// when this execution started it, else by signalling its workflow ID.
func (r *runFlow) deliver(ctx workflow.Context, t int, g *flight) error {
	st := r.st
	prev := PreviousStep{Step: t - 1, Checkpoint: st.Checkpoint, Denoise: st.Denoise}
	var err error
	if g.fut != nil {
		err = g.fut.SignalChildWorkflow(ctx, SignalPreviousStep, prev).Get(ctx, nil)
	} else {
		err = workflow.SignalExternalWorkflow(ctx, StepWorkflowID(r.in.RunID, t), "", SignalPreviousStep, prev).Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("hand step %d's outcome to step %d: %w", t-1, t, err)
	}
	g.delivered = true
	return nil
}

// planned returns the planned values of step t.
func (r *runFlow) planned(t int) (PlannedStep, bool) {
	for _, p := range r.st.Planned {
		if p.Step == t {
			return p, true
		}
	}
	return PlannedStep{}, false
}

// recent returns checkpoint v, one of RunState.Recent.
func (r *runFlow) recent(v int) (activities.CheckpointRef, error) {
	for _, c := range r.st.Recent {
		if c.Version == v {
			return c, nil
		}
	}
	return activities.CheckpointRef{}, fmt.Errorf("checkpoint %d is not among the run's recent ones %v", v, r.st.Recent)
}

// startPipelined starts step t's child with its planned values and its
// sampling checkpoint; the child is given checkpoint t and the denoiser's
// state when step t−1 is done already, and waits for them otherwise.
func (r *runFlow) startPipelined(ctx workflow.Context, t int) (*flight, error) {
	st, cfg := r.st, r.cfg
	p, ok := r.planned(t)
	if !ok {
		return nil, fmt.Errorf("step %d: no planned anchor fraction and world model", t)
	}
	sampler, err := r.recent(cfg.Pipeline.SamplingCheckpoint(t))
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", t, err)
	}
	kept := st.Planned[:0]
	for _, q := range st.Planned {
		if q.Step != t {
			kept = append(kept, q)
		}
	}
	st.Planned = kept
	sin := StepInput{RunID: r.in.RunID, Step: t, Config: cfg, AnchorFraction: p.AnchorFraction, WorldModel: p.WorldModel,
		Sampler: &sampler}
	if t == st.Step {
		sin.Checkpoint, sin.Denoise = st.Checkpoint, st.Denoise
	} else {
		sin.AwaitPrevious = true
	}
	co := workflow.ChildWorkflowOptions{WorkflowID: StepWorkflowID(r.in.RunID, t), TaskQueue: QueueControl}
	if r.carry {
		// The step may outlive this execution (continue-as-new) and
		// reports to the run's workflow ID.
		co.ParentClosePolicy = enumspb.PARENT_CLOSE_POLICY_ABANDON
		sin.Report = true
	}
	if r.ui {
		co.StaticSummary, co.StaticDetails = stepSummary(sin), stepDetails(sin)
	}
	f := &flight{fut: workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, co), TrainingStep, sin),
		sampler: sampler, fraction: p.AnchorFraction, wm: p.WorldModel, delivered: !sin.AwaitPrevious}
	workflow.Go(ctx, func(ctx workflow.Context) {
		f.err = f.fut.Get(ctx, &f.res)
		f.done = true
	})
	r.logger.Info("step started", "step", t, "sampler", sampler.Version, "await_previous", sin.AwaitPrevious)
	return f, nil
}

// foldPipelined folds the completed step st.Step, hands its outcome to
// the next step if that is in flight, refreshes the world model and
// evaluates when due, and plans step st.Step+d.
func (r *runFlow) foldPipelined(ctx workflow.Context, res StepResult, serr error, inFlight map[int]*flight) error {
	st, cfg := r.st, r.cfg
	d := cfg.Pipeline.OffPolicy()
	s := st.Step
	if serr != nil {
		if err := r.setState(ctx, activities.RunFailed); err != nil {
			r.logger.Error("record failure", "error", err)
		}
		return fmt.Errorf("step %d: %w", s, serr)
	}
	if res.Step != s {
		return fmt.Errorf("step %d: the result folded is step %d's", s, res.Step)
	}
	if err := r.fold(ctx, res); err != nil {
		return err
	}
	st.Recent = append(st.Recent, st.Checkpoint)
	if n := len(st.Recent); n > d+1 {
		st.Recent = append([]activities.CheckpointRef(nil), st.Recent[n-d-1:]...)
	}
	if g := inFlight[s+1]; g != nil {
		if err := r.deliver(ctx, s+1, g); err != nil {
			return err
		}
	}
	if rf := cfg.WorldModel.Refresh; rf.On() && st.Step%rf.Every == 0 && st.Step < cfg.Steps {
		if err := r.refreshWorldModel(ctx, st.Step-1); err != nil {
			return err
		}
	}
	if cfg.Eval.Every > 0 && st.Step%cfg.Eval.Every == 0 && st.Step < cfg.Steps {
		if err := evaluate(ctx, r.in.RunID, cfg, st, r.ui); err != nil {
			return err
		}
		r.details(ctx)
	}
	if t := s + 1 + d; t < cfg.Steps {
		st.Planned = append(st.Planned, PlannedStep{Step: t, AnchorFraction: st.AnchorFraction, WorldModel: st.WorldModel})
	}
	return nil
}

// pause records the pause of a run with nothing in flight, waits for a
// resume or a stop and records the resume.
func (r *runFlow) pause(ctx workflow.Context) error {
	st := r.st
	if err := r.setState(ctx, activities.RunPaused); err != nil {
		return fmt.Errorf("record pause: %w", err)
	}
	r.logger.Info("paused", "step", st.Step)
	r.details(ctx)
	if err := workflow.Await(ctx, func() bool { return !st.Paused || st.Stopping }); err != nil {
		return err
	}
	if err := r.setState(ctx, activities.RunRunning); err != nil {
		return fmt.Errorf("record resume: %w", err)
	}
	r.details(ctx)
	return nil
}

// resumePipeline completes the state of a pipelined run resumed at step S
// (changePipelineResume; docs/design.md, "Asynchronous pipeline"): steps
// S..S+d start with what they would have started with in the uninterrupted
// run. Their samplers are the copied checkpoints max(0, S−d)..S, their
// anchor fractions the ones ResumeRun rebuilt (the run's after steps
// S−d−1..S−1), and their world models the versions of the latest refresh
// after a step ≤ t−d−1, each made again from the copied anchor pairs, in
// step order (the same pairs give the same version); the run's own fraction
// and world model are those after step S−1.
func (r *runFlow) resumePipeline(ctx workflow.Context, res activities.ResumeRunResponse) error {
	st, cfg := r.st, r.cfg
	d := cfg.Pipeline.OffPolicy()
	p := res.Pipeline
	if p == nil || len(p.Fractions) != d+1 || len(p.Recent) == 0 || p.Recent[len(p.Recent)-1] != st.Checkpoint {
		return invalidInput(fmt.Errorf("resume from %s: no pipeline state for max_off_policy %d at step %d (%+v)",
			r.in.ResumeFrom, d, st.Step, p))
	}
	st.Recent = p.Recent
	st.AnchorFraction = p.Fractions[d]
	// The refresh a step t ≥ S is scored by: the latest after a step
	// r ≤ t−d−1 with r+1 a multiple of every (none when negative).
	refreshed := func(t int) int { return -1 }
	if rf := cfg.WorldModel.Refresh; rf.On() {
		refreshed = func(t int) int {
			if t-d < 0 {
				return -1
			}
			return (t-d)/rf.Every*rf.Every - 1
		}
	}
	versions := map[int]*activities.WorldModelRef{-1: nil}
	for t := st.Step; t <= st.Step+d; t++ {
		last := refreshed(t)
		if _, ok := versions[last]; ok {
			continue
		}
		if err := r.refreshWorldModel(ctx, last); err != nil {
			return err
		}
		versions[last] = st.WorldModel
	}
	st.Planned = nil
	for k := range d + 1 {
		if t := st.Step + k; t < cfg.Steps {
			st.Planned = append(st.Planned, PlannedStep{Step: t, AnchorFraction: p.Fractions[k], WorldModel: versions[refreshed(t)]})
		}
	}
	r.logger.Info("resumed pipeline", "step", st.Step, "recent", len(st.Recent), "planned", len(st.Planned))
	return nil
}
