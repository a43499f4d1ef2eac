package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wmrl/wmrl/internal/temporallog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

// Defaults of the connection flags, overridden by the environment
// (deployenv).
const (
	defaultAddress   = deployenv.DefaultAddress
	defaultNamespace = deployenv.DefaultNamespace
	defaultUIURL     = deployenv.DefaultUIURL
)

// conn holds the flags every run command shares: where Temporal, its Web UI
// and Postgres are, and whether to print JSON.
type conn struct {
	address, namespace, uiURL, databaseURL string
	asJSON                                 bool
}

// register adds the connection flags to cmd.
func (c *conn) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.address, "address", "", "Temporal frontend host:port (default $TEMPORAL_ADDRESS, else "+defaultAddress+")")
	f.StringVar(&c.namespace, "namespace", "", "Temporal namespace (default $TEMPORAL_NAMESPACE, else "+defaultNamespace+")")
	f.StringVar(&c.uiURL, "ui-url", "", "Temporal Web UI base URL (default $WMRL_UI_URL, else "+defaultUIURL+")")
	f.StringVar(&c.databaseURL, "database-url", "", "Postgres DSN (default $WMRL_DATABASE_URL, else the local stack's)")
	f.BoolVar(&c.asJSON, "json", false, "print one JSON object")
}

// resolve fills in the defaults of unset flags from the environment.
func (c *conn) resolve() {
	env := deployenv.Read()
	if c.address == "" {
		c.address = env.Address
	}
	if c.namespace == "" {
		c.namespace = env.Namespace
	}
	if c.uiURL == "" {
		c.uiURL = env.UIURL
	}
	if c.databaseURL == "" {
		c.databaseURL = env.DatabaseURL
	}
}

// dial connects to Temporal; the SDK logs only warnings, to stderr, through
// zap (the same bridge as the worker's).
func (c *conn) dial(ctx context.Context, stderr io.Writer) (client.Client, error) {
	c.resolve()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(stderr), zapcore.WarnLevel)
	logger := temporallog.New(zap.New(core))
	tc, err := client.DialContext(ctx, client.Options{HostPort: c.address, Namespace: c.namespace, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s (start one with deploy/temporal.sh start, or set --address): %w", c.address, err)
	}
	return tc, nil
}

// open connects to Postgres and checks that the schema is there.
func (c *conn) open(ctx context.Context) (*store.Store, error) {
	c.resolve()
	st, err := store.Open(ctx, c.databaseURL)
	if err != nil {
		return nil, err
	}
	if ms, err := st.Applied(ctx); err != nil || len(ms) == 0 {
		st.Close()
		return nil, fmt.Errorf("the database has no wmrl schema: run `wmrl migrate` first (%v)", err)
	}
	return st, nil
}

// runURL is the Web UI page of a run's workflow.
func (c *conn) runURL(workflowID string) string {
	c.resolve()
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(c.uiURL, "/"), c.namespace, workflowID)
}

// Workflow states of a run as Temporal reports them ("" when Temporal has
// no record of the run).
const (
	wfRunning    = "running"
	wfCompleted  = "completed"
	wfFailed     = "failed"
	wfTerminated = "terminated"
	wfCanceled   = "canceled"
	wfTimedOut   = "timed_out"
	wfContinued  = "continued_as_new"
)

func workflowState(s enums.WorkflowExecutionStatus) string {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return wfRunning
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return wfCompleted
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return wfFailed
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return wfTerminated
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return wfCanceled
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return wfTimedOut
	case enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return wfContinued
	}
	return strings.ToLower(s.String())
}

// temporalState returns the state of the latest execution of a run's
// workflow, "" when Temporal does not know it.
func temporalState(ctx context.Context, tc client.Client, run string) (string, error) {
	d, err := tc.DescribeWorkflowExecution(ctx, run, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("describe run %s: %w", run, err)
	}
	return workflowState(d.GetWorkflowExecutionInfo().GetStatus()), nil
}

// runConfig decodes the configuration stored with a run.
func runConfig(r store.Run) (runconfig.Config, error) {
	var cfg runconfig.Config
	if err := json.Unmarshal(r.Config, &cfg); err != nil {
		return cfg, fmt.Errorf("config of run %s: %w", r.ID, err)
	}
	return cfg, nil
}

// findRun returns a run from Postgres, with a helpful error when it is
// unknown.
func findRun(ctx context.Context, st *store.Store, id string) (store.Run, error) {
	r, err := st.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return r, fmt.Errorf("no run %q (wmrl list shows the runs)", id)
	}
	return r, err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
