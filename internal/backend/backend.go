package backend

import (
	"context"
	"errors"
	"fmt"
)

// Backend names, as a run config's policy.backend, world_model.backend and
// sandbox.kind give them ("" means Builtin). A worker has the built-in
// adapters always and a remote one when it is configured with its endpoint.
const (
	// Builtin is the built-in backend (package builtin): the CPU policy,
	// the frozen world model, the worker's own sandbox.
	Builtin = "builtin"
	// Tinker is a policy trained through the Tinker training API.
	Tinker = "tinker"
	// OpenAI is a world model served over OpenAI-compatible chat
	// completions (vLLM, SGLang, a provider).
	OpenAI = "openai"
	// GradeHTTP is a grader (sandbox.kind) or a world model served over
	// the /health + /grade contract.
	GradeHTTP = "grade-http"
	// Simulated is a world model of controlled quality, for studying the
	// method: the real score degraded by a chosen noise and bias.
	Simulated = "simulated"
	// Python is the sandbox.kind of Python solutions of real tasks, run
	// in the locked-down Python sandbox (internal/pysandbox).
	Python = "python"
	// TaskStore is the task source (a run config's tasks) of the real
	// tasks imported into the data directory's task store
	// (internal/backend/realtasks); Builtin is the built-in suite of the
	// run's suite_seed.
	TaskStore = "store"
)

// Checker is an adapter that can tell whether its service answers (a
// remote one's health endpoint); the preflight of a run calls it. A
// *PermanentError means it answered and refused (a bad key, an unknown
// model).
type Checker interface {
	Check(ctx context.Context) error
}

// PermanentError is an error retrying cannot repair: the activity that gets
// it fails for good (a non-retryable application error) with its message.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is, or wraps, a *PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// SampleKey is the idempotency key of one trajectory (run, step, group,
// sample), as store.Key prints it, or of a whole group with sample -1.
func SampleKey(run string, step, group, sample int) string {
	if sample < 0 {
		return fmt.Sprintf("%s/step-%d/group-%d", run, step, group)
	}
	return fmt.Sprintf("%s/step-%d/group-%d/sample-%d", run, step, group, sample)
}

// StepKey is the idempotency key of a step's update (run, step).
func StepKey(run string, step int) string { return fmt.Sprintf("%s/step-%d", run, step) }

// EvalKey is the idempotency key of one held-out sample (run, checkpoint
// version, task, sample), or of a task's samples with sample -1.
func EvalKey(run string, version int, task string, sample int) string {
	if sample < 0 {
		return fmt.Sprintf("%s/eval-%d/%s", run, version, task)
	}
	return fmt.Sprintf("%s/eval-%d/%s/sample-%d", run, version, task, sample)
}
