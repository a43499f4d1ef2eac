package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wmrl/wmrl/workflows"
)

// signalReport is wmrl pause/resume/stop --json.
type signalReport struct {
	Run    string `json:"run"`
	Signal string `json:"signal"`
	Sent   bool   `json:"sent"`
}

// signals are the run commands that send a signal, with what they do.
var signals = []struct{ name, short, effect string }{
	{workflows.SignalPause, "Pause a run before its next step", "pauses before its next step (the current one finishes)"},
	{workflows.SignalResume, "Resume a paused run", "resumes"},
	{workflows.SignalStop, "Stop a run after its current step", "stops after its current step, then evaluates and completes"},
}

func newSignalCmds(cf *connFlags) []*cobra.Command {
	var cmds []*cobra.Command
	for _, s := range signals {
		var asJSON bool
		cmd := &cobra.Command{
			Use:   s.name + " RUN [--json]",
			Short: s.short,
			Long: fmt.Sprintf(`%s sends the signal %q to a running run's workflow: the run %s.
A run that is not running is refused.`, s.name, s.name, s.effect),
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				tc, err := cf.dial(ctx, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer tc.Close()
				if err := sendSignal(ctx, tc, args[0], s.name); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), signalReport{Run: args[0], Signal: s.name, Sent: true})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "sent %s to run %s: it %s\n", s.name, args[0], s.effect)
				return err
			},
		}
		cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
		uses(cmd, groupTemporal)
		cmds = append(cmds, cmd)
	}
	return cmds
}

// mustRun fails unless the run's workflow is running.
func mustRun(ctx context.Context, tc client.Client, run string) error {
	wf, err := temporalState(ctx, tc, run)
	if err != nil {
		return err
	}
	switch wf {
	case wfRunning:
		return nil
	case "":
		return fmt.Errorf("no run %q in Temporal (wmrl list shows the runs)", run)
	}
	return fmt.Errorf("run %s is not running (workflow %s)", run, wf)
}

func sendSignal(ctx context.Context, tc client.Client, run, name string) error {
	if err := mustRun(ctx, tc, run); err != nil {
		return err
	}
	if err := tc.SignalWorkflow(ctx, run, "", name, nil); err != nil {
		return fmt.Errorf("signal %s to %s: %w", name, run, err)
	}
	return nil
}

// fractionReport is wmrl set-anchor-fraction --json.
type fractionReport struct {
	Run      string  `json:"run"`
	Fraction float64 `json:"anchor_fraction"`
	Accepted bool    `json:"accepted"`
	// Previous is the fraction before an accepted change; Reason the
	// validator's reason for a rejected one.
	Previous *float64 `json:"previous,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	// FromStep is the first step the new fraction applies to, when the
	// run says (workers with the update set-anchor-fraction-from).
	FromStep *int `json:"from_step,omitempty"`
}

// errRejected marks a change the run's validator refused.
var errRejected = errors.New("rejected")

func newSetAnchorFractionCmd(cf *connFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "set-anchor-fraction RUN F [--json]",
		Short: "Change the anchor fraction of a running run",
		Long: `set-anchor-fraction sends the update "set-anchor-fraction-from" to a running run:
from the first step it has not started on, max(anchors.min, round(F*groups))
groups per step are anchors. The run validates F first (a fraction in [0,1], in a
mode with anchor groups); a rejected value changes nothing and its reason is
printed. The command waits until the run has applied the change and prints the
previous fraction and the step the new one applies from (from_step in --json). A
run on workers that predate that update gets "set-anchor-fraction", which
answers the previous fraction only.`,
		// Parsed here, so that a negative F reaches the command.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			args, help, err := parseWithNumbers(cmd, args)
			if err != nil || help {
				if help {
					return cmd.Help()
				}
				return err
			}
			if len(args) != 2 {
				return usagef("%s: accepts 2 arg(s), received %d (usage: %s)", cmd.Name(), len(args), cmd.UseLine())
			}
			run := args[0]
			if err := checkRunName(run); err != nil {
				return err
			}
			f, err := strconv.ParseFloat(args[1], 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1 {
				return usagef("anchor fraction %q: want a number in [0,1]", clipArg(args[1]))
			}
			ctx := cmd.Context()
			tc, err := cf.dial(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer tc.Close()
			rep, err := setAnchorFraction(ctx, tc, run, f)
			if err != nil && !errors.Is(err, errRejected) {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if werr := writeJSON(out, rep); werr != nil {
					return werr
				}
			} else if err == nil {
				from := "the next step"
				if rep.FromStep != nil {
					from = fmt.Sprintf("step %d", *rep.FromStep)
				}
				if _, werr := fmt.Fprintf(out, "run %s: anchor fraction %.4g -> %.4g from %s\n", run, *rep.Previous, f, from); werr != nil {
					return werr
				}
			}
			if err != nil {
				return fmt.Errorf("set-anchor-fraction %v rejected by run %s: %s", f, run, rep.Reason)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	uses(cmd, groupTemporal)
	return cmd
}

// setAnchorFraction sends the validated update; a rejection is errRejected
// with the reason in the report.
func setAnchorFraction(ctx context.Context, tc client.Client, run string, f float64) (fractionReport, error) {
	rep := fractionReport{Run: run, Fraction: f}
	if err := mustRun(ctx, tc, run); err != nil {
		return rep, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	update := func(name string, reply any) error {
		h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   run,
			UpdateName:   name,
			Args:         []any{f},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, reply)
		}
		return err
	}
	// The update that also says from which step the fraction applies; a
	// run on workers without it refuses it as unknown, changing nothing,
	// and gets set-anchor-fraction, which answers the previous fraction.
	var change workflows.FractionChange
	err := update(workflows.UpdateSetAnchorFractionFrom, &change)
	prev := change.Previous
	if reason, ok := rejection(err); ok && strings.HasPrefix(reason, "unknown update "+workflows.UpdateSetAnchorFractionFrom) {
		err = update(workflows.UpdateSetAnchorFraction, &prev)
	} else if err == nil {
		rep.FromStep = &change.FromStep
	}
	if err != nil {
		reason, ok := rejection(err)
		if !ok {
			return rep, fmt.Errorf("set-anchor-fraction on %s: %w", run, err)
		}
		rep.Reason = reason
		return rep, errRejected
	}
	rep.Accepted, rep.Previous = true, &prev
	return rep, nil
}

// rejection returns the reason of an update the workflow refused (its
// validator's error, delivered as an application error).
func rejection(err error) (string, bool) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message(), true
	}
	return "", false
}
