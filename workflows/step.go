package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/denoise"
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
	// Calibration is the step's map summary when the mode debiases.
	Calibration *activities.CalibrationSummary `json:"calibration,omitempty"`
	Metrics     activities.StepMetrics         `json:"metrics"`
}

// StepWorkflowID is the workflow ID of step n of a run.
func StepWorkflowID(runID string, step int) string { return fmt.Sprintf("%s/step-%d", runID, step) }

// TrainingStep runs one training step (docs/design.md, "The step workflow",
// stages 0-9).
func TrainingStep(ctx workflow.Context, in StepInput) (StepResult, error) {
	var a *activities.Activities
	cfg := in.Config
	if err := cfg.Validate(); err != nil {
		return StepResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, err)
	}
	pc := cfg.Mode.Pieces()
	G, n := cfg.Groups, cfg.Samples
	logger := workflow.GetLogger(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx, keyRunName().ValueSet(cfg.Name), keyMode().ValueSet(string(cfg.Mode)),
		keyStep().ValueSet(int64(in.Step))); err != nil {
		return StepResult{}, fmt.Errorf("upsert search attributes: %w", err)
	}
	res := StepResult{Step: in.Step, Anchors: []int{}}
	m := &res.Metrics
	m.Groups, m.Samples, m.Trajectories = G, n, G*n

	ctl := withControl(ctx)
	stepReq := activities.StepRequest{RunID: in.RunID, Step: in.Step}
	if err := workflow.ExecuteActivity(ctl, a.StartStep, stepReq).Get(ctx, nil); err != nil {
		return res, fmt.Errorf("start step: %w", err)
	}

	// 1. Generate × G.
	rollout := withRollout(ctx)
	err := forEach(ctx, G, cfg.Parallelism, func(g int) workflow.Future {
		return workflow.ExecuteActivity(rollout, a.Generate, activities.GenerateRequest{
			RunID: in.RunID, Step: in.Step, Group: g, Samples: n, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed,
			Checkpoint: in.Checkpoint,
		})
	}, func(g int, f workflow.Future) error {
		if err := f.Get(ctx, nil); err != nil {
			return fmt.Errorf("generate group %d: %w", g, err)
		}
		return nil
	})
	if err != nil {
		return res, err
	}

	// 2. Anchor groups: a pure function of (run seed, step).
	if pc.Anchors {
		res.Anchors, err = anchors.Select(cfg.Seed, in.Step, G, in.AnchorFraction, cfg.Anchors.Min, cfg.FreeCapacity())
		if err != nil {
			return res, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, err)
		}
	}
	m.AnchorGroups = len(res.Anchors)

	// 3. ScoreWorldModel × G.
	if pc.WorldModel {
		wm := withWorldModel(ctx)
		err := forEach(ctx, G, cfg.Parallelism, func(g int) workflow.Future {
			return workflow.ExecuteActivity(wm, a.ScoreWorldModel, activities.ScoreRequest{
				RunID: in.RunID, Step: in.Step, Group: g, SuiteSeed: cfg.SuiteSeed})
		}, func(g int, f workflow.Future) error {
			if err := f.Get(ctx, nil); err != nil {
				return fmt.Errorf("score group %d: %w", g, err)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}

	// 4. Execute: every trajectory in grpo, the anchor groups' otherwise.
	execGroups := res.Anchors
	if pc.ExecuteAll {
		execGroups = make([]int, G)
		for g := range execGroups {
			execGroups[g] = g
		}
	}
	execs := make([]activities.ExecuteResponse, len(execGroups)*n)
	graded := make([]bool, len(execs))
	sb := withSandbox(ctx, cfg)
	limits := cfg.Sandbox.Limits()
	err = forEach(ctx, len(execs), cfg.Parallelism, func(i int) workflow.Future {
		return workflow.ExecuteActivity(sb, a.Execute, activities.ExecuteRequest{
			RunID: in.RunID, Step: in.Step, Group: execGroups[i/n], Sample: i % n,
			Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed, Limits: limits, Budget: cfg.Sandbox.Budget})
	}, func(i int, f workflow.Future) error {
		err := f.Get(ctx, &execs[i])
		var app *temporal.ApplicationError
		switch {
		case err == nil:
			graded[i] = true
		case errors.As(err, &app) && app.Type() == activities.ErrInvalidInput:
			return fmt.Errorf("execute group %d sample %d: %w", execGroups[i/n], i%n, err)
		default:
			// The sandbox failed on every attempt: the trajectory stays
			// ungraded and is excluded from the advantages.
			logger.Warn("trajectory ungraded", "group", execGroups[i/n], "sample", i%n, "error", err)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	for i, e := range execs {
		m.Executed++
		if !graded[i] {
			m.Ungraded++
			continue
		}
		m.CPUSeconds += e.CPUSeconds
		m.WallSeconds += e.WallSeconds
	}

	// 5. RecordAnchors.
	if len(res.Anchors) > 0 {
		req := activities.RecordAnchorsRequest{RunID: in.RunID, Step: in.Step, Groups: res.Anchors}
		if err := workflow.ExecuteActivity(ctl, a.RecordAnchors, req).Get(ctx, nil); err != nil {
			return res, fmt.Errorf("record anchors: %w", err)
		}
	}

	// 6. Calibrate.
	if pc.Debias {
		var c activities.CalibrationSummary
		req := activities.CalibrateRequest{RunID: in.RunID, Step: in.Step, Debias: cfg.DebiasConfig()}
		if err := workflow.ExecuteActivity(ctl, a.Calibrate, req).Get(ctx, &c); err != nil {
			return res, fmt.Errorf("calibrate: %w", err)
		}
		res.Calibration = &c
		m.CalibrationPairs, m.BiasBefore, m.BiasAfter = c.Pairs, c.BiasBefore, c.BiasAfter
	}

	// 7. Fuse.
	var fused activities.FuseResponse
	freq := activities.FuseRequest{RunID: in.RunID, Step: in.Step, Mode: cfg.Mode, Anchors: res.Anchors,
		Denoise: in.Denoise, DenoiseConfig: cfg.DenoiseConfig(), Advantage: cfg.AdvantageConfig()}
	if err := workflow.ExecuteActivity(ctl, a.Fuse, freq).Get(ctx, &fused); err != nil {
		return res, fmt.Errorf("fuse: %w", err)
	}
	res.Denoise, res.Rho = fused.Denoise, fused.Rho
	m.Graded, m.SkippedGroups = fused.Stats.Graded, fused.Stats.SkippedGroups
	m.MeanReward, m.MeanEnv, m.MeanWM = fused.Stats.MeanReward, fused.Stats.MeanEnv, fused.Stats.MeanWM
	m.Rho, m.AnchorShare = fused.Rho, fused.Stats.AnchorShare

	// 8. Update.
	var up activities.UpdateResponse
	ureq := activities.UpdateRequest{RunID: in.RunID, Step: in.Step, SuiteSeed: cfg.SuiteSeed, Checkpoint: in.Checkpoint}
	if err := workflow.ExecuteActivity(withGPU(ctx), a.Update, ureq).Get(ctx, &up); err != nil {
		return res, fmt.Errorf("update: %w", err)
	}
	res.Checkpoint = up.Checkpoint
	m.Objective, m.KL, m.GradNorm = up.Stats.Objective, up.Stats.KL, up.Stats.GradNorm

	// 9. Step metrics.
	freqDone := activities.FinishStepRequest{RunID: in.RunID, Step: in.Step, Metrics: *m}
	if err := workflow.ExecuteActivity(ctl, a.FinishStep, freqDone).Get(ctx, nil); err != nil {
		return res, fmt.Errorf("finish step: %w", err)
	}
	return res, nil
}
