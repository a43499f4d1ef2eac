package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

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
