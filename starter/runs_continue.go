package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/workflows"
)

func newContinueCmd(cf *connFlags) *cobra.Command {
	var (
		o    runOptions
		name string
	)
	cmd := &cobra.Command{
		Use:     "continue RUN [--name NEW] [--detach] [--json]",
		Aliases: []string{"resume-from"},
		Short:   "Start a new run that continues RUN from its last completed step",
		Long: `continue starts a new run that continues RUN from its last completed step s:
for a run that ended before its last step (terminated, failed, timed out, or
stopped). It is not wmrl resume, which lets a paused run, the same run, go on.

continue checks that RUN can be continued and starts the new run NEW (default
"RUN-resume-<s+1>") with RUN's configuration; it writes nothing itself. The new
run's workflow first copies RUN's history up to step s in Postgres (steps,
trajectories, anchor pairs, calibration maps, fusion states, checkpoints,
evaluations; one transaction, recorded with resumed_from RUN and resumed_step
s), then runs from step s+1 with checkpoint s+1, the denoiser state and anchor
tracker of step s, and the anchor fraction RUN's step s used (the last
set-anchor-fraction's, else the configuration's); a pipelined run
(pipeline.max_off_policy d) also resumes its next d+1 steps' sampling
checkpoints, anchor fractions and world models. A run of policy.backend
tinker trains a model of its own, loaded with the training weights and
optimiser state RUN saved with checkpoint s+1 (Tinker save_weights and
load_weights); a Tinker run recorded before wmrl saved them is refused. If
the start fails, nothing is left behind. A run that is still running is refused: stop it
or end it with wmrl terminate first.

Then continue follows the new run as wmrl run does (Ctrl-C detaches;
--detach returns at once); --json prints the same object as wmrl run --json.

resume-from is its former name, deprecated: it still works as an alias.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return continueRun(cmd, cf, &o, args[0], name, cmd.Flags().Changed("name"))
		},
	}
	uses(cmd, groupTemporal, groupPostgres)
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&name, "name", "", "name of the new run (default RUN-resume-<next step>)")
	cmd.Flags().BoolVar(&o.detach, "detach", false, "start the new run and return without following it")
	cmd.Flags().DurationVar(&o.poll, "poll", time.Second, "how often to ask the run for its status")
	return cmd
}

// resumePlan is what continue starts: the new run's configuration,
// from the old run's last completed step. The state the new run starts
// from is rebuilt by its workflow (the ResumeRun activity), not here.
type resumePlan struct {
	old  store.Run
	last int // last completed step of old
	cfg  runconfig.Config
}

func continueRun(cmd *cobra.Command, cf *connFlags, o *runOptions, oldID, name string, nameSet bool) error {
	ctx := cmd.Context()
	cs, err := cf.connect(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer cs.Close()
	tc, st := cs.tc, cs.st
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
		fmt.Fprintf(out, "ui: %s\n", cf.runURL(p.cfg.Name))
	}
	// Until the run answers; its first activity rebuilds the state.
	initial := initialStatus(p.cfg, p.last+1, p.cfg.Anchors.Fraction)
	return follow(cmd, cf, o.asJSON, tc, st, we.GetRunID(), initial, o.detach, o.poll)
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
		return p, fmt.Errorf("run %s is still running: stop it (wmrl stop %s) or end it (wmrl terminate %s --reason ...) before continuing it",
			oldID, oldID, oldID)
	}
	last, ok, err := st.LastCompletedStep(ctx, oldID)
	if err != nil {
		return p, err
	}
	if !ok {
		return p, fmt.Errorf("run %s has no completed step to continue from: start it again with wmrl run", oldID)
	}
	if last+1 >= old.Steps {
		return p, fmt.Errorf("run %s completed all its %d steps: nothing to continue", oldID, old.Steps)
	}
	from, err := st.Checkpoint(ctx, oldID, last+1)
	if err != nil {
		return p, fmt.Errorf("run %s cannot be continued after step %d: %w", oldID, last, err)
	}
	p.last = last
	if p.cfg, err = runConfig(old); err != nil {
		return p, err
	}
	if err := activities.CanContinue(p.cfg, from); err != nil {
		return p, fmt.Errorf("run %s: %w", oldID, err)
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
