package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/workflows"
)

// Where a status came from.
const (
	sourceQuery    = "query"    // the run workflow's status query
	sourcePostgres = "postgres" // the database (and the workflow result)
	sourceStart    = "start"    // as started; the run has not answered yet
)

// statusReport is wmrl status --json: the status query's answer
// (workflows.Status: run, name, state, mode, step, steps, anchor fractions,
// rho, checkpoint, last, calibration, held_out) and where the run stands in
// Temporal.
type statusReport struct {
	workflows.Status
	// Workflow is the state of the run's workflow in Temporal: running,
	// completed, failed, terminated, canceled, timed_out, or "" when
	// Temporal does not know it (or does not answer).
	Workflow    string               `json:"workflow"`
	Source      string               `json:"source"`
	ResumedFrom string               `json:"resumed_from,omitempty"`
	ResumedStep *int                 `json:"resumed_step,omitempty"`
	Result      *workflows.RunResult `json:"result,omitempty"`
	// Termination is why and when wmrl terminate ended the run.
	Termination *store.Termination `json:"termination,omitempty"`
	Cost        *store.Cost        `json:"cost,omitempty"`
	URL         string             `json:"url"`
	Note        string             `json:"note,omitempty"`
	// LastTurns is the last step's turns and world-model calls, for a
	// multi-turn run (nil otherwise).
	LastTurns *turnCost `json:"last_turns,omitempty"`
}

// addLastTurns sets rep.LastTurns from the last step's turns.
func addLastTurns(ctx context.Context, st *store.Store, rep *statusReport) error {
	if rep.Last == nil {
		return nil
	}
	var err error
	rep.LastTurns, err = stepTurnCost(ctx, st, rep.Run, rep.Last.Step)
	return err
}

func newStatusCmd(cf *connFlags) *cobra.Command {
	var (
		asJSON    bool
		followRun bool
		poll      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status RUN [--follow] [--json]",
		Short: "Show where a training run stands",
		Long: `status asks a running run's workflow for its status (query "status"): state
(running, paused, stopping, completed), mode, completed steps of planned steps,
anchor fraction (set and realised), rho, the last step's metrics, the latest
calibration map's summary and the last held-out score. A run that is no longer
running (or whose workers do not answer) is described from Postgres and, when it
completed, from its workflow result; "workflow" then says what Temporal reports
(completed, failed, terminated, ...).

--follow follows a running run as wmrl run does (progress, one line per
completed step) until it ends; Ctrl-C detaches again. An outage of Postgres or
Temporal meanwhile is waited out, with one line when it starts and one when the
service answers again. With --json it then prints
the object of wmrl run --json.

--json prints one object with at least run, state, mode, step and steps.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := durationIn("poll", poll, minPoll, maxPoll); err != nil {
				return err
			}
			ctx := cmd.Context()
			if followRun {
				return followStatus(cmd, cf, asJSON, args[0], poll)
			}
			rep, err := runStatus(ctx, cf, args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return printStatus(cmd.OutOrStdout(), rep)
		},
	}
	uses(cmd, groupTemporal, groupPostgres)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&followRun, "follow", false, "follow a running run as wmrl run does, until it ends (Ctrl-C detaches)")
	cmd.Flags().DurationVar(&poll, "poll", time.Second, "how often to ask the run for its status (with --follow)")
	return cmd
}

// followStatus follows a running run from where it stands; a run that is
// not running gets its status printed.
func followStatus(cmd *cobra.Command, c *connFlags, asJSON bool, run string, poll time.Duration) error {
	ctx := cmd.Context()
	cs, err := c.connect(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer cs.Close()
	tc, st := cs.tc, cs.st
	now, err := statusOf(ctx, c, tc, st, run)
	if err != nil {
		return err
	}
	if now.Workflow != wfRunning {
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), now)
		}
		return printStatus(cmd.OutOrStdout(), now)
	}
	if !asJSON {
		fmt.Fprintf(cmd.OutOrStdout(), "following run %s from step %d/%d\n", run, now.Step, now.Steps)
	}
	var temporalRunID string
	if d, err := tc.DescribeWorkflowExecution(ctx, run, ""); err == nil {
		temporalRunID = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	return follow(cmd, c, asJSON, tc, st, temporalRunID, now.Status, false, poll)
}

// runStatus answers wmrl status: the query when the run's workflow runs,
// else Postgres.
func runStatus(ctx context.Context, c *connFlags, run string, stderr io.Writer) (statusReport, error) {
	cs, err := c.connectStore(ctx, stderr)
	if err != nil {
		return statusReport{}, err
	}
	defer cs.Close()
	if cs.tc == nil {
		rep, err := postgresStatus(ctx, cs.st, nil, run, "")
		if err != nil {
			return rep, err
		}
		rep.URL = c.runURL(run)
		rep.Note = cs.noTemporal.Error()
		return rep, nil
	}
	return statusOf(ctx, c, cs.tc, cs.st, run)
}

// statusOf is the status of a run given both clients.
func statusOf(ctx context.Context, c *connFlags, tc client.Client, st *store.Store, run string) (statusReport, error) {
	wf, err := temporalState(ctx, tc, run)
	if err != nil {
		return statusReport{}, err
	}
	var note string
	if wf == wfRunning {
		s, err := queryStatus(ctx, tc, run)
		if err == nil {
			rep := statusReport{Status: s, Workflow: wf, Source: sourceQuery, URL: c.runURL(run)}
			if r, err := st.Run(ctx, run); err == nil && r.ResumedFrom != "" {
				rep.ResumedFrom, rep.ResumedStep = r.ResumedFrom, &r.ResumedStep
			}
			return rep, addLastTurns(ctx, st, &rep)
		}
		note = fmt.Sprintf("status query unanswered (is a worker serving %s?): %v", workflows.QueueControl, err)
	}
	rep, err := postgresStatus(ctx, st, tc, run, wf)
	if err != nil {
		return rep, err
	}
	rep.URL, rep.Note = c.runURL(run), note
	return rep, nil
}

// queryStatus asks the run workflow for its status.
func queryStatus(ctx context.Context, tc client.Client, run string) (workflows.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var s workflows.Status
	v, err := tc.QueryWorkflow(ctx, run, "", workflows.QueryStatus)
	if err != nil {
		return s, err
	}
	if err := v.Get(&s); err != nil {
		return s, fmt.Errorf("decode status of %s: %w", run, err)
	}
	return s, nil
}

// postgresStatus describes a run from the database; tc (if not nil) gives
// the workflow result of a completed run, wf the workflow's state.
func postgresStatus(ctx context.Context, st *store.Store, tc client.Client, run, wf string) (statusReport, error) {
	r, err := findRun(ctx, st, run)
	if err != nil {
		return statusReport{}, err
	}
	cfg, err := runConfig(r)
	if err != nil {
		return statusReport{}, err
	}
	rep := statusReport{Workflow: wf, Source: sourcePostgres, ResumedFrom: r.ResumedFrom, Termination: r.Termination}
	if r.ResumedFrom != "" {
		rep.ResumedStep = &r.ResumedStep
	}
	s := &rep.Status
	s.Run, s.Name, s.Mode, s.Steps, s.AnchorFraction = r.ID, r.Name, r.Mode, r.Steps, cfg.Anchors.Fraction
	s.State = runState(r.State, wf)
	steps, err := st.Steps(ctx, run)
	if err != nil {
		return rep, err
	}
	groups, anchorGroups := 0, 0
	var lastStep *store.Step
	for i, x := range steps {
		if x.Status != store.StepCompleted {
			continue
		}
		groups += x.Metrics.Groups
		anchorGroups += x.Metrics.AnchorGroups
		lastStep = &steps[i]
	}
	last := -1
	if lastStep != nil {
		last = lastStep.Step
		if lastStep.FractionRecorded && cfg.Mode.Pieces().Anchors {
			s.AnchorFraction = lastStep.Metrics.AnchorFraction // as set during the run, if it was
		}
	}
	s.Step, s.Rho = last+1, 1
	if groups > 0 {
		s.RealisedAnchorFraction = float64(anchorGroups) / float64(groups)
	}
	if c, err := st.LatestCheckpoint(ctx, run); err == nil {
		s.Checkpoint = activities.CheckpointRef{Version: c.Version, Hash: c.Hash}
	} else if !errors.Is(err, store.ErrNotFound) {
		return rep, err
	}
	if last >= 0 {
		sum, err := stepSummary(ctx, st, run, last, lastStep.Metrics)
		if err != nil {
			return rep, err
		}
		s.Last = &sum
		s.Rho = sum.Metrics.Rho
		if f, err := st.LatestFusionState(ctx, run, last); err == nil {
			s.Rho = f.Rho
		}
		if cal, err := st.LatestCalibration(ctx, run, last); err == nil {
			s.Calibration = calibrationSummary(cal)
		}
		if h, err := st.HeldOutScore(ctx, run, last+1); err == nil && h.Tasks > 0 {
			s.HeldOut = &workflows.HeldOut{Version: last + 1, Score: h.Score, Tasks: h.Tasks, Samples: h.Samples}
		}
		vs, err := st.WorldModelVersions(ctx, run)
		if err != nil {
			return rep, err
		}
		for _, v := range vs {
			if v.Step <= last {
				s.WorldModel = &activities.WorldModelRef{Step: v.Step, Hash: v.Hash}
			}
		}
	}
	if tc != nil && wf == wfCompleted {
		var res workflows.RunResult
		if err := tc.GetWorkflow(ctx, run, "").Get(ctx, &res); err == nil {
			rep.Result = &res
			if res.HeldOut != nil {
				s.HeldOut = res.HeldOut
			}
		}
	}
	return rep, addLastTurns(ctx, st, &rep)
}

// runState is the state to show: the workflow's when it ended, else the
// one recorded in Postgres.
func runState(recorded store.RunState, wf string) string {
	switch wf {
	case "", wfRunning, wfContinued:
		return string(recorded)
	}
	return wf
}

// stepSummary rebuilds a completed step's summary from its stored metrics
// and anchor flags.
func stepSummary(ctx context.Context, st *store.Store, run string, step int, m stepsummary.Step) (workflows.StepSummary, error) {
	sum := workflows.StepSummary{Step: step, Anchors: []int{}, Metrics: m}
	ts, err := st.StepTrajectories(ctx, run, step)
	if err != nil {
		return sum, err
	}
	for _, t := range ts {
		if t.Anchor && (len(sum.Anchors) == 0 || sum.Anchors[len(sum.Anchors)-1] != t.Group) {
			sum.Anchors = append(sum.Anchors, t.Group)
		}
	}
	return sum, nil
}

func calibrationSummary(c store.Calibration) *activities.CalibrationSummary {
	s := &activities.CalibrationSummary{Step: c.Step, Pairs: c.NPairs, Knots: len(c.Map.X)}
	if c.BiasBefore != nil {
		s.BiasBefore = *c.BiasBefore
	}
	if c.BiasAfter != nil {
		s.BiasAfter = *c.BiasAfter
	}
	return s
}

func printStatus(w io.Writer, r statusReport) error {
	s := r.Status
	var b strings.Builder
	fmt.Fprintf(&b, "run          %s (mode %s)\n", s.Run, s.Mode)
	wf := r.Workflow
	switch {
	case wf == "" && r.Note != "":
		wf = "unknown: Temporal not reached"
	case wf == "":
		wf = "unknown to Temporal"
	}
	fmt.Fprintf(&b, "state        %s, step %d/%d (workflow %s; from %s)\n", s.State, s.Step, s.Steps, wf, r.Source)
	if r.ResumedFrom != "" {
		fmt.Fprintf(&b, "resumed from %s after step %d\n", r.ResumedFrom, *r.ResumedStep)
	}
	if t := r.Termination; t != nil {
		fmt.Fprintf(&b, "terminated   %s: %s\n", t.At.UTC().Format("2006-01-02 15:04:05"), t.Reason)
	}
	fmt.Fprintf(&b, "rho          %.4f\n", s.Rho)
	fmt.Fprintf(&b, "anchors      fraction %.4g (realised %.4g)\n", s.AnchorFraction, s.RealisedAnchorFraction)
	if s.Last != nil {
		fmt.Fprintf(&b, "last step    %s\n", stepLine(*s.Last, nil, r.LastTurns))
	}
	if c := s.Calibration; c != nil {
		fmt.Fprintf(&b, "calibration  step %d: %d pairs, %d knots, bias %+.4f -> %+.4f\n", c.Step, c.Pairs, c.Knots, c.BiasBefore, c.BiasAfter)
	}
	if v := s.WorldModel; v != nil {
		fmt.Fprintf(&b, "world model  refreshed after step %d (%s)\n", v.Step, short(v.Hash))
	}
	if h := s.HeldOut; h != nil {
		fmt.Fprintf(&b, "held-out     %.4f (checkpoint %d, %d tasks, %d samples)\n", h.Score, h.Version, h.Tasks, h.Samples)
	}
	if s.Checkpoint.Hash != "" {
		fmt.Fprintf(&b, "checkpoint   %d (%s)\n", s.Checkpoint.Version, short(s.Checkpoint.Hash))
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "note         %s\n", r.Note)
	}
	fmt.Fprintf(&b, "ui           %s\n", r.URL)
	_, err := io.WriteString(w, b.String())
	return err
}

// turnCost is what a multi-turn step's line adds: its turns per
// trajectory, its world-model calls over all turns (the answers of the
// world-model groups' turns and the grades of the real turns), its real
// turns' executions and their CPU seconds, the turns of either source that
// executed nothing (request_info and malformed turns: neither an execution
// nor a world-model call), and the same per turn index.
type turnCost struct {
	Turns      int     `json:"turns"`
	WMCalls    int     `json:"wm_calls"`
	Executions int     `json:"executions"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Unexecuted int     `json:"unexecuted"`
	// ByTurn is the cost of each turn index, in turn order.
	ByTurn []turnIndexCost `json:"by_turn"`
}

// turnIndexCost is the cost of one turn index of a step: the executions
// of its real turns (answered by an execution), their CPU seconds, its
// world-model calls, and its turns that executed nothing.
type turnIndexCost struct {
	Turn       int     `json:"turn"`
	Executions int     `json:"executions"`
	CPUSeconds float64 `json:"cpu_seconds"`
	WMCalls    int     `json:"wm_calls"`
	Unexecuted int     `json:"unexecuted"`
}

// shortTurns is the most turns a step line breaks its costs down by.
const shortTurns = 5

// stepTurnCost reads a step's turnCost from its turns; nil for a
// single-shot step (no turn rows).
func stepTurnCost(ctx context.Context, st *store.Store, run string, step int) (*turnCost, error) {
	rows, err := st.TurnsByIndex(ctx, run, step)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	c := &turnCost{}
	for _, x := range rows {
		c.Turns = max(c.Turns, x.Turn)
	}
	c.ByTurn = make([]turnIndexCost, c.Turns)
	for i := range c.ByTurn {
		c.ByTurn[i].Turn = i + 1
	}
	for _, x := range rows {
		b := &c.ByTurn[x.Turn-1]
		if x.Source == store.SourceWorldModel {
			b.WMCalls += x.Answered - x.Unexecuted
		} else {
			b.Executions += x.Answered - x.Unexecuted
		}
		b.WMCalls += x.WMGraded
		b.CPUSeconds += x.CPUSeconds
		b.Unexecuted += x.Unexecuted
	}
	for _, b := range c.ByTurn {
		c.WMCalls += b.WMCalls
		c.Executions += b.Executions
		c.CPUSeconds += b.CPUSeconds
		c.Unexecuted += b.Unexecuted
	}
	return c, nil
}

// perTurn is " (a/b/c)" of the turns' values under shortTurns turns, else
// "".
func (c *turnCost) perTurn(f func(turnIndexCost) string) string {
	if len(c.ByTurn) > shortTurns {
		return ""
	}
	parts := make([]string, len(c.ByTurn))
	for i, b := range c.ByTurn {
		parts[i] = f(b)
	}
	return " (" + strings.Join(parts, "/") + ")"
}

// stepLine is one completed step's metrics on one line; tc, for a
// multi-turn step, adds its turns, its executions' CPU seconds, its
// world-model calls and its turns that executed neither (request_info and
// malformed turns, when there are any), per turn when there are at most
// shortTurns (its executions, counted over all turns, are the metrics'
// executed).
func stepLine(s workflows.StepSummary, h *workflows.HeldOut, tc *turnCost) string {
	m := s.Metrics
	executed := fmt.Sprintf("%d executed", m.Executed)
	if tc != nil {
		executed = fmt.Sprintf("%d turns, %d executed%s, %.3f CPU-s%s, %d world-model calls%s", tc.Turns, m.Executed,
			tc.perTurn(func(b turnIndexCost) string { return strconv.Itoa(b.Executions) }),
			tc.CPUSeconds, tc.perTurn(func(b turnIndexCost) string { return fmt.Sprintf("%.3f", b.CPUSeconds) }),
			tc.WMCalls, tc.perTurn(func(b turnIndexCost) string { return strconv.Itoa(b.WMCalls) }))
		if tc.Unexecuted > 0 {
			executed += fmt.Sprintf(", %d unexecuted%s", tc.Unexecuted,
				tc.perTurn(func(b turnIndexCost) string { return strconv.Itoa(b.Unexecuted) }))
		}
	}
	line := fmt.Sprintf("step %d: rho %.3f, anchors %d groups, %s, reward %.3f, bias %+.3f -> %+.3f",
		s.Step, m.Rho, m.AnchorGroups, executed, m.MeanReward, m.BiasBefore, m.BiasAfter)
	if m.Ungraded > 0 {
		line += fmt.Sprintf(", %d ungraded", m.Ungraded)
	}
	if m.Gate != nil {
		line += ", " + m.Gate.String()
	}
	if m.Scoring != nil {
		line += ", " + m.Scoring.String()
	}
	if m.Remembered > 0 {
		line += fmt.Sprintf(", %d remembered", m.Remembered)
	}
	if m.ImportanceRatioMean != 0 {
		line += fmt.Sprintf(", ratio %.3f (max %.3f)", m.ImportanceRatioMean, m.ImportanceRatioMax)
	}
	if h != nil {
		line += fmt.Sprintf(", held-out %.3f", h.Score)
	}
	return line
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
