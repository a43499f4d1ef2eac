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
// Infrastructure errors (database, file system, sandbox engine, network)
// are retried with backoff; invalid input never is.

// ExecuteAttempts is how often a real execution was tried before its
// trajectory counted as ungraded, in steps and evaluations recorded before
// changeStepV2 and changeEvalV2. From them on an execution is retried until
// it has a verdict (withSandboxUntilVerdict).
const ExecuteAttempts = 5

// activityOptions describes how one kind of activity runs: the one builder
// of every activity's options (options).
type activityOptions struct {
	queue        string
	startToClose time.Duration
	heartbeat    time.Duration // 0: none
	// retryFor bounds the retries (schedule-to-close); 0: for ever.
	retryFor time.Duration
	// attempts bounds the attempts; 0: no bound.
	attempts int32
}

// options returns ctx with o's activity options: backoff from 1 s doubling
// to 1 min, invalid input never retried.
func options(ctx workflow.Context, o activityOptions) workflow.Context {
	rp := retryForever()
	rp.MaximumAttempts = o.attempts
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              o.queue,
		ScheduleToCloseTimeout: o.retryFor,
		StartToCloseTimeout:    o.startToClose,
		HeartbeatTimeout:       o.heartbeat,
		RetryPolicy:            rp,
	})
}

func retryForever() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: []string{activities.ErrInvalidInput},
	}
}

// withLocalControl runs short control work (StartStep, FinishStep,
// AnchorUncertainty and, from changeStepPipeline on, CalibrateAndFuse) as a
// local activity in the workflow's worker: no task queue round trip. An
// outage of the database or of the data directory is retried for
// sandbox.retry_hours, as an execution's is. The schedule-to-close is a
// local activity's whole retry budget (the SDK takes the start-to-close
// when it is not given: 2 minutes of retries in all); the SDK retries a
// failure whose backoff is longer than the workflow task timeout after a
// timer in the history, so retries may last hours. Options of local
// activities are not in the history: changing them alters no command.
func withLocalControl(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: cfg.Sandbox.RetryBudget(),
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy:            retryForever(),
	})
}

// shortHeartbeat is the heartbeat timeout of the control, rollout and
// world-model activities from changeShortHeartbeats on (their workers
// heartbeat every few seconds while they run, activities.Register), so a
// worker killed while it holds one costs its step this long, not the
// 2-minute start-to-close; 0 (none) in histories recorded before it.
func shortHeartbeat(ctx workflow.Context) time.Duration {
	if workflow.GetVersion(ctx, changeShortHeartbeats, workflow.DefaultVersion, 1) >= 1 {
		return 30 * time.Second
	}
	return 0
}

func withControl(ctx workflow.Context) workflow.Context {
	return options(ctx, activityOptions{queue: QueueControl, startToClose: 2 * time.Minute, heartbeat: shortHeartbeat(ctx)})
}

func withRollout(ctx workflow.Context) workflow.Context {
	return options(ctx, activityOptions{queue: QueueRollout, startToClose: 2 * time.Minute, heartbeat: shortHeartbeat(ctx)})
}

func withWorldModel(ctx workflow.Context) workflow.Context {
	return options(ctx, activityOptions{queue: QueueWorldModel, startToClose: 2 * time.Minute, heartbeat: shortHeartbeat(ctx)})
}

// withRefresh runs RefreshWorldModel on the worldmodel queue: a worker's
// first refresh regenerates the frozen model's training data (minutes of
// executions), so it heartbeats and may take up to an hour.
func withRefresh(ctx workflow.Context) workflow.Context {
	return options(ctx, activityOptions{queue: QueueWorldModel, startToClose: time.Hour, heartbeat: time.Minute})
}

// deadline is the sandbox deadline of one execution.
func deadline(cfg runconfig.Config) time.Duration {
	return time.Duration(cfg.Sandbox.DeadlineSeconds * float64(time.Second))
}

// withSandbox is an execution's options before changeStepV2: five attempts.
func withSandbox(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	return options(ctx, activityOptions{queue: QueueSandbox, startToClose: deadline(cfg) + 2*time.Minute,
		heartbeat: 30 * time.Second, attempts: ExecuteAttempts})
}

// withSandboxUntilVerdict retries an execution whose infrastructure fails
// (database, engine, network, refused limits) with backoff for up to
// sandbox.retry_hours: only the sandbox's verdict ends it, so an outage
// delays the step instead of changing its result.
func withSandboxUntilVerdict(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	return options(ctx, activityOptions{queue: QueueSandbox, startToClose: deadline(cfg) + 2*time.Minute,
		heartbeat: 30 * time.Second, retryFor: cfg.Sandbox.RetryBudget()})
}

// evaluateTimeout bounds one attempt at a held-out task's samples.
func evaluateTimeout(cfg runconfig.Config) time.Duration {
	return time.Duration(cfg.Eval.Samples)*(deadline(cfg)+30*time.Second) + time.Minute
}

// withEvaluate is a held-out task's options before changeEvalV2: five
// attempts.
func withEvaluate(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	return options(ctx, activityOptions{queue: QueueSandbox, startToClose: evaluateTimeout(cfg),
		heartbeat: time.Minute, attempts: ExecuteAttempts})
}

// withEvaluateUntilVerdict is withSandboxUntilVerdict for a held-out task's
// evaluation.
func withEvaluateUntilVerdict(ctx workflow.Context, cfg runconfig.Config) workflow.Context {
	return options(ctx, activityOptions{queue: QueueSandbox, startToClose: evaluateTimeout(cfg),
		heartbeat: time.Minute, retryFor: cfg.Sandbox.RetryBudget()})
}

// withEvaluateAttempts is withEvaluateUntilVerdict for a held-out task
// whose samples each run attempts executions (changeEvalAttempts).
func withEvaluateAttempts(ctx workflow.Context, cfg runconfig.Config, attempts int) workflow.Context {
	return options(ctx, activityOptions{queue: QueueSandbox,
		startToClose: time.Duration(attempts*cfg.Eval.Samples)*(deadline(cfg)+30*time.Second) + time.Minute,
		heartbeat:    time.Minute, retryFor: cfg.Sandbox.RetryBudget()})
}

func withGPU(ctx workflow.Context) workflow.Context {
	return options(ctx, activityOptions{queue: QueueGPU, startToClose: 30 * time.Minute, heartbeat: 30 * time.Second})
}
