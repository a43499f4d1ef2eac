package tabular

import "errors"

// Errors that a program causes at run time. FitPredict wraps them with the
// failing step or model.
var (
	// ErrInvalidProgram: the program does not validate (see program.Validate).
	ErrInvalidProgram = errors.New("invalid program")
	// ErrWrongKind: the model does not suit the task, such as ridge on a
	// classification task or logistic on a regression task.
	ErrWrongKind = errors.New("model does not suit the task kind")
	// ErrResources: a step or model would exceed the engine's size limits.
	ErrResources = errors.New("resource limit exceeded")
	// ErrNumerical: a fit broke down numerically (a singular system,
	// non-finite intermediate features).
	ErrNumerical = errors.New("numerical failure")
)

// ErrNonFinite is returned by Metric for predictions that are NaN or ±Inf.
var ErrNonFinite = errors.New("non-finite prediction")

// IsSolutionError reports whether err is the program's own fault, as opposed
// to a bug, a bad dataset or a cancelled context.
func IsSolutionError(err error) bool {
	return errors.Is(err, ErrInvalidProgram) || errors.Is(err, ErrWrongKind) ||
		errors.Is(err, ErrResources) || errors.Is(err, ErrNumerical)
}

// Size limits of an execution.
const (
	// MaxFeatures bounds the width of any feature matrix produced by a
	// preprocessing step.
	MaxFeatures = 1024
	// MaxCells bounds rows × columns of any matrix the engine builds
	// (train and test rows counted together).
	MaxCells = 8 << 20
)
