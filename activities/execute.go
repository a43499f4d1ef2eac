package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wmrl/wmrl/internal/budget"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
)

// ExecuteRequest asks for the real execution of one trajectory.
type ExecuteRequest struct {
	RunID     string         `json:"run_id"`
	Step      int            `json:"step"`
	Group     int            `json:"group"`
	Sample    int            `json:"sample"`
	Seed      uint64         `json:"seed"`
	SuiteSeed uint64         `json:"suite_seed"`
	Limits    sandbox.Limits `json:"limits"`
	// Budget refuses programs whose estimated cost exceeds it (0: none).
	Budget float64 `json:"budget"`
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
}

func responseOf(r executor.Result, reused bool) ExecuteResponse {
	return ExecuteResponse{Status: r.Status, Score: r.Score, CPUSeconds: r.CPUSeconds, WallSeconds: r.WallSeconds, Reused: reused}
}

// heartbeatEvery is how often a running execution or update heartbeats;
// workflows set heartbeat timeouts well above it.
const heartbeatEvery = 5 * time.Second

// Execute runs the trajectory's program in the sandbox and stores r_env, the
// status and the CPU and wall seconds. A failure of the solution is a score;
// a failure of the sandbox is returned as an error for the retry policy. If
// the trajectory already has a result it is returned without running again.
func (a *Activities) Execute(ctx context.Context, req ExecuteRequest) (ExecuteResponse, error) {
	if err := req.Validate(); err != nil {
		return ExecuteResponse{}, invalid(err)
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
	s, err := a.suite(ctx, req.SuiteSeed)
	if err != nil {
		return ExecuteResponse{}, err
	}
	task, err := s.Task(t.TaskID)
	if err != nil {
		return ExecuteResponse{}, invalid(err)
	}
	res, err := a.run(ctx, task, t.Program, plan.ExecSeed(req.Seed, req.Step, req.Group, req.Sample), req.Limits, req.Budget)
	if err != nil {
		return ExecuteResponse{}, fmt.Errorf("execute %s: %w", req.key(), err)
	}
	stored, err := a.Store.RecordExecutions(ctx, []store.Execution{{Key: req.key(), Result: res}})
	if err != nil {
		return ExecuteResponse{}, err
	}
	return responseOf(stored[0].Result, false), nil
}

// run executes one program of a task in the sandbox, heartbeating while it
// runs. A program whose estimated cost exceeds budget (> 0) is scored as a
// timeout without running (budget.OverBudget), the same on every machine.
func (a *Activities) run(ctx context.Context, task *suite.Task, prog string, execSeed uint64, limits sandbox.Limits,
	maxCost float64) (executor.Result, error) {
	job := &executor.Job{TaskID: task.ID, Program: prog, Data: task.Data, Leaderboard: task.Leaderboard, Seed: execSeed}
	if est, over := budget.OverBudget(job, maxCost); over {
		return budget.Refusal(est, maxCost), nil
	}
	sreq, err := sandbox.NewRequest(job, limits)
	if err != nil {
		return executor.Result{}, err
	}
	var res executor.Result
	err = withHeartbeat(ctx, func() error {
		var err error
		res, err = a.Sandbox.Execute(ctx, sreq)
		return err
	})
	return res, err
}
