package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/anchors"
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
(terminated, failed, timed out, or stopped), from its last completed step s: the
new run NEW (default "RUN-resume-<s+1>") gets a copy of RUN's history up to step
s in Postgres (steps, trajectories, anchor pairs, calibration maps, fusion
states, checkpoints, evaluations), is recorded with resumed_from RUN and
resumed_step s, and its workflow starts at step s+1 with checkpoint s+1, the
denoiser state and anchor tracker of step s, and the anchor fraction RUN had
(when its workflow still answers queries; else the configuration's). The
configuration is RUN's. A run that is still running is refused: stop or
terminate it first.

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

// resumePlan is what resume-from starts: the new run's configuration and
// the state its workflow starts from.
type resumePlan struct {
	old   store.Run
	last  int // last completed step of old
	cfg   runconfig.Config
	state workflows.RunState
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
	p, wf, err := planResume(ctx, tc, st, oldID, name)
	if err != nil {
		return err
	}
	if err := checkName(ctx, tc, st, p.cfg.Name); err != nil {
		return err
	}
	raw, err := json.Marshal(p.cfg)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	// The old run's row still says running when its workflow was
	// terminated or failed; record how it ended.
	if ended := endedState(wf); ended != "" && (p.old.State == store.RunRunning || p.old.State == store.RunPaused || p.old.State == store.RunStopping) {
		if err := st.SetRunState(ctx, p.old.ID, ended); err != nil {
			return err
		}
	}
	err = st.ResumeRun(ctx, store.Run{ID: p.cfg.Name, Name: p.cfg.Name, Mode: p.cfg.Mode, Config: raw, Seed: p.cfg.Seed,
		Steps: p.cfg.Steps, State: store.RunRunning, ResumedFrom: p.old.ID, ResumedStep: p.last})
	if err != nil {
		return err
	}
	we, err := startRun(ctx, tc, workflows.RunInput{RunID: p.cfg.Name, Config: p.cfg, State: &p.state})
	if err != nil {
		return err
	}
	if !o.asJSON {
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "started run %s from run %s after step %d: steps %d..%d, checkpoint %d, rho %.4f, anchor fraction %.4g\n",
			p.cfg.Name, p.old.ID, p.last, p.last+1, p.cfg.Steps-1, p.state.Checkpoint.Version, p.state.Rho, p.state.AnchorFraction)
		fmt.Fprintf(out, "ui: %s\n", o.runURL(p.cfg.Name))
	}
	initial := initialStatus(p.cfg, p.last+1, p.state.AnchorFraction)
	initial.Rho, initial.Checkpoint = p.state.Rho, p.state.Checkpoint
	return follow(cmd, &o.conn, tc, st, we.GetRunID(), initial, o.detach, o.poll)
}

// endedState is the Postgres state of a workflow that ended without
// completing, "" otherwise.
func endedState(wf string) store.RunState {
	switch wf {
	case wfTerminated, wfCanceled:
		return store.RunTerminated
	case wfFailed, wfTimedOut:
		return store.RunFailed
	}
	return ""
}

// planResume checks that a run can be resumed and gathers the state its
// successor starts from; it also returns the old workflow's state.
func planResume(ctx context.Context, tc client.Client, st *store.Store, oldID, name string) (resumePlan, string, error) {
	var p resumePlan
	old, err := findRun(ctx, st, oldID)
	if err != nil {
		return p, "", err
	}
	p.old = old
	wf, err := temporalState(ctx, tc, oldID)
	if err != nil {
		return p, "", err
	}
	if wf == wfRunning {
		return p, wf, fmt.Errorf("run %s is still running: stop it (wmrl stop %s) or terminate it before resuming it", oldID, oldID)
	}
	last, ok, err := st.LastCompletedStep(ctx, oldID)
	if err != nil {
		return p, wf, err
	}
	if !ok {
		return p, wf, fmt.Errorf("run %s has no completed step to resume from: start it again with wmrl run", oldID)
	}
	if last+1 >= old.Steps {
		return p, wf, fmt.Errorf("run %s completed all its %d steps: nothing to resume", oldID, old.Steps)
	}
	p.last = last
	if p.cfg, err = runConfig(old); err != nil {
		return p, wf, err
	}
	if name == "" {
		name = fmt.Sprintf("%s-resume-%d", oldID, last+1)
	}
	p.cfg.Name = name
	if ps := p.cfg.Problems(); len(ps) > 0 {
		return p, wf, &configError{source: "run " + oldID + " as " + name, problems: ps}
	}

	s := &p.state
	s.Step, s.Rho, s.AnchorFraction = last+1, 1, p.cfg.Anchors.Fraction
	ck, err := st.Checkpoint(ctx, oldID, last+1)
	if err != nil {
		return p, wf, err
	}
	s.Checkpoint = activities.CheckpointRef{Version: ck.Version, Hash: ck.Hash}
	if f, err := st.FusionState(ctx, oldID, last); err == nil {
		s.Denoise, s.Rho = f.State, f.Rho
	} else if !errors.Is(err, store.ErrNotFound) {
		return p, wf, err
	}
	steps, err := st.Steps(ctx, oldID)
	if err != nil {
		return p, wf, err
	}
	var tr anchors.Tracker
	for _, x := range steps {
		if x.Step > last || x.Status != store.StepCompleted {
			continue
		}
		tr.Groups += int(x.Metrics["groups"])
		tr.Anchors += int(x.Metrics["anchor_groups"])
		if x.Step == last {
			sum, err := stepSummary(ctx, st, oldID, last, x.Metrics)
			if err != nil {
				return p, wf, err
			}
			s.Last = &sum
		}
	}
	s.Tracker = tr
	if cal, err := st.LatestCalibration(ctx, oldID, last); err == nil {
		s.Calibration = calibrationSummary(cal)
	} else if !errors.Is(err, store.ErrNotFound) {
		return p, wf, err
	}
	if h, err := st.HeldOutScore(ctx, oldID, last+1); err == nil && h.Tasks > 0 {
		s.HeldOut = &workflows.HeldOut{Version: last + 1, Score: h.Score, Tasks: h.Tasks, Samples: h.Samples}
	}
	// The anchor fraction may have been changed by set-anchor-fraction; a
	// closed workflow answers queries while a worker can replay it.
	if wf != "" {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if old, err := queryStatus(qctx, tc, oldID); err == nil {
			s.AnchorFraction = old.AnchorFraction
		}
		cancel()
	}
	return p, wf, nil
}
