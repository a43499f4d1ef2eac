package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/telemetry"
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
	// A run naming a policy backend this worker lacks is refused before
	// anything is recorded.
	policy, err := a.policyNamed(cfg.Policy.Backend)
	if err != nil {
		return CreateRunResponse{}, err
	}
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
	a.configCache.Store(req.RunID, cfg)
	if c, err := a.Store.Checkpoint(ctx, req.RunID, 0); err == nil {
		return CreateRunResponse{Checkpoint: CheckpointRef{Version: 0, Hash: c.Hash}}, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return CreateRunResponse{}, err
	}
	train, err := a.tasks(ctx, req.RunID, cfg.SuiteSeed, backend.Train)
	if err != nil {
		return CreateRunResponse{}, err
	}
	if len(train) == 0 {
		return CreateRunResponse{}, invalid(fmt.Errorf("suite %d has no training tasks", cfg.SuiteSeed))
	}
	ck, err := policy.Init(ctx, backend.InitRequest{Run: req.RunID, Suite: cfg.SuiteSeed, Seed: plan.InitSeed(cfg.Seed),
		Settings: policySettings(cfg), Dir: a.checkpointDir(req.RunID)})
	if err != nil {
		return CreateRunResponse{}, fromPort(err)
	}
	ref := CheckpointRef{Version: 0, Hash: ck.Hash}
	if err := a.Store.PutCheckpoint(ctx, store.Checkpoint{Run: req.RunID, Version: 0, Hash: ref.Hash, Location: ck.Location, State: ck.State}); err != nil {
		return CreateRunResponse{}, err
	}
	a.log().Info("run created", logRun(req.RunID), logStep(0))
	return CreateRunResponse{Checkpoint: ref}, nil
}

// RunState is the state of a run the run workflow records (SetRunState):
// the store's state of the same name.
type RunState string

// The states the run workflow records.
const (
	RunRunning   = RunState(store.RunRunning)
	RunPaused    = RunState(store.RunPaused)
	RunCompleted = RunState(store.RunCompleted)
	RunFailed    = RunState(store.RunFailed)
)

// SetRunStateRequest sets the run's recorded state.
type SetRunStateRequest struct {
	RunID string   `json:"run_id"`
	State RunState `json:"state"`
}

// Validate checks the request.
func (r SetRunStateRequest) Validate() error {
	if err := checkRun(r.RunID); err != nil {
		return err
	}
	if !store.RunState(r.State).Valid() {
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
	return a.Store.SetRunState(ctx, req.RunID, store.RunState(req.State))
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
	if err := a.Store.FinishStep(ctx, req.RunID, req.Step, store.StepCompleted, req.Metrics); err != nil {
		return err
	}
	run := a.metricsRun(ctx, req.RunID)
	a.Metrics.StepCompleted(run, req.Step, req.Metrics.Rho)
	if g := req.Metrics.Gate; g != nil {
		w := 0.0
		switch {
		case g.Lambda != nil:
			w = *g.Lambda
		case g.Open:
			w = 1
		}
		a.Metrics.GateDecided(run, w, g.Low)
	}
	if sc := req.Metrics.Scoring; sc != nil {
		a.Metrics.ScoringDecided(run, sc.Scored, sc.LeftOut)
	}
	if a.Metrics != nil {
		// A step that remembered nothing sets the gauge to 0 too, so a
		// run with memory is asked for its configuration (kept per run).
		cfg, err := a.runConfig(ctx, req.RunID)
		if err != nil {
			return err
		}
		if cfg.DenoiseConfig().Memory {
			a.Metrics.Remembered(run, req.Metrics.Remembered)
		}
	}
	if a.Metrics != nil && !req.Metrics.Stages.IsZero() {
		return a.recordStageTimes(ctx, run, req)
	}
	return nil
}

// recordStageTimes sets the stage gauges of a finished step: its stages'
// wall seconds and their overlap with the stages of the run's steps
// completed before it (read back from the store; a step still running has
// none yet, so the full overlap is what inspect and the report compute).
func (a *Activities) recordStageTimes(ctx context.Context, run telemetry.Run, req FinishStepRequest) error {
	rows, err := a.Store.Steps(ctx, req.RunID)
	if err != nil {
		return fmt.Errorf("stage times of step %d: %w", req.Step, err)
	}
	all := []stepsummary.Stages{req.Metrics.Stages}
	for _, r := range rows {
		if r.Step != req.Step && r.Status == store.StepCompleted {
			all = append(all, r.Metrics.Stages)
		}
	}
	var out []telemetry.StageTime
	for _, x := range stepsummary.Overlap(all, 0) {
		out = append(out, telemetry.StageTime{Stage: x.Stage, Seconds: x.Seconds, Overlapped: x.Overlapped})
	}
	a.Metrics.StageTimes(run, out)
	return nil
}

// StepMetrics summarises a completed step (stepsummary.Step, stored as its
// JSON with the step).
type StepMetrics = stepsummary.Step
