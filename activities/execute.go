package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/telemetry"
)

// ExecuteRequest asks for the real execution of one trajectory.
type ExecuteRequest struct {
	RunID     string         `json:"run_id"`
	Step      int            `json:"step"`
	Group     int            `json:"group"`
	Sample    int            `json:"sample"`
	Seed      uint64         `json:"seed"`
	SuiteSeed uint64         `json:"suite_seed"`
	Limits    backend.Limits `json:"limits"`
	// Budget refuses programs whose estimated cost exceeds it (0: none).
	Budget float64 `json:"budget"`
	// Turn is the turn of a multi-turn trajectory (from 1) to execute and
	// answer, its feedback capped at ObservationTokens; 0 executes the
	// trajectory, as in every request made before turns existed.
	Turn              int `json:"turn,omitempty"`
	ObservationTokens int `json:"observation_tokens,omitempty"`
}

// Validate checks the request.
func (r ExecuteRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.Group < 0 || r.Sample < 0 {
		return fmt.Errorf("group %d sample %d: want >= 0", r.Group, r.Sample)
	}
	if err := r.Limits.Check(); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	if r.Turn < 0 || (r.Turn > 0 && r.ObservationTokens < 2) {
		return fmt.Errorf("turn %d, observation_tokens %d: want turn >= 0 and, with a turn, at least 2 tokens",
			r.Turn, r.ObservationTokens)
	}
	return checkBudget(r.Budget)
}

func checkBudget(b float64) error {
	if math.IsNaN(b) || math.IsInf(b, 0) || b < 0 {
		return fmt.Errorf("budget %v: want finite and >= 0", b)
	}
	return nil
}

func (r ExecuteRequest) key() store.Key {
	return store.Key{Run: r.RunID, Step: r.Step, Group: r.Group, Sample: r.Sample}
}

// ExecuteResponse is the stored result of the execution.
type ExecuteResponse struct {
	Status      executor.Status `json:"status"`
	Score       float64         `json:"score"`
	CPUSeconds  float64         `json:"cpu_seconds"`
	WallSeconds float64         `json:"wall_seconds"`
	// Reused is true when the result was already stored (a retry).
	Reused bool `json:"reused"`
	// Unexecuted is true for a turn answered without executing anything
	// (a request_info or malformed turn: ExecuteRequest.Turn > 0 only): it
	// is no execution and costs nothing. Responses recorded before it
	// existed lack it, and every one of them was an execution or a
	// single-shot trajectory's.
	Unexecuted bool `json:"unexecuted,omitempty"`
}

func responseOf(r executor.Result, reused bool) ExecuteResponse {
	return ExecuteResponse{Status: r.Status, Score: r.Score, CPUSeconds: r.CPUSeconds, WallSeconds: r.WallSeconds, Reused: reused}
}

// heartbeatEvery is how often a running execution or update heartbeats;
// workflows set heartbeat timeouts well above it.
const heartbeatEvery = 5 * time.Second

// Execute has the grader execute the trajectory's program and stores r_env,
// the status and the CPU and wall seconds. A failure of the solution is a
// score; a failure of the grader is returned as an error for the retry
// policy. If the trajectory already has a result it is returned without
// running again. A grader that gives no verdict leaves the trajectory
// ungraded (status "ungraded", nothing stored).
func (a *Activities) Execute(ctx context.Context, req ExecuteRequest) (ExecuteResponse, error) {
	if err := req.Validate(); err != nil {
		return ExecuteResponse{}, invalid(err)
	}
	if req.Turn > 0 {
		return a.executeTurn(ctx, req)
	}
	t, err := a.Store.Trajectory(ctx, req.key())
	if errors.Is(err, store.ErrNotFound) {
		return ExecuteResponse{}, invalid(err)
	}
	if err != nil {
		return ExecuteResponse{}, err
	}
	if t.Exec != nil {
		return responseOf(*t.Exec, true), nil
	}
	task, err := a.task(ctx, req.RunID, req.SuiteSeed, t.TaskID)
	if err != nil {
		return ExecuteResponse{}, err
	}
	g, err := a.grade(ctx, req.RunID, backend.GradeItem{Task: task, Solution: t.Program, Key: req.key().String(),
		Seed: plan.ExecSeed(req.Seed, req.Step, req.Group, req.Sample)}, req.Limits, req.Budget, "execute "+req.key().String(),
		telemetry.PhaseTrain)
	if err != nil {
		return ExecuteResponse{}, err
	}
	if !g.Graded {
		// No verdict: nothing is stored, so the trajectory stays ungraded
		// (Fuse leaves it out); a retry asks the grader again.
		return ExecuteResponse{Status: backend.StatusUngraded, CPUSeconds: g.CPUSeconds, WallSeconds: g.WallSeconds}, nil
	}
	res := resultOf(g)
	stored, err := a.Store.RecordExecutions(ctx, []store.Execution{{Key: req.key(), Result: res}})
	if err != nil {
		return ExecuteResponse{}, err
	}
	return responseOf(stored[0].Result, false), nil
}

// grade executes and grades one solution, heartbeating while it runs;
// errors say what was graded. It records the execution (or the grader's
// failure) in the worker's metrics, under phase.
func (a *Activities) grade(ctx context.Context, run string, item backend.GradeItem, limits backend.Limits, maxCost float64,
	what string, phase telemetry.Phase) (backend.Grade, error) {
	grader, err := a.graderOf(ctx, run)
	if err != nil {
		return backend.Grade{}, fmt.Errorf("%s: %w", what, err)
	}
	var gs []backend.Grade
	err = withHeartbeat(ctx, func() error {
		var err error
		gs, err = grader.Grade(ctx, backend.GradeRequest{Items: []backend.GradeItem{item}, Limits: limits, Budget: maxCost})
		return err
	})
	if err == nil && len(gs) != 1 {
		err = fmt.Errorf("grader returned %d grades for 1 item", len(gs))
	}
	if err != nil {
		a.Metrics.SandboxFailure(a.metricsRun(ctx, run), phase)
		return backend.Grade{}, fromPort(fmt.Errorf("%s: %w", what, err))
	}
	status := gs[0].Status
	if !gs[0].Graded {
		status = backend.StatusUngraded
	}
	a.Metrics.Execution(a.metricsRun(ctx, run), phase, status, gs[0].CPUSeconds)
	return gs[0], nil
}

// resultOf is a graded verdict as the execution result the store keeps.
func resultOf(g backend.Grade) executor.Result {
	return executor.Result{Status: executor.Status(g.Status), Score: g.Score, Metric: g.Metric, Position: g.Position,
		Detail: g.Detail, CPUSeconds: g.CPUSeconds, WallSeconds: g.WallSeconds}
}
