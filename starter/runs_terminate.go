package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/workflows"
)

// terminateReport is wmrl terminate --json.
type terminateReport struct {
	Run    string `json:"run"`
	Reason string `json:"reason"`
	// At is when the termination was recorded; Already is true when the
	// run was terminated before (Reason and At are then the first's).
	At      time.Time `json:"at"`
	Already bool      `json:"already"`
	// Workflow is Temporal's state of the run's workflow before the
	// command; Terminated the workflows it terminated (the run's and its
	// running step's).
	Workflow   string   `json:"workflow"`
	Terminated []string `json:"terminated"`
}

func newTerminateCmd(cf *connFlags) *cobra.Command {
	var (
		asJSON bool
		reason string
	)
	cmd := &cobra.Command{
		Use:   "terminate RUN --reason TEXT [--json]",
		Short: "End a run at once, whatever it is doing, and record why",
		Long: `terminate ends a run now: it terminates the run's workflow and its running
step's workflow in Temporal (the step's work is lost; completed steps and their
checkpoints stay), then records in Postgres that the run was terminated, with
the reason and the time; wmrl list and wmrl status show them. Use it for a run
that cannot go on and cannot be stopped (wmrl stop waits for the current step
to finish). A run whose workflow already ended without completing (failed, or
terminated by other means) while Postgres still says it runs is recorded as
terminated. A completed or failed run is refused; terminating a terminated run again
changes nothing. wmrl continue can continue a terminated run from its last
completed step.

--reason is required. --json prints one object: run, reason, at, already,
workflow (Temporal's state before) and terminated (the workflow ids
terminated).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run := args[0]
			reason = strings.TrimSpace(reason)
			if reason == "" {
				return fmt.Errorf("terminate %s: --reason is required: say why the run is ended (it is recorded with the run)", run)
			}
			ctx := cmd.Context()
			st, err := cf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := findRun(ctx, st, run); err != nil {
				return err
			}
			tc, err := cf.dial(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer tc.Close()
			rep, err := terminateRun(ctx, tc, st, run, reason)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			out := cmd.OutOrStdout()
			if rep.Already {
				_, err = fmt.Fprintf(out, "run %s was already terminated at %s: %s\n", run, rep.At.UTC().Format(time.RFC3339), rep.Reason)
				return err
			}
			what := "its workflow had already ended"
			if len(rep.Terminated) > 0 {
				what = "terminated " + strings.Join(rep.Terminated, ", ")
			}
			_, err = fmt.Fprintf(out, "run %s terminated (%s): %s\n", run, what, rep.Reason)
			return err
		},
	}
	uses(cmd, groupTemporal, groupPostgres)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&reason, "reason", "", "why the run is terminated (required; recorded with the run)")
	return cmd
}

// terminateRun terminates a recorded run's workflow and its running step,
// then records the termination. Temporal goes first: a termination is
// recorded only once the workflow is gone, and running the command again
// after a failed write records it.
func terminateRun(ctx context.Context, tc client.Client, st *store.Store, run, reason string) (terminateReport, error) {
	rep := terminateReport{Run: run, Terminated: []string{}}
	r, err := findRun(ctx, st, run)
	if err != nil {
		return rep, err
	}
	if r.Termination != nil {
		rep.Reason, rep.At, rep.Already = r.Termination.Reason, r.Termination.At, true
		rep.Workflow, err = temporalState(ctx, tc, run)
		return rep, err
	}
	d, err := tc.DescribeWorkflowExecution(ctx, run, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return rep, fmt.Errorf("describe run %s: %w", run, err)
	default:
		rep.Workflow = workflowState(d.GetWorkflowExecutionInfo().GetStatus())
	}
	if rep.Workflow == wfRunning {
		if err := terminateWorkflow(ctx, tc, run, reason); err != nil {
			return rep, err
		}
		rep.Terminated = append(rep.Terminated, run)
		// A sequential run's step child ends with its parent (parent
		// close policy terminate), a pipelined run's do not (abandon):
		// end them explicitly, so that no step outlives the run.
		for _, ch := range d.GetPendingChildren() {
			id := ch.GetWorkflowId()
			err := terminateWorkflow(ctx, tc, id, reason)
			if errors.As(err, &nf) {
				continue // already ended with its parent
			}
			if err != nil {
				return rep, fmt.Errorf("run %s terminated, but not its step: %w", run, err)
			}
			rep.Terminated = append(rep.Terminated, id)
		}
		// A pipelined run's steps carried across continue-as-new were
		// started by an earlier execution (parent close policy abandon):
		// they are not its pending children. End every step the store
		// has as running that Temporal still runs.
		steps, err := st.Steps(ctx, run)
		if err != nil {
			return rep, fmt.Errorf("run %s terminated; its steps: %w", run, err)
		}
		for _, s := range steps {
			id := workflows.StepWorkflowID(run, s.Step)
			if s.Status != store.StepRunning || slices.Contains(rep.Terminated, id) {
				continue
			}
			sd, err := tc.DescribeWorkflowExecution(ctx, id, "")
			if errors.As(err, &nf) {
				continue
			}
			if err != nil {
				return rep, fmt.Errorf("run %s terminated; describe its step %d: %w", run, s.Step, err)
			}
			if workflowState(sd.GetWorkflowExecutionInfo().GetStatus()) != wfRunning {
				continue
			}
			err = terminateWorkflow(ctx, tc, id, reason)
			if errors.As(err, &nf) {
				continue
			}
			if err != nil {
				return rep, fmt.Errorf("run %s terminated, but not its step %d: %w", run, s.Step, err)
			}
			rep.Terminated = append(rep.Terminated, id)
		}
	} else if r.State == store.RunCompleted || r.State == store.RunFailed || rep.Workflow == wfCompleted {
		return rep, fmt.Errorf("run %s already ended (state %s, workflow %s): nothing to terminate", run, r.State, orUnknown(rep.Workflow))
	}
	t, err := st.TerminateRun(ctx, run, reason)
	if err != nil {
		return rep, fmt.Errorf("record the termination (run it again to record it): %w", err)
	}
	rep.Reason, rep.At = t.Reason, t.At
	return rep, nil
}

func terminateWorkflow(ctx context.Context, tc client.Client, id, reason string) error {
	if err := tc.TerminateWorkflow(ctx, id, "", reason); err != nil {
		return fmt.Errorf("terminate workflow %s: %w", id, err)
	}
	return nil
}

func orUnknown(wf string) string {
	if wf == "" {
		return "unknown to Temporal"
	}
	return wf
}
