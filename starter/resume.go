package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/workflows"
)

func newResumeFromCmd() *cobra.Command {
	var (
		o    runOptions
		name string
	)
	cmd := &cobra.Command{
		Use:   "resume-from RUN [--name NEW] [--detach] [--json]",
		Short: "Start a new run from the last completed step of a terminated or failed run",
		Long: `resume-from starts a new execution of a run that ended before its last step
(terminated, failed, timed out, or stopped), from its last completed step s.
It checks that RUN can be resumed and starts the new run NEW (default
"RUN-resume-<s+1>") with RUN's configuration; it writes nothing itself. The new
run's workflow first copies RUN's history up to step s in Postgres (steps,
trajectories, anchor pairs, calibration maps, fusion states, checkpoints,
evaluations; one transaction, recorded with resumed_from RUN and resumed_step
s), then runs from step s+1 with checkpoint s+1, the denoiser state and anchor
tracker of step s, and the anchor fraction RUN's step s used (the last
set-anchor-fraction's, else the configuration's). If the start
fails, nothing is left behind. A run that is still running is refused: stop it
or end it with wmrl terminate first.

Then resume-from follows the new run as wmrl run does (Ctrl-C detaches;
--detach returns at once); --json prints the same object as wmrl run --json.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return resumeFrom(cmd, &o, args[0], name, cmd.Flags().Changed("name"))
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&name, "name", "", "name of the new run (default RUN-resume-<next step>)")
	cmd.Flags().BoolVar(&o.detach, "detach", false, "start the new run and return without following it")
	cmd.Flags().DurationVar(&o.poll, "poll", time.Second, "how often to ask the run for its status")
	return cmd
}

// resumePlan is what resume-from starts: the new run's configuration,
// from the old run's last completed step. The state the new run starts
// from is rebuilt by its workflow (the ResumeRun activity), not here.
type resumePlan struct {
	old  store.Run
	last int // last completed step of old
	cfg  runconfig.Config
}

func resumeFrom(cmd *cobra.Command, o *runOptions, oldID, name string, nameSet bool) error {
	ctx := cmd.Context()
	st, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	tc, err := o.dial(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer tc.Close()
	if !nameSet {
		name = ""
	}
	p, we, err := startResume(ctx, tc, st, oldID, name)
	if err != nil {
		return err
	}
	if !o.asJSON {
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "started run %s from run %s after step %d: steps %d..%d\n",
			p.cfg.Name, p.old.ID, p.last, p.last+1, p.cfg.Steps-1)
		fmt.Fprintf(out, "ui: %s\n", o.runURL(p.cfg.Name))
	}
	// Until the run answers; its first activity rebuilds the state.
	initial := initialStatus(p.cfg, p.last+1, p.cfg.Anchors.Fraction)
	return follow(cmd, &o.conn, tc, st, we.GetRunID(), initial, o.detach, o.poll)
}

// startResume checks that run oldID can be resumed as run name and starts
// the new run's workflow with ResumeFrom set. It writes nothing: the
// workflow's ResumeRun activity creates the new run in Postgres.
func startResume(ctx context.Context, tc client.Client, st *store.Store, oldID, name string) (resumePlan, client.WorkflowRun, error) {
	p, err := planResume(ctx, tc, st, oldID, name)
	if err != nil {
		return p, nil, err
	}
	if err := checkName(ctx, tc, st, p.cfg.Name); err != nil {
		return p, nil, err
	}
	we, err := startRun(ctx, tc, workflows.RunInput{RunID: p.cfg.Name, Config: p.cfg, ResumeFrom: p.old.ID})
	return p, we, err
}

// planResume checks, reading Postgres and Temporal only, that run oldID
// can be resumed as run name ("" for the default name).
func planResume(ctx context.Context, tc client.Client, st *store.Store, oldID, name string) (resumePlan, error) {
	var p resumePlan
	old, err := findRun(ctx, st, oldID)
	if err != nil {
		return p, err
	}
	p.old = old
	wf, err := temporalState(ctx, tc, oldID)
	if err != nil {
		return p, err
	}
	if wf == wfRunning {
		return p, fmt.Errorf("run %s is still running: stop it (wmrl stop %s) or end it (wmrl terminate %s --reason ...) before resuming it",
			oldID, oldID, oldID)
	}
	last, ok, err := st.LastCompletedStep(ctx, oldID)
	if err != nil {
		return p, err
	}
	if !ok {
		return p, fmt.Errorf("run %s has no completed step to resume from: start it again with wmrl run", oldID)
	}
	if last+1 >= old.Steps {
		return p, fmt.Errorf("run %s completed all its %d steps: nothing to resume", oldID, old.Steps)
	}
	if _, err := st.Checkpoint(ctx, oldID, last+1); err != nil {
		return p, fmt.Errorf("run %s cannot be resumed after step %d: %w", oldID, last, err)
	}
	p.last = last
	if p.cfg, err = runConfig(old); err != nil {
		return p, err
	}
	if name == "" {
		name = fmt.Sprintf("%s-resume-%d", oldID, last+1)
	}
	p.cfg.Name = name
	if ps := p.cfg.Problems(); len(ps) > 0 {
		return p, &configError{source: "run " + oldID + " as " + name, problems: ps}
	}
	return p, nil
}
