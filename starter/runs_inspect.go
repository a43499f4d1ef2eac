package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
)

// inspectReport is wmrl inspect --json: one step of a run from Postgres.
type inspectReport struct {
	Run    string           `json:"run"`
	Mode   mode.Mode        `json:"mode"`
	Step   int              `json:"step"`
	Status store.StepStatus `json:"status"`
	// Metrics are the step's recorded metrics ({} until it completes).
	Metrics inspectMetrics `json:"metrics"`
	// Rho is the anchor weight of the step (from its fusion state; nil
	// when none is stored).
	Rho          *float64           `json:"rho"`
	Calibration  *inspectMap        `json:"calibration"`
	Cost         store.Cost         `json:"cost"`
	Checkpoint   *store.Checkpoint  `json:"checkpoint"`
	Trajectories []inspectTraj      `json:"trajectories"`
	AnchorPairs  []store.AnchorPair `json:"anchor_pairs"`
	// Stages are the wall seconds of the step's stages and how many of
	// them overlapped another step's stages (stepsummary.Overlap over the
	// run's recorded steps); empty for a step recorded without stage
	// times (or not completed).
	Stages []stepsummary.StageTime `json:"stages"`
}

// inspectMetrics are a step's metrics once it completed (nil before, shown
// as {} as when the metrics were stored by name).
type inspectMetrics struct {
	*stepsummary.Step
}

// MarshalJSON encodes the metrics, or {} when there are none.
func (m inspectMetrics) MarshalJSON() ([]byte, error) {
	if m.Step == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(m.Step)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (m *inspectMetrics) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("{}")) {
		m.Step = nil
		return nil
	}
	m.Step = new(stepsummary.Step)
	return json.Unmarshal(b, m.Step)
}

// inspectMap is the calibration map fitted at the step.
type inspectMap struct {
	Step       int          `json:"step"`
	Pairs      int          `json:"pairs"`
	Map        isotonic.Map `json:"map"`
	BiasBefore *float64     `json:"bias_before"`
	BiasAfter  *float64     `json:"bias_after"`
}

// inspectTraj is one trajectory: its program, world-model score, the score
// after the step's calibration map, real score and execution status and
// cost (nil when not executed).
type inspectTraj struct {
	Group      int      `json:"group"`
	Sample     int      `json:"sample"`
	TaskID     string   `json:"task_id"`
	Program    string   `json:"program"`
	Anchor     bool     `json:"anchor"`
	WM         *float64 `json:"wm"`
	Calibrated *float64 `json:"calibrated"`
	Real       *float64 `json:"real"`
	Status     string   `json:"status"`
	CPUSeconds *float64 `json:"cpu_seconds"`
	// Turns are the trajectory's turns, from the turns table, in turn
	// order: only in runs with trajectory.turns > 1 (a single-shot
	// trajectory has none, and the key is left out).
	Turns []inspectTurn `json:"turns,omitempty"`
}

// inspectTurn is one turn of a multi-turn trajectory: the policy's action,
// who answered (source), the answer (observation, status, reward; empty
// while unanswered, reward nil when ungraded), the world model's grade of a
// real turn and the answer's cost; Unexecuted marks an answer given
// without an execution or a world-model call (a request_info or malformed
// turn).
type inspectTurn struct {
	Turn        int          `json:"turn"`
	Source      store.Source `json:"source"`
	Action      string       `json:"action"`
	Observation string       `json:"observation"`
	Status      string       `json:"status"`
	Reward      *float64     `json:"reward"`
	WM          *float64     `json:"wm,omitempty"`
	CPUSeconds  float64      `json:"cpu_seconds"`
	WMTokens    int          `json:"wm_tokens,omitempty"`
	Unexecuted  bool         `json:"unexecuted,omitempty"`
}

func newInspectCmd(cf *connFlags) *cobra.Command {
	var (
		asJSON bool
		step   int
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "inspect RUN [--step N] [--limit N] [--json]",
		Short: "Show one step of a run: trajectories, anchor pairs, calibration map, rho, costs",
		Long: `inspect reads one step of a run from Postgres (default: the last completed
step): its metrics, rho, the calibration map fitted at the step, the cost of its
executions, the checkpoint it produced, its trajectories (program, world-model
score, calibrated score, real score, execution status, CPU seconds) and its
anchor pairs. In runs with trajectory.turns > 1 every trajectory also has its
turns (action, source, observation, status, reward, the world model's grade
of a real turn); the text output shows each trajectory's turns on one line. Text output shows the first --limit rows of each table (0: all);
--json prints everything in one object.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			at := -1
			if cmd.Flags().Changed("step") {
				if err := intIn("step", step, 0, maxStep); err != nil {
					return err
				}
				at = step
			}
			if err := intIn("limit", limit, 0, maxRows); err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := cf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := inspectStep(ctx, st, args[0], at)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return printInspect(cmd.OutOrStdout(), rep, limit)
		},
	}
	uses(cmd, groupPostgres)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().IntVar(&step, "step", 0, "step to show (default: the last completed one)")
	cmd.Flags().IntVar(&limit, "limit", 12, "rows per table in text output (0: all)")
	return cmd
}

// inspectStep gathers a step (the last completed one when step < 0).
func inspectStep(ctx context.Context, st *store.Store, run string, step int) (inspectReport, error) {
	r, err := findRun(ctx, st, run)
	if err != nil {
		return inspectReport{}, err
	}
	steps, err := st.Steps(ctx, run)
	if err != nil {
		return inspectReport{}, err
	}
	var row *store.Step
	for i := range steps {
		x := &steps[i]
		if (step < 0 && x.Status == store.StepCompleted) || x.Step == step {
			row = x
		}
	}
	if row == nil {
		if step < 0 {
			return inspectReport{}, fmt.Errorf("run %s has no completed step yet (use --step N for a running one)", run)
		}
		return inspectReport{}, fmt.Errorf("run %s has no step %d (%d recorded)", run, step, len(steps))
	}
	rep := inspectReport{Run: run, Mode: r.Mode, Step: row.Step, Status: row.Status, Trajectories: []inspectTraj{}}
	if row.FinishedAt != nil {
		rep.Metrics.Step = &row.Metrics
	}
	rep.Stages = stageTimes(steps, row.Step)
	if f, err := st.FusionState(ctx, run, row.Step); err == nil {
		rep.Rho = &f.Rho
	} else if !errors.Is(err, store.ErrNotFound) {
		return rep, err
	}
	var m *isotonic.Map
	if cal, err := st.Calibration(ctx, run, row.Step); err == nil {
		rep.Calibration = &inspectMap{Step: cal.Step, Pairs: cal.NPairs, Map: cal.Map, BiasBefore: cal.BiasBefore, BiasAfter: cal.BiasAfter}
		m = &cal.Map
	} else if !errors.Is(err, store.ErrNotFound) {
		return rep, err
	}
	if rep.Cost, err = st.StepCost(ctx, run, row.Step); err != nil {
		return rep, err
	}
	if ck, err := st.Checkpoint(ctx, run, row.Step+1); err == nil {
		rep.Checkpoint = &ck
	} else if !errors.Is(err, store.ErrNotFound) {
		return rep, err
	}
	ts, err := st.StepTrajectories(ctx, run, row.Step)
	if err != nil {
		return rep, err
	}
	turns, err := st.StepTurns(ctx, run, row.Step)
	if err != nil {
		return rep, err
	}
	byTraj := map[store.Key][]inspectTurn{}
	for _, t := range turns {
		x := inspectTurn{Turn: t.Turn, Source: t.Source, Action: t.Action, WM: t.WMReward}
		if a := t.Answer; a != nil {
			x.Observation, x.Status, x.Reward, x.CPUSeconds, x.WMTokens = a.Observation, a.Status, a.Reward, a.CPUSeconds, a.WMTokens
			x.Unexecuted = a.Unexecuted
		}
		byTraj[t.Key] = append(byTraj[t.Key], x)
	}
	for _, t := range ts {
		it := inspectTraj{Turns: byTraj[t.Key], Group: t.Group, Sample: t.Sample, TaskID: t.TaskID, Program: t.Program, Anchor: t.Anchor, WM: t.WMScore}
		if t.WMScore != nil && m != nil {
			v := m.Apply(*t.WMScore)
			it.Calibrated = &v
		}
		if t.Exec != nil {
			score, cpu := t.Exec.Score, t.Exec.CPUSeconds
			it.Real, it.Status, it.CPUSeconds = &score, string(t.Exec.Status), &cpu
		}
		rep.Trajectories = append(rep.Trajectories, it)
	}
	if rep.AnchorPairs, err = st.StepAnchorPairs(ctx, run, row.Step); err != nil {
		return rep, err
	}
	if rep.AnchorPairs == nil {
		rep.AnchorPairs = []store.AnchorPair{}
	}
	return rep, nil
}

// stageTimes are step's stage times against the run's other steps.
func stageTimes(steps []store.Step, step int) []stepsummary.StageTime {
	all := make([]stepsummary.Stages, len(steps))
	at := -1
	for i, x := range steps {
		if x.FinishedAt != nil {
			all[i] = x.Metrics.Stages
		}
		if x.Step == step {
			at = i
		}
	}
	if out := stepsummary.Overlap(all, at); out != nil {
		return out
	}
	return []stepsummary.StageTime{}
}

// stagesLine is the text of a step's stage times: each stage's seconds,
// with the overlapped part in parentheses when some is.
func stagesLine(ts []stepsummary.StageTime) string {
	parts := make([]string, len(ts))
	for i, x := range ts {
		name := x.Stage
		if name == "step" {
			name = "whole step"
		}
		parts[i] = fmt.Sprintf("%s %.3f s", strings.ReplaceAll(name, "_", "+"), x.Seconds)
		if x.Overlapped > 0 {
			parts[i] += fmt.Sprintf(" (%.3f s overlapped)", x.Overlapped)
		}
	}
	return strings.Join(parts, ", ")
}

func num(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *p)
}

func printInspect(w io.Writer, r inspectReport, limit int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s (mode %s), step %d: %s\n", r.Run, r.Mode, r.Step, r.Status)
	fmt.Fprintf(&b, "rho          %s\n", num(r.Rho))
	if m := r.Metrics.Step; m != nil {
		fmt.Fprintf(&b, "metrics      reward %.3f, env %.3f, wm %.3f, anchor groups %d, graded %d/%d, ungraded %d of %d executed, skipped groups %d\n",
			m.MeanReward, m.MeanEnv, m.MeanWM, m.AnchorGroups, m.Graded, m.Trajectories, m.Ungraded, m.Executed, m.SkippedGroups)
		if m.Unexecuted > 0 {
			fmt.Fprintf(&b, "turns        %d real turns executed nothing (request_info, malformed), not counted as executed\n", m.Unexecuted)
		}
		if m.Gate != nil {
			fmt.Fprintf(&b, "gate         %s\n", m.Gate)
		}
		if m.Scoring != nil {
			fmt.Fprintf(&b, "selective    %s\n", m.Scoring)
		}
		if m.Remembered > 0 {
			fmt.Fprintf(&b, "memory       %d trajectories scored by an earlier execution of their program on their task\n", m.Remembered)
		}
		if m.ImportanceRatioMean != 0 {
			fmt.Fprintf(&b, "update       importance ratio mean %.4f, max %.4f\n", m.ImportanceRatioMean, m.ImportanceRatioMax)
		}
	}
	if len(r.Stages) > 0 {
		over := 0.0
		for _, x := range r.Stages {
			if x.Stage == "step" {
				over = x.Overlapped
			}
		}
		fmt.Fprintf(&b, "stages       %s; %.3f s of the step overlapped other steps\n", stagesLine(r.Stages), over)
	}
	fmt.Fprintf(&b, "cost         %d trajectories, %d executed, %.2f CPU s, %.2f wall s\n",
		r.Cost.Trajectories, r.Cost.Executed, r.Cost.CPUSeconds, r.Cost.WallSeconds)
	if r.Checkpoint != nil {
		fmt.Fprintf(&b, "checkpoint   %d (%s)\n", r.Checkpoint.Version, short(r.Checkpoint.Hash))
	}
	if c := r.Calibration; c != nil {
		fmt.Fprintf(&b, "calibration  %d pairs, %d knots, bias %s -> %s\n", c.Pairs, len(c.Map.X), num(c.BiasBefore), num(c.BiasAfter))
		if len(c.Map.X) == 0 {
			b.WriteString("  identity\n")
		}
		for i := range min(len(c.Map.X), len(c.Map.Y)) {
			if limit > 0 && i == limit {
				fmt.Fprintf(&b, "  ... %d more knots\n", len(c.Map.X)-limit)
				break
			}
			fmt.Fprintf(&b, "  %.3f -> %.3f\n", c.Map.X[i], c.Map.Y[i])
		}
	} else {
		b.WriteString("calibration  none at this step\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntrajectories (%d):\n", len(r.Trajectories))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSAMPLE\tTASK\tANCHOR\tWM\tCALIBRATED\tREAL\tSTATUS\tCPU S\tPROGRAM")
	for i, t := range r.Trajectories {
		if limit > 0 && i == limit {
			break
		}
		anchor, status := "", t.Status
		if t.Anchor {
			anchor = "yes"
		}
		if status == "" {
			status = "-"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Group, t.Sample, t.TaskID, anchor, num(t.WM),
			num(t.Calibrated), num(t.Real), status, num(t.CPUSeconds), clip(t.Program, 48))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if limit > 0 && len(r.Trajectories) > limit {
		fmt.Fprintf(w, "... %d more (--limit 0 or --json for all)\n", len(r.Trajectories)-limit)
	}
	if err := printTurns(w, r.Trajectories, limit); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nanchor pairs (%d):\n", len(r.AnchorPairs))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSAMPLE\tWM\tREAL")
	for i, p := range r.AnchorPairs {
		if limit > 0 && i == limit {
			break
		}
		fmt.Fprintf(tw, "%d\t%d\t%.3f\t%.3f\n", p.Group, p.Sample, p.WM, p.Env)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if limit > 0 && len(r.AnchorPairs) > limit {
		fmt.Fprintf(w, "... %d more\n", len(r.AnchorPairs)-limit)
	}
	return nil
}

// printTurns prints the turns of multi-turn trajectories, one line per
// trajectory: its source, then each turn's status and reward (and the world
// model's grade of a real turn in parentheses). Nothing for single-shot
// trajectories.
func printTurns(w io.Writer, ts []inspectTraj, limit int) error {
	n := 0
	for _, t := range ts {
		if len(t.Turns) > 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nturns (%d trajectories; status reward, (world-model grade) of a real turn):\n", n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSAMPLE\tSOURCE\tTURNS")
	shown := 0
	for _, t := range ts {
		if len(t.Turns) == 0 {
			continue
		}
		if limit > 0 && shown == limit {
			break
		}
		shown++
		parts := make([]string, len(t.Turns))
		for i, x := range t.Turns {
			status := x.Status
			if status == "" {
				status = "unanswered"
			}
			parts[i] = fmt.Sprintf("%d: %s %s", x.Turn, status, num(x.Reward))
			if x.WM != nil {
				parts[i] += " (" + num(x.WM) + ")"
			}
			if x.Unexecuted {
				parts[i] += " unexecuted"
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", t.Group, t.Sample, t.Turns[0].Source, strings.Join(parts, " | "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shown < n {
		fmt.Fprintf(w, "... %d more (--json for every turn's action and observation)\n", n-shown)
	}
	return nil
}

// clip shortens a program to n characters on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-3]) + "..."
}
