package executor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tabular"
)

// ExitRejected is the executor binary's exit code when it refuses its job or
// flags (the sandbox's or the caller's fault, not the solution's); a sandbox
// reports it as an error, never as a score.
const ExitRejected = 3

// Run evaluates one job: parse, fit on the train split, predict the test
// split, score with the task's metric and place the score on the
// leaderboard. Every failure of the solution is a Result:
//
//	the program does not parse or validate       invalid_program
//	it fails while running (wrong model for the
//	task, size or numerical limits, a panic)      runtime_error
//	ctx expires during the fit                    timeout
//	wrong number of predictions, NaN or ±Inf      invalid_output
//
// The error is for failures that are not the solution's: a malformed job or
// a metric that cannot be computed on the task's own labels. Run measures
// no time; callers add timings.
func Run(ctx context.Context, job *Job) (res Result, err error) {
	if err := job.Check(); err != nil {
		return Result{}, err
	}
	p, err := program.Parse(job.Program)
	if err != nil {
		return Failed(StatusInvalidProgram, "parse: "+err.Error()), nil
	}
	defer func() {
		// The engine panics only on programmer errors; for the solution
		// being scored it is still a crash of its run, not of the caller.
		if v := recover(); v != nil {
			res = Failed(StatusRuntimeError, fmt.Sprintf("panic: %v\n%s", v, debug.Stack()))
			err = nil
		}
	}()
	pred, err := tabular.FitPredict(ctx, p, job.Data, job.Seed)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return Failed(StatusTimeout, err.Error()), nil
	case errors.Is(err, tabular.ErrInvalidProgram):
		return Failed(StatusInvalidProgram, err.Error()), nil
	case tabular.IsSolutionError(err):
		return Failed(StatusRuntimeError, err.Error()), nil
	default:
		return Result{}, fmt.Errorf("run %s: %w", job.TaskID, err)
	}
	if want := len(job.Data.YTest); len(pred) != want {
		return Failed(StatusInvalidOutput, fmt.Sprintf("%d predictions for %d test rows", len(pred), want)), nil
	}
	metric, err := tabular.Metric(job.Data.Kind, job.Data.YTest, pred)
	switch {
	case errors.Is(err, tabular.ErrNonFinite):
		return Failed(StatusInvalidOutput, err.Error()), nil
	case err != nil:
		return Result{}, fmt.Errorf("score %s: %w", job.TaskID, err)
	case math.IsNaN(metric) || math.IsInf(metric, 0):
		return Failed(StatusInvalidOutput, fmt.Sprintf("metric %v", metric)), nil
	}
	return NewResult(StatusOK, metric, suite.PositionIn(job.Leaderboard, metric), ""), nil
}
