package backend

import "context"

// Split says whether a task is used for training or kept for evaluation.
type Split string

// The splits.
const (
	Train   Split = "train"
	HeldOut Split = "heldout"
)

// Task is a task as every port sees it. Suite and ID identify it; adapters
// that need more (the built-in grader's data set, a remote grader's task
// name) look it up from them.
type Task struct {
	// Suite is the suite the task comes from (the run's suite_seed).
	Suite uint64
	ID    string
	Split Split
	// Prompt is the task as text, for text policies and world models; the
	// built-in suite leaves it empty.
	Prompt string
	// Features is the task as a vector, for the built-in policy and world
	// model (the built-in suite's card vector); nil for text-only sources.
	Features []float64
}

// TaskSource lists a suite's tasks. It must be deterministic: the same suite
// gives the same tasks in the same order on every worker, since the run's
// seeded choices index into them (plan.TaskIndex).
type TaskSource interface {
	// Tasks returns the tasks of one split of a suite, in suite order.
	Tasks(ctx context.Context, suite uint64, split Split) ([]Task, error)
	// Task returns one task; an unknown id is a *PermanentError.
	Task(ctx context.Context, suite uint64, id string) (Task, error)
}
