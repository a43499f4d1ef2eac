package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/runconfig"
)

// PreflightTimeout bounds a preflight: a sandbox worker must answer within
// it.
const PreflightTimeout = 2 * time.Minute

// PreflightWorkflowID is the workflow ID of run's preflight.
func PreflightWorkflowID(run string) string { return run + "/preflight" }

// Preflight asks a sandbox worker whether it can execute the programs of a
// run with config cfg (activity Preflight on the sandbox queue) before the
// run starts: `wmrl run` refuses a run the sandbox cannot execute, with the
// field named, instead of a run that "completes" with no execution.
func Preflight(ctx workflow.Context, cfg runconfig.Config) (activities.PreflightResponse, error) {
	if err := cfg.Validate(); err != nil {
		return activities.PreflightResponse{}, invalidInput(err)
	}
	ctx = options(ctx, activityOptions{queue: QueueSandbox, startToClose: time.Minute, retryFor: PreflightTimeout})
	var res activities.PreflightResponse
	req := activities.PreflightRequest{Kind: cfg.Sandbox.Kind, Limits: cfg.Sandbox.Limits()}
	if err := workflow.ExecuteActivity(ctx, activities.NamePreflight, req).Get(ctx, &res); err != nil {
		var timeout *temporal.TimeoutError
		if errors.As(err, &timeout) {
			return res, fmt.Errorf("no sandbox worker answered within %v (start one: wmrl-worker --queues sandbox): %w",
				PreflightTimeout, err)
		}
		return res, err
	}
	return res, nil
}
