package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
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
// run starts, and a rollout, a gpu and (when the mode scores with the world
// model) a worldmodel worker whether it has the backends the run names
// (PreflightBackends): `wmrl run` refuses a run the workers cannot serve,
// with the field named, instead of a run that "completes" with no
// execution or fails at its first step.
func Preflight(ctx workflow.Context, cfg runconfig.Config) (activities.PreflightResponse, error) {
	if err := cfg.Validate(); err != nil {
		return activities.PreflightResponse{}, invalidInput(err)
	}
	ask := func(queue string) workflow.Context {
		return options(ctx, activityOptions{queue: queue, startToClose: time.Minute, retryFor: PreflightTimeout})
	}
	ui := uiSummaries(ctx)
	var backends []activities.Future[activities.PreflightBackendsResponse]
	var queues []string
	if workflow.GetVersion(ctx, changePreflightBackends, workflow.DefaultVersion, 1) >= 1 {
		queues = []string{QueueRollout, QueueGPU}
		if cfg.Mode.Pieces().WorldModel {
			queues = append(queues, QueueWorldModel)
		}
		for _, q := range queues {
			req := activities.PreflightBackendsRequest{Policy: cfg.Policy.Backend, WorldModel: cfg.WorldModel.Backend,
				Queue: strings.TrimPrefix(q, "wmrl-")}
			qctx := summarized(ask(q), ui, "%s worker: policy %s, world model %s", req.Queue,
				cmp.Or(req.Policy, "builtin"), cmp.Or(req.WorldModel, "builtin"))
			backends = append(backends, activities.PreflightBackends.Execute(qctx, req))
		}
	}
	req := activities.PreflightRequest{Kind: cfg.Sandbox.Kind, Limits: cfg.Sandbox.Limits()}
	sctx := summarized(ask(QueueSandbox), ui, "sandbox %s: %d MB, %g CPUs, deadline %gs", cmp.Or(req.Kind, "auto"),
		cfg.Sandbox.MemoryMB, cfg.Sandbox.CPUs, cfg.Sandbox.DeadlineSeconds)
	res, err := activities.Preflight.Execute(sctx, req).Result(ctx)
	if err != nil {
		return res, noWorker(err, "sandbox")
	}
	for i, f := range backends {
		if err := f.Wait(ctx); err != nil {
			return res, noWorker(err, strings.TrimPrefix(queues[i], "wmrl-"))
		}
	}
	return res, nil
}

// noWorker says which worker to start when a preflight activity timed out.
func noWorker(err error, queue string) error {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return fmt.Errorf("no %s worker answered within %v (start one: wmrl-worker --queues %s): %w",
			queue, PreflightTimeout, queue, err)
	}
	return err
}
