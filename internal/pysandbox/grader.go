package pysandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/realtasks"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/tasks"
)

// TaskGetter finds an imported task by id (tasks.Store does).
type TaskGetter interface {
	Get(id string) (*tasks.Task, error)
}

var _ TaskGetter = tasks.Store{}

// Grader is the backend.Grader of Python tasks: GradeItem.Task.ID names a
// task of Tasks, GradeItem.Solution is the Python source. Items run one
// after the other. GradeRequest.Budget is ignored: a Python solution's cost
// cannot be estimated before it runs.
type Grader struct {
	Sandbox *Sandbox
	Tasks   TaskGetter
}

var _ backend.Grader = (*Grader)(nil)

// Grade runs and grades each item. An item whose Action is
// backend.ActionRequestInfo runs nothing: it is answered from the task's
// public files (InfoGrade). An unknown task or action is a
// *backend.PermanentError; a sandbox failure a plain error.
func (g *Grader) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	out := make([]backend.Grade, len(req.Items))
	for i, it := range req.Items {
		t, err := g.Tasks.Get(it.Task.ID)
		if err != nil {
			if errors.Is(err, tasks.ErrNotFound) {
				return nil, backend.Permanent(fmt.Errorf("python grader: %w", err))
			}
			return nil, fmt.Errorf("python grader: %w", err)
		}
		switch it.Action {
		case "", backend.ActionExecuteCode:
		case backend.ActionRequestInfo:
			out[i] = InfoGrade(t)
			continue
		default:
			return nil, backend.Permanent(fmt.Errorf("python grader: task %s: action %q: want %q or %q",
				t.Spec.ID, it.Action, backend.ActionExecuteCode, backend.ActionRequestInfo))
		}
		r, err := g.Sandbox.Grade(ctx, t, it.Solution, req.Limits, it.Seed)
		if err != nil {
			return nil, fmt.Errorf("python grader: task %s: %w", t.Spec.ID, err)
		}
		out[i] = r.Grade()
	}
	return out, nil
}

// Preflight asks the sandbox whether it can run under l.
func (g *Grader) Preflight(ctx context.Context, l backend.Limits) error {
	return g.Sandbox.Preflight(ctx, l)
}

// Grade is r as the grader port's verdict. Its Status is the executor
// status of the same rung, the statuses the store keeps (malformed and
// syntax_err: invalid_program; runtime_err: runtime_error, timeout or
// memory by Failure; ran_no_sub: invalid_output; valid: ok), with the
// same rewards; Detail begins with the paper's status; Feedback is the
// agent's observation (FeedbackOf).
func (r Result) Grade() backend.Grade {
	return backend.Grade{
		Graded:      true,
		Status:      r.ExecutorStatus(),
		Score:       r.Score,
		Metric:      r.Metric,
		Position:    r.Position,
		Detail:      string(r.Status) + ": " + r.Detail,
		Feedback:    r.Feedback,
		CPUSeconds:  r.Run.CPUSeconds,
		WallSeconds: r.Run.WallSeconds,
	}
}

// ExecutorStatus is the executor.Status string of r's rung (see Grade).
func (r Result) ExecutorStatus() string {
	switch r.Status {
	case StatusValid:
		return string(executor.StatusOK)
	case StatusRanNoSub:
		return string(executor.StatusInvalidOutput)
	case StatusRuntimeErr:
		switch r.Failure {
		case FailureTimeout:
			return string(executor.StatusTimeout)
		case FailureMemory:
			return string(executor.StatusMemory)
		}
		return string(executor.StatusRuntimeError)
	}
	return string(executor.StatusInvalidProgram)
}

// InfoGrade is the answer to a request_info action on t, as the
// reference's sandbox gives it: status backend.StatusInfo, no reward
// (Score 0; it is no execute turn), and as feedback the structure of the
// task's data, read from its public files (realtasks.Describe: each
// file's size, each CSV's columns and row count; private/ never). Nothing
// is executed.
func InfoGrade(t *tasks.Task) backend.Grade {
	return backend.Grade{Graded: true, Status: backend.StatusInfo, Detail: "request_info: the data's structure",
		Feedback: realtasks.Describe(t)}
}
