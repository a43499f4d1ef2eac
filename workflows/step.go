package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
)

// StepInput is the input of one TrainingStep.
type StepInput struct {
	RunID  string           `json:"run_id"`
	Step   int              `json:"step"`
	Config runconfig.Config `json:"config"`
	// AnchorFraction is the run's current anchor fraction (the config's,
	// unless changed by set-anchor-fraction).
	AnchorFraction float64 `json:"anchor_fraction"`
	// Checkpoint is checkpoint s, the policy the step samples from.
	Checkpoint activities.CheckpointRef `json:"checkpoint"`
	// Denoise is the denoiser's state before the step.
	Denoise denoise.State `json:"denoise"`
	// WorldModel is the run's refreshed world model that scores the step
	// (world_model.refresh); nil, left out of the JSON, means the frozen
	// model, as in every step started before refreshes existed.
	WorldModel *activities.WorldModelRef `json:"world_model,omitempty"`
	// Sampler (pipeline.max_off_policy d > 0 only, changeAsyncPipeline) is
	// checkpoint max(0, s−d), the policy the rollouts sample from; nil: the
	// step samples from Checkpoint, as every sequential step does.
	Sampler *activities.CheckpointRef `json:"sampler,omitempty"`
	// AwaitPrevious (with Sampler) is true when step s−1 was still running
	// as the step started: Checkpoint and Denoise are then unset and come
	// by signal SignalPreviousStep once step s−1 is done, before
	// CalibrateAndFuse.
	AwaitPrevious bool `json:"await_previous,omitempty"`
	// Report (with Sampler, changePipelineCarry) is true when the run
	// started the step with the parent close policy abandon, so that it
	// may outlive the run's execution across continue-as-new: before it
	// returns, the step reports its result, or its failure, by signal
	// SignalStepReport to its parent's workflow ID, which reaches whichever
	// execution of the run is current.
	Report bool `json:"report,omitempty"`
}

// SignalStepReport carries a pipelined step's StepReport to the run
// (StepInput.Report).
const SignalStepReport = "step-report"

// StepReport is what a step started with StepInput.Report sends to the run
// as it ends: its result, or the error it failed with.
type StepReport struct {
	Step   int         `json:"step"`
	Result *StepResult `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// SignalPreviousStep delivers step s−1's outcome to step s of a pipelined
// run (StepInput.AwaitPrevious).
const SignalPreviousStep = "previous-step"

// PreviousStep is what step s needs from step s−1 in a pipelined run:
// checkpoint s and the denoiser's state after step s−1.
type PreviousStep struct {
	Step       int                      `json:"step"`
	Checkpoint activities.CheckpointRef `json:"checkpoint"`
	Denoise    denoise.State            `json:"denoise"`
}

// StepResult is what a step hands back to the run.
type StepResult struct {
	Step int `json:"step"`
	// Checkpoint is checkpoint s+1.
	Checkpoint activities.CheckpointRef `json:"checkpoint"`
	// Denoise is the denoiser's state after the step; Rho the step's ρ.
	Denoise denoise.State `json:"denoise"`
	Rho     float64       `json:"rho"`
	// Anchors are the step's anchor groups (ascending; empty in grpo and wm).
	Anchors []int `json:"anchors"`
	// AnchorWeights are the anchor groups' weights under active anchor
	// selection (AnchorWeights[i] of Anchors[i]); absent otherwise.
	AnchorWeights []float64 `json:"anchor_weights,omitempty"`
	// Calibration is the step's map summary when the mode debiases.
	Calibration *activities.CalibrationSummary `json:"calibration,omitempty"`
	Metrics     activities.StepMetrics         `json:"metrics"`
}

// StepWorkflowID is the workflow ID of step n of a run.
func StepWorkflowID(runID string, step int) string { return fmt.Sprintf("%s/step-%d", runID, step) }

// TrainingStep runs one training step (docs/design.md, "The step workflow"): the
// stages below, in order, each a helper of stepRun.
func TrainingStep(ctx workflow.Context, in StepInput) (StepResult, error) {
	if err := in.Config.Validate(); err != nil {
		return StepResult{}, invalidInput(err)
	}
	s := &stepRun{in: in, cfg: in.Config, pc: in.Config.Mode.Pieces(), logger: workflow.GetLogger(ctx)}
	s.version = workflow.GetVersion(ctx, changeStepV2, workflow.DefaultVersion, 1)
	s.res = StepResult{Step: in.Step, Anchors: []int{}}
	s.gen = make([]activities.GenerateResponse, s.cfg.Groups)
	m := &s.res.Metrics
	m.Groups, m.Samples, m.Trajectories = s.cfg.Groups, s.cfg.Samples, s.cfg.Groups*s.cfg.Samples
	if err := workflow.UpsertTypedSearchAttributes(ctx, keyRunName().ValueSet(s.cfg.Name),
		keyMode().ValueSet(string(s.cfg.Mode)), keyStep().ValueSet(int64(in.Step))); err != nil {
		return StepResult{}, fmt.Errorf("upsert search attributes: %w", err)
	}
	stages := []func(workflow.Context) error{
		s.start,           // StartStep: record the step in Postgres
		s.generate,        // 1. Generate × G (rollout)
		s.chooseAnchors,   // 2. anchor groups, a pure function of (seed, step)
		s.scoreWorldModel, // 3. ScoreWorldModel × G (worldmodel)
		s.execute,         // 4. Execute the anchor (or, in grpo, all) trajectories (sandbox)
		s.settle,          // 5-7. RecordAnchors, Calibrate, Fuse (control)
		s.update,          // 8. Update: checkpoint s -> s+1 (gpu)
		s.finish,          // 9. FinishStep: the step's metrics
	}
	if s.version >= 1 && workflow.GetVersion(ctx, changeStepPipeline, workflow.DefaultVersion, 1) >= 1 {
		s.pipeline = true
		stages = []func(workflow.Context) error{
			s.start,         // StartStep: record the step in Postgres
			s.chooseAnchors, // 2. anchor groups, a pure function of (seed, step)
			s.rollout,       // 1, 3, 4. per group: Generate, then ScoreWorldModel and Execute
			s.settle,        // 5-7. CalibrateAndFuse (control)
			s.update,        // 8. Update: checkpoint s -> s+1 (gpu)
			s.finish,        // 9. FinishStep: the step's metrics
		}
	}
	if s.cfg.Trajectory.MultiTurn() {
		// Only multi-turn runs ask, and none existed before the change.
		if !s.pipeline || workflow.GetVersion(ctx, changeTurns, workflow.DefaultVersion, 1) < 1 {
			return StepResult{}, invalidInput(fmt.Errorf("trajectory.turns %d: this step predates multi-turn trajectories",
				s.cfg.Trajectory.TurnCount()))
		}
		stages[2] = s.turnRollout // in place of s.rollout
	}
	if in.Config.Pipeline.OffPolicy() > 0 {
		// Only pipelined runs ask, and none existed before the change.
		if !s.pipeline || in.Sampler == nil || workflow.GetVersion(ctx, changeAsyncPipeline, workflow.DefaultVersion, 1) < 1 {
			return StepResult{}, invalidInput(fmt.Errorf("pipeline.max_off_policy %d: this step predates the asynchronous pipeline "+
				"or was started without a sampling checkpoint", in.Config.Pipeline.OffPolicy()))
		}
		// Step s−1's checkpoint and denoiser state before CalibrateAndFuse.
		stages = append(stages[:3:3], append([]func(workflow.Context) error{s.awaitPrevious}, stages[3:]...)...)
	}
	s.ui = uiSummaries(ctx)
	if s.pipeline && workflow.GetVersion(ctx, changeStageTimes, workflow.DefaultVersion, 1) >= 1 {
		s.clock = true
	}
	st := &s.res.Metrics.Stages
	s.begin(ctx, &st.Step)
	for _, stage := range stages {
		if err := stage(ctx); err != nil {
			s.report(ctx, err)
			return s.res, err
		}
	}
	if s.ui {
		workflow.SetCurrentDetails(ctx, stepLine(in.Step, s.res))
	}
	s.report(ctx, nil)
	return s.res, nil
}

// report sends, for a step started with StepInput.Report, its result (err
// nil) or its failure to the run's workflow ID (its parent's: the
// execution that started it, or the one it continued as). A run that has
// ended no longer listens: the step's rows are recorded all the same, so
// the error is only logged.
func (s *stepRun) report(ctx workflow.Context, err error) {
	if !s.in.Report {
		return
	}
	rep := StepReport{Step: s.in.Step}
	if err != nil {
		rep.Error = err.Error()
	} else {
		res := s.res
		rep.Result = &res
	}
	run := s.in.RunID
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; p != nil && p.ID != "" {
		run = p.ID
	}
	if serr := workflow.SignalExternalWorkflow(ctx, run, "", SignalStepReport, rep).Get(ctx, nil); serr != nil {
		s.logger.Warn("step report not delivered", "run", run, "error", serr)
	}
}

// stepRun is one TrainingStep's state, shared by its stages.
type stepRun struct {
	in      StepInput
	cfg     runconfig.Config
	pc      mode.Pieces
	version workflow.Version
	// pipeline is changeStepPipeline: rollout instead of stages 1, 3, 4,
	// and CalibrateAndFuse as a local activity.
	pipeline bool
	// ui is changeUISummaries: summaries on the activities and the
	// step's result line as its current details.
	ui bool
	// clock is changeStageTimes: the stages' spans go into the metrics.
	clock  bool
	logger log.Logger
	res    StepResult
	// gen are the groups' Generate results (their tasks, for the
	// Execute summaries).
	gen []activities.GenerateResponse
	// unc is AnchorUncertainty's answer, asked at most once a step (active
	// anchors, selective scoring).
	unc *activities.AnchorUncertaintyResponse
	// selection is selective scoring's decision (changeSelectiveScoring),
	// nil without it.
	selection *fusion.Selection
}

func (s *stepRun) stepRequest() activities.StepRequest {
	return activities.StepRequest{RunID: s.in.RunID, Step: s.in.Step}
}

func (s *stepRun) start(ctx workflow.Context) error {
	var err error
	if s.version >= 1 {
		lctx := summarizedLocal(withLocalControl(ctx, s.cfg), s.ui, "step %d", s.in.Step)
		err = activities.StartStep.ExecuteLocal(lctx, s.stepRequest()).Wait(ctx)
	} else {
		cctx := summarized(withControl(ctx), s.ui, "step %d", s.in.Step)
		err = activities.StartStep.Execute(cctx, s.stepRequest()).Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("start step: %w", err)
	}
	return nil
}

// sampler is the checkpoint the step's rollouts sample from: checkpoint s,
// or in a pipelined run max(0, s−d).
func (s *stepRun) sampler() activities.CheckpointRef {
	if s.in.Sampler != nil {
		return *s.in.Sampler
	}
	return s.in.Checkpoint
}

// awaitPrevious waits, in a pipelined run, for step s−1's checkpoint and
// denoiser state (signal SignalPreviousStep) unless the step started with
// them.
func (s *stepRun) awaitPrevious(ctx workflow.Context) error {
	if !s.in.AwaitPrevious {
		return nil
	}
	ch := workflow.GetSignalChannel(ctx, SignalPreviousStep)
	for {
		var p PreviousStep
		if s.in.Report {
			// A step that may outlive the run's execution also ends
			// when the run asks it to cancel (a run that fails).
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &p) })
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
			sel.Select(ctx)
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("step %d: waiting for step %d: %w", s.in.Step, s.in.Step-1, err)
			}
		} else {
			ch.Receive(ctx, &p)
		}
		if p.Step != s.in.Step-1 {
			s.logger.Warn("previous step signal for another step ignored", "step", p.Step)
			continue
		}
		if p.Checkpoint.Version != s.in.Step {
			return invalidInput(fmt.Errorf("step %d: step %d delivered checkpoint %d, want %d", s.in.Step, p.Step,
				p.Checkpoint.Version, s.in.Step))
		}
		s.in.Checkpoint, s.in.Denoise = p.Checkpoint, p.Denoise
		return nil
	}
}

func (s *stepRun) generateRequest(g int) activities.GenerateRequest {
	return activities.GenerateRequest{RunID: s.in.RunID, Step: s.in.Step, Group: g, Samples: s.cfg.Samples,
		Seed: s.cfg.Seed, SuiteSeed: s.cfg.SuiteSeed, Checkpoint: s.sampler()}
}

func (s *stepRun) scoreRequest(g int) activities.ScoreRequest {
	req := activities.ScoreRequest{RunID: s.in.RunID, Step: s.in.Step, Group: g, SuiteSeed: s.cfg.SuiteSeed}
	if v := s.in.WorldModel; v != nil {
		req.WorldModel = v.Hash
	}
	return req
}

// generateCtx, scoreCtx and executeCtx carry the summaries of group g's
// Generate, ScoreWorldModel and Execute of sample i.
func (s *stepRun) generateCtx(ctx workflow.Context, g int) workflow.Context {
	return summarized(ctx, s.ui, "step %d g%d: %d samples from checkpoint %d",
		s.in.Step, g, s.cfg.Samples, s.sampler().Version)
}

func (s *stepRun) scoreCtx(ctx workflow.Context, g int) workflow.Context {
	if !s.ui {
		return ctx
	}
	by := ""
	if v := s.in.WorldModel; v != nil {
		by = fmt.Sprintf(" by world model %s", short(v.Hash))
	}
	return summarized(ctx, true, "step %d g%d: %d programs %s%s",
		s.in.Step, g, s.cfg.Samples, taskOf(s.gen, g), by)
}

func (s *stepRun) executeCtx(ctx workflow.Context, g, i int) workflow.Context {
	return summarized(ctx, s.ui, "g%d/s%d %s", g, i, taskOf(s.gen, g))
}

// genInto is where group g's Generate result is decoded: s.gen[g] under
// changeUISummaries, nowhere before it (as then).
func (s *stepRun) genInto(g int) any {
	if !s.ui {
		return nil
	}
	return &s.gen[g]
}

func (s *stepRun) generate(ctx workflow.Context) error {
	rollout := withRollout(ctx)
	return forEach(ctx, s.cfg.Groups, s.cfg.Parallelism, func(g int) activities.Future[activities.GenerateResponse] {
		return activities.Generate.Execute(s.generateCtx(rollout, g), s.generateRequest(g))
	}, func(g int, f activities.Future[activities.GenerateResponse]) error {
		if err := f.Get(ctx, s.genInto(g)); err != nil {
			return fmt.Errorf("generate group %d: %w", g, err)
		}
		return nil
	})
}

func (s *stepRun) chooseAnchors(ctx workflow.Context) error {
	var err error
	if s.pc.Anchors && s.cfg.Anchors.Active.Enabled &&
		workflow.GetVersion(ctx, changeActiveAnchors, workflow.DefaultVersion, 1) >= 1 {
		err = s.chooseActiveAnchors(ctx)
	} else {
		err = s.chooseUniformAnchors(ctx)
	}
	if err != nil {
		return err
	}
	if s.pc.Anchors && s.pc.WorldModel && s.cfg.Anchors.Selective.Enabled &&
		workflow.GetVersion(ctx, changeSelectiveScoring, workflow.DefaultVersion, 1) >= 1 {
		return s.chooseScored(ctx)
	}
	return nil
}

// chooseUniformAnchors chooses the anchor groups by anchors.Select, a pure
// function of (seed, step).
func (s *stepRun) chooseUniformAnchors(ctx workflow.Context) error {
	if s.pc.Anchors {
		free, err := s.freeCapacity(ctx)
		if err != nil {
			return err
		}
		a, err := anchors.Select(s.cfg.Seed, s.in.Step, s.cfg.Groups, s.in.AnchorFraction, s.cfg.Anchors.Min, free)
		if err != nil {
			return invalidInput(err)
		}
		s.res.Anchors = a
	}
	s.res.Metrics.AnchorGroups = len(s.res.Anchors)
	s.res.Metrics.AnchorFraction = s.in.AnchorFraction
	return nil
}

// chooseActiveAnchors chooses the anchor groups by active selection
// (changeActiveAnchors): the groups' uncertainties come from the
// AnchorUncertainty local activity, recorded in the history, and the choice
// is anchors.SelectActive of them, a pure function of (seed, step, inputs).
// In a pipelined run (changePipelineActiveAnchors) the uncertainties read
// the steps before s−d only, which are complete when step s starts.
func (s *stepRun) chooseActiveAnchors(ctx workflow.Context) error {
	u, err := s.uncertainty(ctx)
	if err != nil {
		return err
	}
	free, err := s.freeCapacity(ctx)
	if err != nil {
		return err
	}
	sel, err := anchors.SelectActive(s.cfg.Seed, s.in.Step, u.Uncertainty, s.in.AnchorFraction, s.cfg.Anchors.Min,
		free, s.cfg.Anchors.Active.Selection())
	if err != nil {
		return invalidInput(err)
	}
	s.res.Anchors, s.res.AnchorWeights = sel.Groups, sel.Weights
	s.res.Metrics.AnchorGroups = len(s.res.Anchors)
	s.res.Metrics.AnchorFraction = s.in.AnchorFraction
	return nil
}

// uncertainty is the groups' uncertainties from the AnchorUncertainty
// local activity, recorded in the history; asked once a step, whoever asks
// first.
func (s *stepRun) uncertainty(ctx workflow.Context) (activities.AnchorUncertaintyResponse, error) {
	if s.unc != nil {
		return *s.unc, nil
	}
	req := activities.AnchorUncertaintyRequest{RunID: s.in.RunID, Step: s.in.Step, Groups: s.cfg.Groups,
		Seed: s.cfg.Seed, SuiteSeed: s.cfg.SuiteSeed, Debias: s.pc.Debias}
	if d := s.cfg.Pipeline.OffPolicy(); d > 0 {
		// Steps s−d..s−1 may be in flight: read the steps complete before
		// this one started. Only pipelined runs with active anchors ask
		// (selective scoring is refused with a pipeline), and none existed
		// before the change.
		if workflow.GetVersion(ctx, changePipelineActiveAnchors, workflow.DefaultVersion, 1) < 1 {
			return activities.AnchorUncertaintyResponse{}, invalidInput(fmt.Errorf("pipeline.max_off_policy %d with "+
				"anchors.active: this step predates active anchors in the asynchronous pipeline", d))
		}
		req.Lag = d
	}
	lctx := summarizedLocal(withLocalControl(ctx, s.cfg), s.ui, "step %d: %d groups", s.in.Step, s.cfg.Groups)
	u, err := activities.AnchorUncertainty.ExecuteLocal(lctx, req).Result(ctx)
	if err != nil {
		return u, fmt.Errorf("anchor uncertainty: %w", err)
	}
	if len(u.Uncertainty) != s.cfg.Groups {
		return u, invalidInput(fmt.Errorf("anchor uncertainty: %d values for %d groups", len(u.Uncertainty), s.cfg.Groups))
	}
	s.unc = &u
	return u, nil
}

// chooseScored is selective scoring's decision (changeSelectiveScoring):
// the world-model groups (the groups that are not anchors) whose
// uncertainty is above the cut, by anchors.Selective.LeftOut of the
// recorded AnchorUncertainty answer, a pure function of it.
func (s *stepRun) chooseScored(ctx workflow.Context) error {
	u, err := s.uncertainty(ctx)
	if err != nil {
		return err
	}
	rule := s.cfg.Anchors.Selective.Rule()
	out, err := rule.LeftOut(u.Uncertainty, u.Sigma0)
	if err != nil {
		return invalidInput(fmt.Errorf("selective scoring: %w", err))
	}
	sel := &fusion.Selection{LeftOut: []int{}, Cut: rule.Cut(u.Sigma0),
		MaxRatio: anchors.MaxRatio(u.Uncertainty, u.Sigma0, s.res.Anchors)}
	for _, g := range out {
		if !slices.Contains(s.res.Anchors, g) {
			sel.LeftOut = append(sel.LeftOut, g)
		}
	}
	s.selection = sel
	return nil
}

func (s *stepRun) scoreWorldModel(ctx workflow.Context) error {
	if !s.pc.WorldModel {
		return nil
	}
	wm := withWorldModel(ctx)
	return forEach(ctx, s.cfg.Groups, s.cfg.Parallelism, func(g int) activities.Future[activities.ScoreResponse] {
		return activities.ScoreWorldModel.Execute(s.scoreCtx(wm, g), s.scoreRequest(g))
	}, func(g int, f activities.Future[activities.ScoreResponse]) error {
		if err := f.Wait(ctx); err != nil {
			return fmt.Errorf("score group %d: %w", g, err)
		}
		return nil
	})
}

// executedGroups are the groups whose trajectories are really executed:
// every group in grpo, the anchor groups otherwise (ascending).
func (s *stepRun) executedGroups() []int {
	if !s.pc.ExecuteAll {
		return s.res.Anchors
	}
	groups := make([]int, s.cfg.Groups)
	for g := range groups {
		groups[g] = g
	}
	return groups
}

func (s *stepRun) executeRequest(group, sample int) activities.ExecuteRequest {
	return activities.ExecuteRequest{RunID: s.in.RunID, Step: s.in.Step, Group: group, Sample: sample,
		Seed: s.cfg.Seed, SuiteSeed: s.cfg.SuiteSeed, Limits: s.cfg.Sandbox.Limits(), Budget: s.cfg.Sandbox.Budget}
}

// executeDone classifies an execution's outcome: graded, a failed step
// (invalid input; from changeStepV2 on, no verdict within the retry budget),
// or, before changeStepV2, an ungraded trajectory.
func (s *stepRun) executeDone(group, sample int, err error) (graded bool, _ error) {
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &app) && app.Type() == activities.ErrInvalidInput:
		return false, fmt.Errorf("execute group %d sample %d: %w", group, sample, err)
	case s.version >= 1:
		return false, fmt.Errorf("execute group %d sample %d: no verdict within sandbox.retry_hours (%v): %w",
			group, sample, s.cfg.Sandbox.RetryBudget(), err)
	}
	// Before changeStepV2: the sandbox failed on every attempt and the
	// trajectory stays ungraded.
	s.logger.Warn("trajectory ungraded", "group", group, "sample", sample, "error", err)
	return false, nil
}

// countExecutions adds the executions to the step's metrics, in index order;
// with apart (changeUnexecutedTurns), a turn that executed nothing
// (ExecuteResponse.Unexecuted) counts as Unexecuted instead, without cost.
func (s *stepRun) countExecutions(execs []activities.ExecuteResponse, graded []bool, apart bool) {
	m := &s.res.Metrics
	for i, e := range execs {
		if apart && e.Unexecuted {
			m.Unexecuted++
			continue
		}
		m.Executed++
		if !graded[i] {
			m.Ungraded++
			continue
		}
		m.CPUSeconds += e.CPUSeconds
		m.WallSeconds += e.WallSeconds
	}
}

func (s *stepRun) sandboxOptions(ctx workflow.Context) workflow.Context {
	if s.version >= 1 {
		return withSandboxUntilVerdict(ctx, s.cfg)
	}
	return withSandbox(ctx, s.cfg)
}

// execute runs the real executions of the executed groups. From
// changeStepV2 on, an execution is retried until the sandbox gives a
// verdict, and one that has none within sandbox.retry_hours fails the
// step; before it, an execution that failed five times left its
// trajectory ungraded.
func (s *stepRun) execute(ctx workflow.Context) error {
	n := s.cfg.Samples
	groups := s.executedGroups()
	execs := make([]activities.ExecuteResponse, len(groups)*n)
	graded := make([]bool, len(execs))
	sb := s.sandboxOptions(ctx)
	err := forEach(ctx, len(execs), s.cfg.Parallelism, func(i int) activities.Future[activities.ExecuteResponse] {
		return activities.Execute.Execute(s.executeCtx(sb, groups[i/n], i%n), s.executeRequest(groups[i/n], i%n))
	}, func(i int, f activities.Future[activities.ExecuteResponse]) error {
		var err error
		graded[i], err = s.executeDone(groups[i/n], i%n, f.Get(ctx, &execs[i]))
		return err
	})
	if err != nil {
		return err
	}
	s.countExecutions(execs, graded, false)
	return nil
}

// rollout runs stages 1, 3 and 4 group by group (changeStepPipeline): a
// group's ScoreWorldModel (modes with a world model) and its executions
// (executed groups) start as soon as its Generate is done. At most
// parallelism activities run at once across the three kinds; after the
// first failure nothing new starts, the running ones finish, and the step
// fails with that error.
func (s *stepRun) rollout(ctx workflow.Context) error {
	G, n := s.cfg.Groups, s.cfg.Samples
	slot := make([]int, G) // position of a group among the executed ones, or -1
	for g := range slot {
		slot[g] = -1
	}
	groups := s.executedGroups()
	for k, g := range groups {
		slot[g] = k
	}
	execs := make([]activities.ExecuteResponse, len(groups)*n)
	graded := make([]bool, len(execs))
	rollout, wm, sb := withRollout(ctx), withWorldModel(ctx), s.sandboxOptions(ctx)
	st := &s.res.Metrics.Stages

	fan := &fanOut{limit: max(s.cfg.Parallelism, 1)}
	run := fan.run
	wg := workflow.NewWaitGroup(ctx)
	for g := range G {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			ok := run(ctx, func() workflow.Future {
				s.begin(ctx, &st.Generate)
				return activities.Generate.Execute(s.generateCtx(rollout, g), s.generateRequest(g))
			}, func(f workflow.Future) error {
				s.end(ctx, &st.Generate)
				if err := f.Get(ctx, s.genInto(g)); err != nil {
					return fmt.Errorf("generate group %d: %w", g, err)
				}
				return nil
			})
			if !ok {
				return
			}
			inner := workflow.NewWaitGroup(ctx)
			if s.pc.WorldModel {
				inner.Add(1)
				workflow.Go(ctx, func(ctx workflow.Context) {
					defer inner.Done()
					run(ctx, func() workflow.Future {
						s.begin(ctx, &st.Score)
						return activities.ScoreWorldModel.Execute(s.scoreCtx(wm, g), s.scoreRequest(g))
					}, func(f workflow.Future) error {
						s.end(ctx, &st.Score)
						if err := f.Get(ctx, nil); err != nil {
							return fmt.Errorf("score group %d: %w", g, err)
						}
						return nil
					})
				})
			}
			if k := slot[g]; k >= 0 {
				for i := range n {
					inner.Add(1)
					workflow.Go(ctx, func(ctx workflow.Context) {
						defer inner.Done()
						j := k*n + i
						run(ctx, func() workflow.Future {
							s.begin(ctx, &st.Execute)
							return activities.Execute.Execute(s.executeCtx(sb, g, i), s.executeRequest(g, i))
						}, func(f workflow.Future) error {
							s.end(ctx, &st.Execute)
							var err error
							graded[j], err = s.executeDone(g, i, f.Get(ctx, &execs[j]))
							return err
						})
					})
				}
			}
			inner.Wait(ctx)
		})
	}
	wg.Wait(ctx)
	if fan.first != nil {
		return fan.first
	}
	s.countExecutions(execs, graded, false)
	return nil
}

// settle records the anchor pairs, calibrates and fuses: three control
// activities before changeStepV2, one (CalibrateAndFuse) from it on.
func (s *stepRun) settle(ctx workflow.Context) error {
	st := &s.res.Metrics.Stages
	s.begin(ctx, &st.CalibrateFuse)
	defer s.end(ctx, &st.CalibrateFuse)
	ctl := withControl(ctx)
	var record *activities.RecordAnchorsRequest
	if len(s.res.Anchors) > 0 {
		record = &activities.RecordAnchorsRequest{RunID: s.in.RunID, Step: s.in.Step, Groups: s.res.Anchors,
			Weights: s.res.AnchorWeights}
	}
	var calibrate *activities.CalibrateRequest
	if s.pc.Debias {
		calibrate = &activities.CalibrateRequest{RunID: s.in.RunID, Step: s.in.Step, Debias: s.cfg.DebiasConfig()}
		if v := s.in.WorldModel; v != nil {
			// The map is fitted on the pairs the current version scored
			// (docs/design.md, "On-policy world model").
			calibrate.FromStep = v.Step + 1
		}
	}
	fuse := activities.FuseRequest{RunID: s.in.RunID, Step: s.in.Step, Mode: s.cfg.Mode, Anchors: s.res.Anchors,
		AnchorWeights: s.res.AnchorWeights, Selective: s.selection, Denoise: s.in.Denoise, DenoiseConfig: s.cfg.DenoiseConfig(),
		Advantage: s.cfg.AdvantageConfig()}
	var fused activities.FuseResponse
	if s.version >= 1 {
		req := activities.CalibrateAndFuseRequest{Record: record, Calibrate: calibrate, Fuse: fuse}
		const format = "step %d: %s, %d anchor groups"
		var f activities.Future[activities.CalibrateAndFuseResponse]
		if s.pipeline {
			lctx := summarizedLocal(withLocalControl(ctx, s.cfg), s.ui, format, s.in.Step, s.cfg.Mode, len(s.res.Anchors))
			f = activities.CalibrateAndFuse.ExecuteLocal(lctx, req)
		} else {
			f = activities.CalibrateAndFuse.Execute(summarized(ctl, s.ui, format, s.in.Step, s.cfg.Mode, len(s.res.Anchors)), req)
		}
		r, err := f.Result(ctx)
		if err != nil {
			return fmt.Errorf("calibrate and fuse: %w", err)
		}
		s.res.Calibration, fused = r.Calibration, r.Fuse
	} else {
		if record != nil {
			rctx := summarized(ctl, s.ui, "step %d: groups %v", s.in.Step, record.Groups)
			if err := activities.RecordAnchors.Execute(rctx, *record).Wait(ctx); err != nil {
				return fmt.Errorf("record anchors: %w", err)
			}
		}
		if calibrate != nil {
			cctx := summarized(ctl, s.ui, "step %d", s.in.Step)
			c, err := activities.Calibrate.Execute(cctx, *calibrate).Result(ctx)
			if err != nil {
				return fmt.Errorf("calibrate: %w", err)
			}
			s.res.Calibration = &c
		}
		fctx := summarized(ctl, s.ui, "step %d: %s, %d anchor groups", s.in.Step, s.cfg.Mode, len(s.res.Anchors))
		var err error
		if fused, err = activities.Fuse.Execute(fctx, fuse).Result(ctx); err != nil {
			return fmt.Errorf("fuse: %w", err)
		}
	}
	m := &s.res.Metrics
	if c := s.res.Calibration; c != nil {
		m.CalibrationPairs, m.BiasBefore, m.BiasAfter = c.Pairs, c.BiasBefore, c.BiasAfter
	}
	s.res.Denoise, s.res.Rho = fused.Denoise, fused.Rho
	m.Graded, m.SkippedGroups = fused.Stats.Graded, fused.Stats.SkippedGroups
	m.MeanReward, m.MeanEnv, m.MeanWM = fused.Stats.MeanReward, fused.Stats.MeanEnv, fused.Stats.MeanWM
	m.Rho, m.AnchorShare = fused.Rho, fused.Stats.AnchorShare
	if fused.Stats.Gate != nil && workflow.GetVersion(ctx, changeSignalGate, workflow.DefaultVersion, 1) >= 1 {
		m.Gate = fused.Stats.Gate
	}
	if s.selection != nil {
		m.Scoring = fused.Stats.Scoring
	}
	// Only runs with denoise.memory, which no history recorded before it
	// has, read the count: no command changes, no version (versions.go).
	// DenoiseConfig reads it as the run does (it applies to some modes).
	if s.cfg.DenoiseConfig().Memory {
		m.Remembered = fused.Stats.Remembered
	}
	if s.version >= 1 {
		// Every execution has a verdict here; a trajectory is ungraded only
		// when the grader's verdict left it without a score.
		m.Ungraded = fused.Stats.Ungraded
		if ceil := s.cfg.UngradedCeiling(); m.Executed > 0 && float64(m.Ungraded) > ceil*float64(m.Executed) {
			return invalidInput(fmt.Errorf("step %d: %d of %d executed trajectories are ungraded, more than max_ungraded %.0f%%",
				s.in.Step, m.Ungraded, m.Executed, 100*ceil))
		}
	}
	return nil
}

func (s *stepRun) update(ctx workflow.Context) error {
	req := activities.UpdateRequest{RunID: s.in.RunID, Step: s.in.Step, SuiteSeed: s.cfg.SuiteSeed, Checkpoint: s.in.Checkpoint}
	if sp := s.in.Sampler; sp != nil && sp.Version < s.in.Checkpoint.Version {
		// Rollouts of an older checkpoint: the clipped importance ratio.
		req.Sampled, req.RatioClip = sp, s.cfg.Pipeline.ClipRange()
	}
	gctx := summarized(withGPU(ctx), s.ui, "step %d -> checkpoint %d", s.in.Step, s.in.Checkpoint.Version+1)
	st := &s.res.Metrics.Stages
	s.begin(ctx, &st.Update)
	up, err := activities.Update.Execute(gctx, req).Result(ctx)
	s.end(ctx, &st.Update)
	s.end(ctx, &st.Step)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	s.res.Checkpoint = up.Checkpoint
	m := &s.res.Metrics
	m.Objective, m.KL, m.GradNorm = up.Stats.Objective, up.Stats.KL, up.Stats.GradNorm
	if up.Stats.RatioMean != 0 && workflow.GetVersion(ctx, changeImportanceRatio, workflow.DefaultVersion, 1) >= 1 {
		m.ImportanceRatioMean, m.ImportanceRatioMax = up.Stats.RatioMean, up.Stats.RatioMax
	}
	return nil
}

func (s *stepRun) finish(ctx workflow.Context) error {
	req := activities.FinishStepRequest{RunID: s.in.RunID, Step: s.in.Step, Metrics: s.res.Metrics}
	var err error
	line := ""
	if s.ui {
		line = stepLine(s.in.Step, s.res)
	}
	if s.version >= 1 {
		err = activities.FinishStep.ExecuteLocal(summarizedLocal(withLocalControl(ctx, s.cfg), s.ui, "%s", line), req).Wait(ctx)
	} else {
		err = activities.FinishStep.Execute(summarized(withControl(ctx), s.ui, "%s", line), req).Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("finish step: %w", err)
	}
	return nil
}

// fanOut bounds a step's concurrent activities and remembers the first
// failure, after which nothing new starts. It is workflow state: its
// coroutines run one at a time, so it needs no lock.
type fanOut struct {
	limit, running int
	first          error
}

// run starts one activity when a slot is free and waits for it; done
// judges its outcome. It reports whether the activity succeeded.
func (f *fanOut) run(ctx workflow.Context, start func() workflow.Future, done func(workflow.Future) error) bool {
	if err := workflow.Await(ctx, func() bool { return f.first != nil || f.running < f.limit }); err != nil {
		f.first = cmp.Or(f.first, err)
		return false
	}
	if f.first != nil {
		return false
	}
	f.running++
	fut := start()
	_ = fut.Get(ctx, nil) // wait; done reads the outcome
	f.running--
	if err := done(fut); err != nil {
		f.first = cmp.Or(f.first, err)
		return false
	}
	return true
}
