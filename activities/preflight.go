package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
)

// PreflightRequest asks a sandbox worker whether it can execute a run's
// programs: its sandbox kind and limits, as the run config gives them.
type PreflightRequest struct {
	// Kind is the config's sandbox.kind: "auto" accepts either sandbox.
	Kind   string         `json:"kind"`
	Limits backend.Limits `json:"limits"`
}

// PreflightResponse tells which sandbox answered.
type PreflightResponse struct {
	Kind string `json:"kind"`
}

// Preflight checks the run's sandbox settings against the worker's own
// sandbox before a run starts: the kind the config asks for, and limits the
// engine or machine can meet (backend.Grader.Preflight). A setting that
// cannot be met is a non-retryable error naming its run-config field, so
// `wmrl run` refuses the run; a sandbox that does not answer is a plain
// error, retried.
func (a *Activities) Preflight(ctx context.Context, req PreflightRequest) (PreflightResponse, error) {
	grader, builtin, err := a.graderNamed(req.Kind)
	if err != nil {
		return PreflightResponse{}, err
	}
	if builtin && req.Kind != "" && req.Kind != "auto" && a.SandboxKind != "" && req.Kind != a.SandboxKind {
		return PreflightResponse{}, invalid(fmt.Errorf("sandbox.kind: %q, but the sandbox worker runs the %s sandbox "+
			"(wmrl-worker --sandbox %s, or sandbox.kind: auto)", req.Kind, a.SandboxKind, req.Kind))
	}
	err = grader.Preflight(ctx, req.Limits)
	var limit *backend.LimitError
	if errors.As(err, &limit) {
		return PreflightResponse{}, invalid(err)
	}
	if err != nil {
		return PreflightResponse{}, fmt.Errorf("sandbox preflight: %w", err)
	}
	if !builtin {
		return PreflightResponse{Kind: req.Kind}, nil
	}
	return PreflightResponse{Kind: a.SandboxKind}, nil
}

// PreflightBackendsRequest names a run's policy and world-model backends
// (the run config's policy.backend and world_model.backend).
type PreflightBackendsRequest struct {
	Policy     string `json:"policy,omitempty"`
	WorldModel string `json:"world_model,omitempty"`
	// Queue is the queue asked, for messages: the rollout and gpu queues
	// need the policy, the worldmodel queue the world model.
	Queue string `json:"queue"`
}

// PreflightBackendsResponse says what answered.
type PreflightBackendsResponse struct {
	Backend string `json:"backend"`
}

// PreflightBackends checks, on a rollout, gpu or worldmodel worker, that
// the worker has the backend the run names for that queue and that the
// backend answers (backend.Checker): a run naming a backend no worker has
// is refused before it starts, with the field named, instead of failing
// at its first step.
func (a *Activities) PreflightBackends(ctx context.Context, req PreflightBackendsRequest) (PreflightBackendsResponse, error) {
	var (
		field, name string
		port        any
		err         error
	)
	switch req.Queue {
	case "rollout", "gpu":
		field, name = "policy.backend", req.Policy
		port, err = a.policyNamed(name)
	case "worldmodel":
		field, name = "world_model.backend", req.WorldModel
		port, err = a.worldModelNamed(name)
	default:
		return PreflightBackendsResponse{}, invalid(fmt.Errorf("queue %q: want rollout, gpu or worldmodel", req.Queue))
	}
	if err != nil {
		return PreflightBackendsResponse{}, err
	}
	if name == "" {
		name = backend.Builtin
	}
	if c, ok := port.(backend.Checker); ok {
		if err := c.Check(ctx); err != nil {
			if backend.IsPermanent(err) {
				return PreflightBackendsResponse{}, invalid(fmt.Errorf("%s: %s: %w", field, name, err))
			}
			return PreflightBackendsResponse{}, fmt.Errorf("%s: %s does not answer: %w", field, name, err)
		}
	}
	return PreflightBackendsResponse{Backend: name}, nil
}

// GraderCapacityRequest names a run.
type GraderCapacityRequest struct {
	RunID string `json:"run_id"`
}

// GraderCapacity returns how many executions the run's grader takes at
// once (backend.CapacityReporter), or -1 when it does not say.
func (a *Activities) GraderCapacity(ctx context.Context, req GraderCapacityRequest) (int, error) {
	if err := checkRun(req.RunID); err != nil {
		return 0, invalid(err)
	}
	g, err := a.graderOf(ctx, req.RunID)
	if err != nil {
		return 0, err
	}
	c, ok := g.(backend.CapacityReporter)
	if !ok {
		return -1, nil
	}
	n, err := c.Capacity(ctx)
	if err != nil {
		return 0, fromPort(fmt.Errorf("grader capacity: %w", err))
	}
	return n, nil
}
