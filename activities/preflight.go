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
