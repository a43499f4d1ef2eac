package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/runconfig"
)

// Timeouts bound how long the work of a killed worker waits before it is
// retried elsewhere: short start-to-close timeouts for the short
// activities, heartbeat timeouts for the long ones (Execute, Evaluate,
// Update), so a lost worker costs a step well under a few minutes.

// Retry policies. Infrastructure errors (database, file system, sandbox
// daemon) are retried with backoff; invalid input never is.
func retryForever() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: []string{activities.ErrInvalidInput},
	}
}

// ExecuteAttempts is how often a real execution was tried before its
// trajectory counted as ungraded, in steps and evaluations recorded before
// changeStepV2 and changeEvalV2. From them on an execution is retried until
// it has a verdict (withSandboxUntilVerdict).
const ExecuteAttempts = 5

// withLocalControl runs short control work (StartStep, FinishStep and,
// from changeStepPipeline on, CalibrateAndFuse)
// as a local activity in the workflow's worker: no task queue round trip.
// An outage of the database is retried for as long as it lasts.
func withLocalControl(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retryForever(),
	})
}

func withControl(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           QueueControl,
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retryForever(),
	})
}

func withRollout(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           QueueRollout,
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retryForever(),
	})
}

func withWorldModel(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           QueueWorldModel,
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retryForever(),
	})
}

// deadline is the sandbox deadline of one execution.
func deadline(cfg runconfig.Config) time.Duration {
	return time.Duration(cfg.Sandbox.DeadlineSeconds * float64(time.Second))
}

func withSandbox(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	rp := retryForever()
	rp.MaximumAttempts = ExecuteAttempts
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           QueueSandbox,
		StartToCloseTimeout: deadline(cfg) + 2*time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         rp,
	})
}

// withSandboxUntilVerdict retries an execution whose infrastructure fails
// (database, engine, network, refused limits) with backoff for up to
// sandbox.retry_hours: only the sandbox's verdict ends it, so an outage
// delays the step instead of changing its result.
func withSandboxUntilVerdict(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              QueueSandbox,
		ScheduleToCloseTimeout: cfg.Sandbox.RetryBudget(),
		StartToCloseTimeout:    deadline(cfg) + 2*time.Minute,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy:            retryForever(),
	})
}

// withEvaluateUntilVerdict is withSandboxUntilVerdict for a held-out task's
// evaluation.
func withEvaluateUntilVerdict(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              QueueSandbox,
		ScheduleToCloseTimeout: cfg.Sandbox.RetryBudget(),
		StartToCloseTimeout:    time.Duration(cfg.Eval.Samples)*(deadline(cfg)+30*time.Second) + time.Minute,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            retryForever(),
	})
}

func withEvaluate(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	rp := retryForever()
	rp.MaximumAttempts = ExecuteAttempts
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           QueueSandbox,
		StartToCloseTimeout: time.Duration(cfg.Eval.Samples)*(deadline(cfg)+30*time.Second) + time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         rp,
	})
}

func withGPU(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           QueueGPU,
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         retryForever(),
	})
}
