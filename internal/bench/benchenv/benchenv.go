// Package benchenv is the setup the commands under internal/bench that run
// wmrl on a real Temporal server share: the migrated store and its
// deployment, a client in the bench's own namespace, and workers that serve
// every task queue in the bench's process.
package benchenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/namespace"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/workflows"
)

// OpenStore opens the Postgres store at databaseURL, migrates it and reads
// its deployment (for deployenv.RunsKey). The caller closes the store; on
// an error there is nothing to close.
func OpenStore(ctx context.Context, databaseURL string) (*store.Store, store.Deployment, error) {
	st, err := store.Open(ctx, databaseURL)
	if err != nil {
		return nil, store.Deployment{}, err
	}
	if _, err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, store.Deployment{}, fmt.Errorf("migrate: %w", err)
	}
	dep, err := st.Deployment(ctx)
	if err != nil {
		st.Close()
		return nil, store.Deployment{}, err
	}
	return st, dep, nil
}

// Dial connects to the Temporal frontend at address in namespace ns (tls
// nil: plain text), logging at warn level and above to stderr, and
// registers ns with wmrl's search attributes and a retention of 24 hours
// if it is missing. The caller closes the client; on an error there is
// nothing to close.
func Dial(ctx context.Context, address, ns string, tlsConfig *tls.Config) (client.Client, error) {
	c, err := client.Dial(client.Options{HostPort: address, Namespace: ns,
		Logger:            log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConfig}})
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s: %w", address, err)
	}
	if err := namespace.Ensure(ctx, c, ns, 24*time.Hour, workflows.SearchAttributes()); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// StartWorkers serves every queue of workflows.QueueNames in this process,
// as `wmrl-worker` does with its default --queues, each worker with opts
// and acts, and returns a function that stops them. When one fails to
// start, the ones started are stopped.
func StartWorkers(c client.Client, acts *activities.Activities, opts worker.Options) (func(), error) {
	var ws []worker.Worker
	stop := func() {
		for _, w := range ws {
			w.Stop()
		}
	}
	for _, name := range workflows.QueueNames() {
		q, _ := workflows.Queue(name)
		w := worker.New(c, q, opts)
		workflows.Register(w, q, acts)
		if err := w.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start worker on %s: %w", q, err)
		}
		ws = append(ws, w)
	}
	return stop, nil
}

// RunToEnd starts the TrainingRun runID with cfg on the control queue and
// waits for its end, across its continue-as-new executions. It returns the
// run ID of the first execution (the start of its chain of histories) and
// the run's result.
func RunToEnd(ctx context.Context, c client.Client, runID string, cfg runconfig.Config) (string, workflows.RunResult, error) {
	var res workflows.RunResult
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: workflows.QueueControl},
		workflows.TrainingRun, workflows.RunInput{RunID: runID, Config: cfg})
	if err != nil {
		return "", res, fmt.Errorf("start run: %w", err)
	}
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &res); err != nil {
		return we.GetRunID(), res, fmt.Errorf("run %s: %w", runID, err)
	}
	return we.GetRunID(), res, nil
}
