package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
)

// CreateRunRequest starts a run: it records the run and its initial
// checkpoint (version 0).
type CreateRunRequest struct {
	RunID  string           `json:"run_id"`
	Config runconfig.Config `json:"config"`
}

// Validate checks the request.
func (r CreateRunRequest) Validate() error {
	if err := checkRun(r.RunID); err != nil {
		return err
	}
	return r.Config.Validate()
}

// CreateRunResponse names the initial checkpoint.
type CreateRunResponse struct {
	Checkpoint CheckpointRef `json:"checkpoint"`
}

// CreateRun records the run (state running) and the initial policy,
// checkpoint 0, a deterministic function of the run seed. Calling it again
// returns the recorded checkpoint.
func (a *Activities) CreateRun(ctx context.Context, req CreateRunRequest) (CreateRunResponse, error) {
	if err := req.Validate(); err != nil {
		return CreateRunResponse{}, invalid(err)
	}
	cfg := req.Config
	raw, err := json.Marshal(cfg)
	if err != nil {
		return CreateRunResponse{}, fmt.Errorf("encode config: %w", err)
	}
	err = a.Store.UpsertRun(ctx, store.Run{ID: req.RunID, Name: cfg.Name, Mode: cfg.Mode, Config: raw,
		Seed: cfg.Seed, Steps: cfg.Steps, State: store.RunRunning})
	if errors.Is(err, store.ErrConflict) {
		return CreateRunResponse{}, invalid(err)
	}
	if err != nil {
		return CreateRunResponse{}, err
	}
	if c, err := a.Store.Checkpoint(ctx, req.RunID, 0); err == nil {
		return CreateRunResponse{Checkpoint: CheckpointRef{Version: 0, Hash: c.Hash}}, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return CreateRunResponse{}, err
	}
	s, err := a.suite(ctx, cfg.SuiteSeed)
	if err != nil {
		return CreateRunResponse{}, err
	}
	train := s.Split(suite.Train)
	if len(train) == 0 {
		return CreateRunResponse{}, invalid(fmt.Errorf("suite %d has no training tasks", cfg.SuiteSeed))
	}
	p, err := policy.Init(policyConfig(cfg, len(train[0].Card.Vector())), policy.ProgramGrammar{}, plan.InitSeed(cfg.Seed))
	if err != nil {
		return CreateRunResponse{}, invalid(err)
	}
	if err := mkdir(a.checkpointDir(req.RunID)); err != nil {
		return CreateRunResponse{}, err
	}
	path, err := p.Save(a.checkpointDir(req.RunID))
	if err != nil {
		return CreateRunResponse{}, err
	}
	ref := CheckpointRef{Version: 0, Hash: p.Hash()}
	if err := a.Store.PutCheckpoint(ctx, store.Checkpoint{Run: req.RunID, Version: 0, Hash: ref.Hash, Location: path}); err != nil {
		return CreateRunResponse{}, err
	}
	a.log().Info("run created", logRun(req.RunID), logStep(0))
	return CreateRunResponse{Checkpoint: ref}, nil
}

// SetRunStateRequest sets the run's recorded state.
type SetRunStateRequest struct {
	RunID string         `json:"run_id"`
	State store.RunState `json:"state"`
}

// Validate checks the request.
func (r SetRunStateRequest) Validate() error {
	if err := checkRun(r.RunID); err != nil {
		return err
	}
	if !r.State.Valid() {
		return fmt.Errorf("state %q: unknown", r.State)
	}
	return nil
}

// SetRunState records the run's state for `wmrl list` and `inspect`. The
// run workflow records running, paused, failed and completed (a run ended
// by a stop signal is recorded completed; stopping is never recorded).
func (a *Activities) SetRunState(ctx context.Context, req SetRunStateRequest) error {
	if err := req.Validate(); err != nil {
		return invalid(err)
	}
	return a.Store.SetRunState(ctx, req.RunID, req.State)
}

// StepRequest names a step of a run.
type StepRequest struct {
	RunID string `json:"run_id"`
	Step  int    `json:"step"`
}

// Validate checks the request.
func (r StepRequest) Validate() error {
	if err := checkRun(r.RunID); err != nil {
		return err
	}
	return checkStep(r.Step)
}

// StartStep records that a step started (a no-op when it is recorded).
func (a *Activities) StartStep(ctx context.Context, req StepRequest) error {
	if err := req.Validate(); err != nil {
		return invalid(err)
	}
	return a.Store.StartStep(ctx, req.RunID, req.Step)
}

// FinishStepRequest completes a step with its metrics.
type FinishStepRequest struct {
	RunID   string      `json:"run_id"`
	Step    int         `json:"step"`
	Metrics StepMetrics `json:"metrics"`
}

// Validate checks the request.
func (r FinishStepRequest) Validate() error {
	return StepRequest{RunID: r.RunID, Step: r.Step}.Validate()
}

// FinishStep records a completed step and its metrics; finishing it again
// with the same metrics is a no-op.
func (a *Activities) FinishStep(ctx context.Context, req FinishStepRequest) error {
	if err := req.Validate(); err != nil {
		return invalid(err)
	}
	return a.Store.FinishStep(ctx, req.RunID, req.Step, store.StepCompleted, req.Metrics.Map())
}

// StepMetrics summarises a completed step. Everything except the CPU and
// wall seconds is a deterministic function of the run seed and the
// executions' results.
type StepMetrics struct {
	Groups       int `json:"groups"`
	Samples      int `json:"samples"`
	AnchorGroups int `json:"anchor_groups"`
	// AnchorFraction is the run's anchor fraction the step used (the
	// config's, or the last set-anchor-fraction's).
	AnchorFraction float64 `json:"anchor_fraction"`
	Trajectories   int     `json:"trajectories"`
	// Executed counts the training trajectories really executed (graded or
	// not); Ungraded those whose execution failed after every retry.
	Executed int `json:"executed"`
	Ungraded int `json:"ungraded"`
	// Graded counts the trajectories with a training reward.
	Graded int `json:"graded"`
	// MeanReward is the mean training reward (r_env for executed
	// trajectories in grpo and anchor groups, r_wm, calibrated or not,
	// otherwise); MeanEnv the mean r_env of the executed trajectories;
	// MeanWM the mean raw r_wm of the scored ones.
	MeanReward float64 `json:"mean_reward"`
	MeanEnv    float64 `json:"mean_env"`
	MeanWM     float64 `json:"mean_wm"`
	// Rho is the anchor weight of the step; AnchorShare the fraction of the
	// update's weight on anchor trajectories.
	Rho         float64 `json:"rho"`
	AnchorShare float64 `json:"anchor_share"`
	// SkippedGroups had fewer than two graded trajectories.
	SkippedGroups int `json:"skipped_groups"`
	// CalibrationPairs is the size of the calibration window; BiasBefore and
	// BiasAfter its mean bias (r_wm − r_env) before and after the map.
	CalibrationPairs int     `json:"calibration_pairs"`
	BiasBefore       float64 `json:"bias_before"`
	BiasAfter        float64 `json:"bias_after"`
	// Objective, KL and GradNorm come from the policy update.
	Objective float64 `json:"objective"`
	KL        float64 `json:"kl"`
	GradNorm  float64 `json:"grad_norm"`
	// CPUSeconds and WallSeconds sum the training executions' costs.
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
}

// Map returns the metrics by name, as stored with the step.
func (m StepMetrics) Map() map[string]float64 {
	return map[string]float64{
		"groups": float64(m.Groups), "samples": float64(m.Samples), "anchor_groups": float64(m.AnchorGroups),
		"anchor_fraction": m.AnchorFraction,
		"trajectories":    float64(m.Trajectories), "executed": float64(m.Executed), "ungraded": float64(m.Ungraded),
		"graded": float64(m.Graded), "mean_reward": m.MeanReward, "mean_env": m.MeanEnv, "mean_wm": m.MeanWM,
		"rho": m.Rho, "anchor_share": m.AnchorShare, "skipped_groups": float64(m.SkippedGroups),
		"calibration_pairs": float64(m.CalibrationPairs), "bias_before": m.BiasBefore, "bias_after": m.BiasAfter,
		"objective": m.Objective, "kl": m.KL, "grad_norm": m.GradNorm,
		"cpu_seconds": m.CPUSeconds, "wall_seconds": m.WallSeconds,
	}
}
