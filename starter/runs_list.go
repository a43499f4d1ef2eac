package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/store"
)

// listedRun is one run of wmrl list.
type listedRun struct {
	Run  string    `json:"run"`
	Name string    `json:"name"`
	Mode mode.Mode `json:"mode"`
	// State is recorded in Postgres; Workflow is Temporal's state of the
	// run's workflow ("" when unknown or Temporal does not answer).
	State    string `json:"state"`
	Workflow string `json:"workflow"`
	// Step is the number of completed steps, Steps the planned number.
	Step        int       `json:"step"`
	Steps       int       `json:"steps"`
	ResumedFrom string    `json:"resumed_from,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// Termination is why and when wmrl terminate ended the run.
	Termination *store.Termination `json:"termination,omitempty"`
}

// listReport is wmrl list --json.
type listReport struct {
	Runs []listedRun `json:"runs"`
	Note string      `json:"note,omitempty"`
}

func newListCmd(cf *connFlags) *cobra.Command {
	var (
		asJSON bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "list [--limit N] [--json]",
		Short: "List training runs, newest first",
		Long: `list shows the runs recorded in Postgres, newest first: name, mode, state,
completed steps of planned steps, and the state of the run's workflow in
Temporal (running, completed, failed, terminated, ...; "-" when Temporal does
not know it). When Temporal does not answer, the runs are listed without it.

A run ended by wmrl terminate shows when and why.

--json prints one object: runs [{run, name, mode, state, workflow, step, steps,
resumed_from, created_at, termination {reason, at}}].`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := intIn("limit", limit, 0, maxRows); err != nil {
				return err
			}
			rep, err := listRuns(cmd.Context(), cf, limit, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return printList(cmd.OutOrStdout(), rep)
		},
	}
	uses(cmd, groupTemporal, groupPostgres)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs (0: all)")
	return cmd
}

func listRuns(ctx context.Context, c *connFlags, limit int, stderr io.Writer) (listReport, error) {
	cs, err := c.connectStore(ctx, stderr)
	if err != nil {
		return listReport{}, err
	}
	defer cs.Close()
	st, tc := cs.st, cs.tc
	runs, err := st.Runs(ctx, limit)
	if err != nil {
		return listReport{}, err
	}
	rep := listReport{Runs: []listedRun{}}
	if cs.noTemporal != nil {
		rep.Note = cs.noTemporal.Error()
	}
	for _, r := range runs {
		lr := listedRun{Run: r.ID, Name: r.Name, Mode: r.Mode, State: string(r.State), Steps: r.Steps,
			ResumedFrom: r.ResumedFrom, CreatedAt: r.CreatedAt, Termination: r.Termination}
		if last, ok, err := st.LastCompletedStep(ctx, r.ID); err != nil {
			return rep, err
		} else if ok {
			lr.Step = last + 1
		}
		if tc != nil {
			wf, err := temporalState(ctx, tc, r.ID)
			if err != nil {
				return rep, err
			}
			lr.Workflow = wf
		}
		rep.Runs = append(rep.Runs, lr)
	}
	return rep, nil
}

func printList(w io.Writer, rep listReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tMODE\tSTATE\tWORKFLOW\tSTEP\tCREATED\tRESUMED FROM\tTERMINATED")
	for _, r := range rep.Runs {
		wf, from, term := r.Workflow, r.ResumedFrom, "-"
		if wf == "" {
			wf = "-"
		}
		if from == "" {
			from = "-"
		}
		if t := r.Termination; t != nil {
			term = t.At.UTC().Format("2006-01-02 15:04:05") + ": " + t.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Run, r.Mode, r.State, wf, r.Step, r.Steps,
			r.CreatedAt.UTC().Format("2006-01-02 15:04:05"), from, term)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Note != "" {
		_, err := fmt.Fprintf(w, "note: %s\n", rep.Note)
		return err
	}
	return nil
}
