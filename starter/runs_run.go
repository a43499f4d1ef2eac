package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/workflows"
)

// runOptions are the flags of wmrl run.
type runOptions struct {
	asJSON                   bool
	configFile, preset, name string
	seed                     uint64
	detach, skipPreflight    bool
	poll                     time.Duration
	wait                     preflightWait
}

// runReport is wmrl run --json: the run, whether the command detached from
// it (Ctrl-C or --detach; the run goes on) and its status then.
type runReport struct {
	Run           string       `json:"run"`
	TemporalRunID string       `json:"temporal_run_id"`
	Detached      bool         `json:"detached"`
	Status        statusReport `json:"status"`
	URL           string       `json:"url"`
}

func newRunCmd(cf *connFlags) *cobra.Command {
	o := runOptions{wait: defaultPreflightWait()}
	cmd := &cobra.Command{
		Use:   "run (--config FILE | --preset NAME) [--name N] [--seed N] [--detach] [--json]",
		Short: "Start a durable training run on Temporal and follow it",
		Long: `run starts a training run: the TrainingRun workflow on Temporal, served by
wmrl-worker processes. The configuration is a preset (` + strings.Join(runconfig.PresetNames(), ", ") + `), a YAML
file (--config; fields it omits keep the preset's values, or the default
preset's), then --name and --seed. The whole configuration is checked before
anything starts: every invalid field is named, and nothing is started.

The run's name is its id: its workflow id in Temporal and its key in Postgres.
A name in use by a running run is refused; so is one an earlier run used
(choose another --name).

Before it starts, run asks the workers whether they can serve the run (the
Preflight workflow; --skip-preflight starts without it). While no worker has
answered, it says every 15 s which task queue it waits for a worker on; after
` + workflows.PreflightTimeout.String() + ` it gives up, naming the wmrl-worker command that starts the missing
worker.

run then follows the run: a progress bar (completed steps, ETA) and one line of
metrics per completed step (rho, anchor groups, executions, mean reward, mean
bias of the calibration window before and after the map, held-out score when
evaluated). Ctrl-C detaches: the run goes on, and run prints how to follow or
stop it. An outage of Postgres or Temporal while following is waited out (one
line when it starts, one when the service answers again). At the end it prints the final status and the run's page in the
Temporal Web UI (--ui-url, $WMRL_UI_URL, default ` + deployenv.DefaultUIURL + `).
--detach returns right after the start.

--json prints one object at the end (or when detaching): run,
temporal_run_id, detached, status (as wmrl status --json) and url.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := durationIn("poll", o.poll, minPoll, maxPoll); err != nil {
				return err
			}
			if err := runconfig.CheckName(o.name); cmd.Flags().Changed("name") && err != nil {
				return usagef("--name: %v", err)
			}
			cfg, err := loadRunConfig(o, cmd.Flags().Changed("name"), cmd.Flags().Changed("seed"))
			if err != nil {
				return err
			}
			return startAndFollow(cmd, cf, &o, cfg)
		},
	}
	uses(cmd, groupTemporal, groupPostgres)
	f := cmd.Flags()
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	f.StringVar(&o.configFile, "config", "", "YAML run configuration")
	f.StringVar(&o.preset, "preset", "", "named configuration: "+strings.Join(runconfig.PresetNames(), ", "))
	f.StringVar(&o.name, "name", "", "run name (default: the configuration's)")
	f.Var(decimalUint64{&o.seed}, "seed", "run seed, in decimal digits (default: the configuration's)")
	f.BoolVar(&o.detach, "detach", false, "start the run and return without following it")
	f.BoolVar(&o.skipPreflight, "skip-preflight", false,
		"start without asking a sandbox worker whether it can run the config's sandbox settings")
	f.DurationVar(&o.poll, "poll", time.Second, "how often to ask the run for its status")
	return cmd
}

// configError lists every problem of a configuration, on one line.
type configError struct {
	source   string
	problems []error
}

func (e *configError) Error() string {
	msgs := make([]string, len(e.problems))
	for i, p := range e.problems {
		msgs[i] = p.Error()
	}
	return fmt.Sprintf("invalid configuration (%s), nothing started: %s", e.source, strings.Join(msgs, "; "))
}

// loadRunConfig builds and checks the whole configuration of wmrl run.
func loadRunConfig(o runOptions, nameSet, seedSet bool) (runconfig.Config, error) {
	if o.configFile == "" && o.preset == "" {
		return runconfig.Config{}, usagef("give --config FILE or --preset NAME (presets: %s)", strings.Join(runconfig.PresetNames(), ", "))
	}
	base, source := runconfig.Default(), "preset default"
	if o.preset != "" {
		var err error
		if base, err = runconfig.Preset(o.preset); err != nil {
			return runconfig.Config{}, &usageError{Err: fmt.Errorf("--preset: %w", err)}
		}
		source = "preset " + o.preset
	}
	var data []byte
	if o.configFile != "" {
		var err error
		if data, err = readFileMax(o.configFile, runconfig.MaxBytes); err != nil {
			return base, fmt.Errorf("read config: %w", err)
		}
		source = o.configFile + " over " + source
	}
	var over runconfig.Overrides
	if nameSet {
		over.Name = &o.name
	}
	if seedSet {
		over.Seed = &o.seed
	}
	cfg, err := runconfig.Load(base, data, over)
	var inv *runconfig.Invalid
	switch {
	case errors.As(err, &inv):
		return cfg, &configError{source: source, problems: inv.Problems}
	case err != nil:
		return cfg, fmt.Errorf("%s: %w; nothing started", o.configFile, err)
	}
	return cfg, nil
}

// checkName refuses a run name in use: by a running run, or by an earlier
// run recorded in Postgres.
func checkName(ctx context.Context, tc client.Client, st *store.Store, name string) error {
	wf, err := temporalState(ctx, tc, name)
	if err != nil {
		return err
	}
	if wf == wfRunning {
		return fmt.Errorf("a run named %s is already running: follow it with `wmrl status %s`, stop it with `wmrl stop %s`, or choose another --name", name, name, name)
	}
	r, err := st.Run(ctx, name)
	if err == nil {
		return fmt.Errorf("run name %s is taken by an earlier run (state %s, created %s): choose another --name",
			name, runState(r.State, wf), r.CreatedAt.UTC().Format(time.RFC3339))
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if wf != "" {
		return fmt.Errorf("run name %s was used before in Temporal (workflow %s): choose another --name", name, wf)
	}
	return nil
}

// startRun starts the run workflow; a duplicate id is refused clearly. The
// workflow's memo holds the run's configuration (memoConfig; it holds no
// secret: where remote backends are and their keys are the workers'), and
// its static summary says what the run is, for the Temporal Web UI.
func startRun(ctx context.Context, tc client.Client, in workflows.RunInput) (client.WorkflowRun, error) {
	we, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       in.RunID,
		TaskQueue:                                workflows.QueueControl,
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     map[string]any{memoConfig: in.Config},
		StaticSummary:                            runSummary(in),
	}, workflows.TrainingRun, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, fmt.Errorf("a run named %s exists in Temporal already: choose another --name", in.RunID)
	}
	if err != nil {
		return nil, fmt.Errorf("start run %s: %w", in.RunID, err)
	}
	return we, nil
}

// memoConfig is the memo key of a run workflow's configuration (the
// run's runconfig.Config as JSON; continue-as-new carries the memo over).
const memoConfig = "config"

// runSummary is a run workflow's static summary: one line of what it runs.
func runSummary(in workflows.RunInput) string {
	c := in.Config
	s := fmt.Sprintf("wmrl run %s: %s, %d steps of %d groups × %d samples, seed %d", in.RunID, c.Mode, c.Steps,
		c.Groups, c.Samples, c.Seed)
	if in.ResumeFrom != "" {
		s += ", continuing " + in.ResumeFrom
	}
	return s
}

// preflightWait is how wmrl run waits for its preflight: bound is the
// preflight workflow's execution timeout (it covers a preflight no worker
// started), every how often it says what it waits for.
type preflightWait struct {
	bound, every time.Duration
}

func defaultPreflightWait() preflightWait {
	return preflightWait{bound: workflows.PreflightTimeout, every: 15 * time.Second}
}

// preflight asks a sandbox worker, through the Preflight workflow, whether
// it can execute the run's programs with its sandbox settings; a setting it
// cannot meet refuses the run before anything is recorded. While the
// preflight has no answer, note says every wait.every which task queues it
// waits for a worker on; at wait.bound it gives up, naming the command that
// starts the missing worker.
func preflight(ctx context.Context, tc client.Client, cfg runconfig.Config, wait preflightWait, note func(string)) error {
	id := workflows.PreflightWorkflowID(cfg.Name)
	we, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                workflows.QueueControl,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
		WorkflowExecutionTimeout: wait.bound,
	}, workflows.Preflight, cfg)
	if err != nil {
		return fmt.Errorf("start the sandbox preflight of %s: %w", cfg.Name, err)
	}
	var res activities.PreflightResponse
	done := make(chan error, 1)
	go func() { done <- we.Get(ctx, &res) }()
	start := time.Now()
	// The first look comes early enough for a short bound to see something.
	tick := time.NewTimer(min(wait.every, wait.bound/2))
	defer tick.Stop()
	var waiting []string // the queues without a worker, last seen
answer:
	for {
		select {
		case err = <-done:
			break answer
		case <-tick.C:
			waiting = waitingFor(ctx, tc, id, we.GetRunID())
			note(waitingLine(cfg.Name, waiting, time.Since(start)))
			tick.Reset(wait.every)
		}
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == activities.ErrInvalidInput {
		return fmt.Errorf("run %s refused, nothing started: %s", cfg.Name, app.Message())
	}
	if err != nil && timedOut(ctx, tc, id, we.GetRunID()) {
		if len(waiting) == 0 {
			return fmt.Errorf("sandbox preflight of %s: no answer within %v (--skip-preflight starts without it): %w", cfg.Name, wait.bound, err)
		}
		short := make([]string, len(waiting))
		for i, q := range waiting {
			short[i] = strings.TrimPrefix(q, "wmrl-")
		}
		return fmt.Errorf("sandbox preflight of %s: no worker on %s within %v; start one: wmrl-worker --queues %s (--skip-preflight starts without it)",
			cfg.Name, taskQueues(waiting), wait.bound, strings.Join(short, ","))
	}
	if err != nil {
		return fmt.Errorf("sandbox preflight of %s (--skip-preflight starts without it): %w", cfg.Name, err)
	}
	return nil
}

// waitingFor returns the task queues whose work the preflight id waits
// for a worker to pick up (sorted): QueueControl while its workflow task
// is not started, the queue of each of its activities not started. It is
// nil when nothing waits for a worker, or when the workflow cannot be
// described (that is only a progress line).
func waitingFor(ctx context.Context, tc client.Client, id, runID string) []string {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := tc.DescribeWorkflowExecution(dctx, id, runID)
	if err != nil {
		return nil
	}
	var queues []string
	if wt := d.GetPendingWorkflowTask(); wt != nil && wt.GetState() == enums.PENDING_WORKFLOW_TASK_STATE_SCHEDULED {
		queues = append(queues, workflows.QueueControl)
	}
	for _, a := range d.GetPendingActivities() {
		if a.GetState() != enums.PENDING_ACTIVITY_STATE_SCHEDULED {
			continue
		}
		q := a.GetActivityOptions().GetTaskQueue().GetName()
		if q == "" && a.GetActivityType().GetName() == activities.NamePreflight {
			q = workflows.QueueSandbox
		}
		if q != "" && !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	slices.Sort(queues)
	return queues
}

// waitingLine is the progress line of a preflight waiting since elapsed.
func waitingLine(run string, queues []string, elapsed time.Duration) string {
	e := elapsed.Round(time.Second)
	switch len(queues) {
	case 0:
		return fmt.Sprintf("preflight of %s: waiting for its answer (%v)…", run, e)
	case 1:
		return fmt.Sprintf("preflight of %s: waiting for a worker on %s (%v)…", run, taskQueues(queues), e)
	}
	return fmt.Sprintf("preflight of %s: waiting for workers on %s (%v)…", run, taskQueues(queues), e)
}

// taskQueues names queues: "task queue a" or "task queues a, b".
func taskQueues(queues []string) string {
	if len(queues) == 1 {
		return "task queue " + queues[0]
	}
	return "task queues " + strings.Join(queues, ", ")
}

// timedOut reports whether the preflight workflow ended by its execution
// timeout.
func timedOut(ctx context.Context, tc client.Client, id, runID string) bool {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	d, err := tc.DescribeWorkflowExecution(dctx, id, runID)
	return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT
}

func startAndFollow(cmd *cobra.Command, cf *connFlags, o *runOptions, cfg runconfig.Config) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	cs, err := cf.connect(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer cs.Close()
	tc, st := cs.tc, cs.st
	if err := checkName(ctx, tc, st, cfg.Name); err != nil {
		return err
	}
	if !o.skipPreflight {
		note := func(s string) { fmt.Fprintln(out, s) }
		if o.asJSON {
			note = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) } // stdout holds the one JSON object
		}
		if err := preflight(ctx, tc, cfg, o.wait, note); err != nil {
			return err
		}
	}
	we, err := startRun(ctx, tc, workflows.RunInput{RunID: cfg.Name, Config: cfg})
	if err != nil {
		return err
	}
	if !o.asJSON {
		fmt.Fprintf(out, "started run %s: mode %s, %d steps of %d groups x %d samples, seed %d\n",
			cfg.Name, cfg.Mode, cfg.Steps, cfg.Groups, cfg.Samples, cfg.Seed)
		fmt.Fprintf(out, "ui: %s\n", cf.runURL(cfg.Name))
	}
	return follow(cmd, cf, o.asJSON, tc, st, we.GetRunID(), initialStatus(cfg, 0, cfg.Anchors.Fraction), o.detach, o.poll)
}

// follow prints a run's progress until it ends or the user detaches.
// initial is the run's status as started (shown when detaching before the
// run answers). An outage of Postgres or Temporal does not end it: it is
// waited out (waiter), with a line when it starts and one when it ends.
func follow(cmd *cobra.Command, c *connFlags, asJSON bool, tc client.Client, st *store.Store, temporalRunID string,
	initial workflows.Status, detach bool, poll time.Duration) error {
	run, from, steps := initial.Run, initial.Step, initial.Steps
	out := cmd.OutOrStdout()
	sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Ctrl-C (or a cancelled command context) detaches; the calls after it
	// still need a live context.
	ctx := context.WithoutCancel(cmd.Context())
	rep := runReport{Run: run, TemporalRunID: temporalRunID, URL: c.runURL(run)}
	bar := newProgress(out, steps, "steps", isTerminal(out), asJSON)
	note := bar.line
	if asJSON {
		// stdout holds the one JSON object.
		note = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) }
	}
	w := newWaiter(note, sigCtx.Done())
	heldOut := from                  // the checkpoint version of the last held-out score shown
	printed := from                  // steps whose line is printed (or that an earlier run did)
	last, answered := initial, false // the last status the run answered
	var failing time.Time            // since when the status query fails
	warned := false
	wf := wfRunning
	for !detach {
		err := w.do(ctx, svcTemporal, func(ctx context.Context) (err error) {
			wf, err = temporalState(ctx, tc, run)
			return err
		})
		if errors.Is(err, errDetached) {
			detach = true
			break
		}
		if err != nil {
			return err
		}
		if wf != wfRunning {
			break
		}
		s, err := queryStatus(sigCtx, tc, run)
		switch {
		case err == nil:
			failing, last, answered = time.Time{}, s, true
		case failing.IsZero():
			failing = time.Now()
		case time.Since(failing) > 10*time.Second && !warned && sigCtx.Err() == nil:
			// A run answers once a worker has run its first workflow task.
			bar.line(fmt.Sprintf("waiting for the run to answer (is a worker serving %s?): %v", workflows.QueueControl, err))
			warned = true
		}
		if err == nil {
			err := w.do(ctx, svcPostgres, func(ctx context.Context) (err error) {
				printed, err = printSteps(ctx, st, bar, &heldOut, run, printed, s)
				return err
			})
			if errors.Is(err, errDetached) {
				detach = true
				break
			}
			if err != nil {
				return err
			}
		}
		select {
		case <-sigCtx.Done():
			detach = true
		case <-time.After(poll):
		}
	}
	bar.clear()
	var final statusReport
	var err error
	if detach {
		// The user is leaving: no waiting. Just started, or a service
		// down: what the run last answered.
		if final, err = statusOf(ctx, c, tc, st, run); err != nil {
			final = statusReport{Status: last, Source: sourceStart, URL: c.runURL(run), Note: err.Error()}
			if answered {
				final.Source = sourceQuery
			}
			final.Workflow, err = temporalState(ctx, tc, run)
			if err != nil && unreachable(err) {
				final.Workflow, err = wfRunning, nil // as last seen
			}
		}
	} else {
		// The run ended (wf): its status from Postgres, waited for.
		err = w.do(ctx, svcPostgres, func(ctx context.Context) (err error) {
			final, err = postgresStatus(ctx, st, tc, run, wf)
			return err
		})
		final.URL = c.runURL(run)
	}
	if err != nil {
		return err
	}
	rep.Status = final
	rep.Detached = final.Workflow == wfRunning
	if !rep.Detached {
		err := w.do(ctx, svcPostgres, func(ctx context.Context) (err error) {
			printed, err = printSteps(ctx, st, bar, &heldOut, run, printed, final.Status)
			return err
		})
		if err != nil {
			return err
		}
		bar.clear()
	}
	if asJSON {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else if rep.Detached {
		fmt.Fprintf(out, "detached from run %s at step %d/%d; it goes on.\n", run, final.Step, final.Steps)
		fmt.Fprintf(out, "  follow:  wmrl status %s --follow\n  status:  wmrl status %s\n  pause:   wmrl pause %s\n  stop:    wmrl stop %s\n  ui:      %s\n",
			run, run, run, run, rep.URL)
	} else {
		fmt.Fprintf(out, "run %s ended: %s\n", run, final.State)
		if err := printStatus(out, final); err != nil {
			return err
		}
	}
	if !rep.Detached && final.Workflow != wfCompleted {
		return fmt.Errorf("run %s ended %s", run, final.Workflow)
	}
	return nil
}

// printSteps prints the lines of the steps completed since printed and
// redraws the progress bar; it returns the new number of printed steps.
// The status query gives the last step's metrics; the steps in between
// (several may complete between two polls) come from Postgres. heldOut is
// the checkpoint version of the last held-out score shown.
func printSteps(ctx context.Context, st *store.Store, bar *progress, heldOut *int, run string, printed int, s workflows.Status) (int, error) {
	bar.seen(printed)
	if s.Step > printed {
		var stored []store.Step
		for step := printed; step < s.Step; step++ {
			var sum workflows.StepSummary
			if s.Last != nil && s.Last.Step == step {
				sum = *s.Last
			} else {
				if stored == nil {
					var err error
					if stored, err = st.Steps(ctx, run); err != nil {
						return printed, err
					}
				}
				found := false
				for _, x := range stored {
					if x.Step == step && x.Status == store.StepCompleted {
						var err error
						if sum, err = stepSummary(ctx, st, run, step, x.Metrics); err != nil {
							return printed, err
						}
						found = true
					}
				}
				if !found {
					break
				}
			}
			var h *workflows.HeldOut
			if s.HeldOut != nil && s.HeldOut.Version == step+1 {
				h = s.HeldOut
				*heldOut = h.Version
			}
			tc, err := stepTurnCost(ctx, st, run, step)
			if err != nil {
				return printed, err
			}
			bar.step(stepLine(sum, h, tc), step+1)
			printed = step + 1
		}
	}
	// An evaluation ends after its step's line was printed.
	if h := s.HeldOut; h != nil && h.Version > *heldOut && h.Version <= printed {
		bar.line(fmt.Sprintf("held-out after step %d: %.3f (checkpoint %d, %d tasks, %d samples)",
			h.Version-1, h.Score, h.Version, h.Tasks, h.Samples))
		*heldOut = h.Version
	}
	bar.draw(s.Step)
	return printed, nil
}

// initialStatus is the status of a run as it starts at step from.
func initialStatus(cfg runconfig.Config, from int, fraction float64) workflows.Status {
	return workflows.Status{Run: cfg.Name, Name: cfg.Name, State: workflows.StateRunning, Mode: cfg.Mode, Step: from,
		Steps: cfg.Steps, AnchorFraction: fraction, Rho: 1}
}
