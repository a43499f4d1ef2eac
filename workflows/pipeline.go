package workflows

import (
	"fmt"
	"slices"

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
// Pause, stop and continue-as-new drain: no new step starts, the steps in
// flight complete, then the run pauses, ends or continues as new with
// nothing in flight, carrying the planned values of the next d+1 steps and
// the checkpoints they sample from.

// flight is a step child in flight.
type flight struct {
	fut  workflow.ChildWorkflowFuture
	done bool
	res  StepResult
	err  error
}

// pipelineLoop is loop for a pipelined run.
func (r *runFlow) pipelineLoop(ctx workflow.Context) (RunResult, error) {
	st, cfg := r.st, r.cfg
	d := cfg.Pipeline.OffPolicy()
	if len(st.Recent) == 0 {
		st.Recent = []activities.CheckpointRef{st.Checkpoint}
	}
	// A new run plans its first d+1 steps with its initial values; a
	// continued execution has them from the one before.
	for t := st.Step; t <= st.Step+d && t < cfg.Steps; t++ {
		if _, ok := r.planned(t); !ok {
			st.Planned = append(st.Planned, PlannedStep{Step: t, AnchorFraction: st.AnchorFraction, WorldModel: st.WorldModel})
		}
	}
	inFlight := map[int]*flight{}
	next, started, canDue := st.Step, 0, false
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
			started++
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
		if err := workflow.Await(ctx, func() bool { return f.done || mayStart() }); err != nil {
			return RunResult{}, err
		}
		if !f.done {
			continue // a resume: start what may start
		}
		delete(inFlight, st.Step)
		r.inFlight = slices.DeleteFunc(r.inFlight, func(t int) bool { return t == st.Step })
		if err := r.foldPipelined(ctx, f, inFlight); err != nil {
			return RunResult{}, err
		}
	}
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
	if r.ui {
		co.StaticSummary, co.StaticDetails = stepSummary(sin), stepDetails(sin)
	}
	f := &flight{fut: workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, co), TrainingStep, sin)}
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
func (r *runFlow) foldPipelined(ctx workflow.Context, f *flight, inFlight map[int]*flight) error {
	st, cfg := r.st, r.cfg
	d := cfg.Pipeline.OffPolicy()
	s := st.Step
	if f.err != nil {
		if serr := r.setState(ctx, activities.RunFailed); serr != nil {
			r.logger.Error("record failure", "error", serr)
		}
		return fmt.Errorf("step %d: %w", s, f.err)
	}
	if err := r.fold(ctx, f.res); err != nil {
		return err
	}
	st.Recent = append(st.Recent, st.Checkpoint)
	if n := len(st.Recent); n > d+1 {
		st.Recent = append([]activities.CheckpointRef(nil), st.Recent[n-d-1:]...)
	}
	if g := inFlight[s+1]; g != nil {
		prev := PreviousStep{Step: s, Checkpoint: st.Checkpoint, Denoise: st.Denoise}
		if err := g.fut.SignalChildWorkflow(ctx, SignalPreviousStep, prev).Get(ctx, nil); err != nil {
			return fmt.Errorf("hand step %d's outcome to step %d: %w", s, s+1, err)
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
