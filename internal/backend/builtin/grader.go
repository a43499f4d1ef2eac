package builtin

import (
	"context"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/budget"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/sandbox"
)

// Grader executes programs with the executor in a sandbox. It always
// grades. Items run one after the other.
type Grader struct {
	Tasks   *Tasks
	Sandbox sandbox.Sandbox
}

var _ backend.Grader = (*Grader)(nil)

// Grade runs each item's program on its task's data. A program whose
// estimated cost exceeds req.Budget (> 0) is scored as a timeout without
// running (budget.OverBudget), the same on every machine.
func (g *Grader) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	out := make([]backend.Grade, len(req.Items))
	for i, it := range req.Items {
		task, err := g.Tasks.suiteTask(ctx, it.Task.Suite, it.Task.ID)
		if err != nil {
			return nil, err
		}
		job := &executor.Job{TaskID: task.ID, Program: it.Solution, Data: task.Data, Leaderboard: task.Leaderboard, Seed: it.Seed}
		var res executor.Result
		if est, over := budget.OverBudget(job, req.Budget); over {
			res = budget.Refusal(est, req.Budget)
		} else {
			sreq, err := sandbox.NewRequest(job, req.Limits)
			if err != nil {
				return nil, err
			}
			if res, err = g.Sandbox.Execute(ctx, sreq); err != nil {
				return nil, err
			}
		}
		out[i] = GradeOf(res)
	}
	return out, nil
}

// Preflight asks the sandbox whether it can run under l.
func (g *Grader) Preflight(ctx context.Context, l backend.Limits) error {
	return g.Sandbox.Preflight(ctx, l)
}

// GradeOf is an executor result as a graded verdict, field for field.
func GradeOf(r executor.Result) backend.Grade {
	return backend.Grade{Graded: true, Status: string(r.Status), Score: r.Score, Metric: r.Metric, Position: r.Position,
		Detail: r.Detail, CPUSeconds: r.CPUSeconds, WallSeconds: r.WallSeconds}
}
