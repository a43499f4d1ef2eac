package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// anchorsReport is the JSON output of wmrl worldmodel anchors.
type anchorsReport struct {
	Runs []string `json:"runs"`
	// Model is "recorded" (the scores the runs used) or the artefact's path.
	Model  string                 `json:"model"`
	Every  int                    `json:"every"`
	Ranges []worldmodel.StepRange `json:"ranges"`
	// Frozen, for runs whose world model was refreshed
	// (world_model.refresh), are the same ranges re-scored by the frozen
	// model the versions extend; Versions are the runs' versions.
	Frozen   []worldmodel.StepRange    `json:"frozen,omitempty"`
	Versions []store.WorldModelVersion `json:"versions,omitempty"`
	// Turns, for multi-turn runs (trajectory.turns > 1) and the recorded
	// scores, are the same measures per turn index, on the per-turn pairs:
	// every real turn's reward and the world model's grade of it, grouped
	// by (run, step, group).
	Turns []turnRanges `json:"turns,omitempty"`
}

// turnRanges are the step ranges of one turn index's pairs.
type turnRanges struct {
	Turn   int                    `json:"turn"`
	Ranges []worldmodel.StepRange `json:"ranges"`
}

// turnAnchors measures the world model per turn index on the per-turn
// pairs of runs, in turn order (none for single-shot runs).
func turnAnchors(pairs []store.TurnPair, every int) ([]turnRanges, error) {
	byTurn := map[int][]worldmodel.Pair{}
	var turns []int
	for _, p := range pairs {
		if _, ok := byTurn[p.Turn]; !ok {
			turns = append(turns, p.Turn)
		}
		byTurn[p.Turn] = append(byTurn[p.Turn], worldmodel.Pair{Group: p.Run + "/" + strconv.Itoa(p.Step) + "/" + strconv.Itoa(p.Group),
			Step: p.Step, WM: p.WM, Env: p.Env})
	}
	slices.Sort(turns)
	out := make([]turnRanges, 0, len(turns))
	for _, t := range turns {
		r, err := worldmodel.OnPolicy(byTurn[t], every)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", t, err)
		}
		out = append(out, turnRanges{Turn: t, Ranges: r})
	}
	return out, nil
}

// anchorRow is one anchor trajectory of a run.
type anchorRow struct {
	run store.Run
	tr  store.Trajectory
}

// anchorPairs are the rows' (r_wm, r_env) pairs, grouped by (run, step,
// group): r_wm as recorded, or re-scored by model when it is not nil.
func anchorPairs(rows []anchorRow, model *worldmodel.Model, suiteOf func(store.Run) (*suite.Suite, error)) ([]worldmodel.Pair, error) {
	pairs := make([]worldmodel.Pair, 0, len(rows))
	for _, row := range rows {
		id, tr := row.run.ID, row.tr
		var wm float64
		if tr.WMScore != nil {
			wm = *tr.WMScore
		}
		if model == nil && tr.WMScore == nil {
			return nil, fmt.Errorf("run %s step %d group %d sample %d: no world-model score recorded (re-score with --model)", id, tr.Step, tr.Group, tr.Sample)
		}
		if model != nil {
			s, err := suiteOf(row.run)
			if err != nil {
				return nil, err
			}
			task, err := s.Task(tr.TaskID)
			if err != nil {
				return nil, fmt.Errorf("run %s step %d group %d: %w", id, tr.Step, tr.Group, err)
			}
			if wm, err = model.PredictText(task.Card.Vector(), tr.Program); err != nil {
				return nil, fmt.Errorf("run %s step %d group %d sample %d: %w", id, tr.Step, tr.Group, tr.Sample, err)
			}
		}
		pairs = append(pairs, worldmodel.Pair{Group: id + "/" + strconv.Itoa(tr.Step) + "/" + strconv.Itoa(tr.Group),
			Step: tr.Step, WM: wm, Env: tr.Exec.Score})
	}
	return pairs, nil
}

func newWorldModelAnchorsCmd(cf *connFlags, options suiteOptionsFunc) *cobra.Command {
	var (
		asJSON     bool
		every      int
		modelPath  string
		frozenPath string
		executed   bool
	)
	cmd := &cobra.Command{
		Use:   "anchors RUN... [--every N] [--model PATH] [--executed] [--json]",
		Short: "Measure the world model on the programs runs actually sampled (their anchor groups)",
		Long: `anchors reads the anchor groups of one or more runs from Postgres: for each
anchor trajectory, the world model's score r_wm recorded during the run and
the real execution's score r_env of the same program. For every range of
--every steps it prints, over the runs together:

  groups     anchor groups (one task of one step of one run)
  ranked     groups whose within-group Spearman correlation is defined
             (both scores vary)
  spearman   mean within-group Spearman correlation of r_wm and r_env:
             how well the world model ordered the policy's own programs,
             which is what the world-model stream's advantages rest on
  tied       groups whose real scores are all equal (no real signal)
  bias       mean(r_wm - r_env)

wmrl worldmodel eval measures the model on random programs; this measures it
where training used it, and it falls as the policy specialises. --model PATH
re-scores the same programs with another artefact instead of the recorded
scores, to ask whether it would have ranked them better. Only modes with
anchors scored by the world model (wmrl, mix, debias, denoise) have them;
the anchor mode executes its anchor groups but scores nothing.

For runs whose world model was refreshed (world_model.refresh), the recorded
scores are those of the on-policy versions; the table then also shows, as
"frozen", the within-group Spearman and bias of the frozen model the versions
extend (--frozen, default the embedded one of the runs' world_model.features)
on the same pairs, and lists the versions.

For multi-turn runs (trajectory.turns > 1) the pairs above are the
trajectories' (the reduction over turns of r_wm and of r_env, max by
default), and a second table gives the same measures per turn index, on the
per-turn pairs of the turns table: every real turn's reward and the world
model's grade of it, within (run, step, group). It uses the recorded grades
only (not with --model or --executed).

--executed measures on every executed trajectory instead of the anchor
groups alone, each re-scored by --model (default: the embedded model): in
grpo runs every group is executed, so a grpo run is a test set of the
policy's own programs, step by step, four times the size of a wmrl run's
anchors, for a world model that never scored it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, runs []string) error {
			if err := intIn("every", every, 1, maxStep); err != nil {
				return err
			}
			var model *worldmodel.Model
			name := "recorded"
			if modelPath != "" || executed {
				m, n, err := loadModel(modelPath)
				if err != nil {
					return fmt.Errorf("--model: %w", err)
				}
				model, name = m, n
			}
			ctx := cmd.Context()
			st, err := cf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			suites := map[uint64]*suite.Suite{}
			suiteOf := func(r store.Run) (*suite.Suite, error) {
				cfg, err := runConfig(r)
				if err != nil {
					return nil, err
				}
				s := suites[cfg.SuiteSeed]
				if s == nil {
					if s, err = loadSuiteForCmd(cmd, options(cfg.SuiteSeed)); err != nil {
						return nil, err
					}
					suites[cfg.SuiteSeed] = s
				}
				return s, nil
			}
			var rows []anchorRow
			var versions []store.WorldModelVersion
			var turnPairs []store.TurnPair
			for _, id := range runs {
				r, err := findRun(ctx, st, id)
				if err != nil {
					return err
				}
				load := st.AnchorTrajectories
				if executed {
					load = st.ExecutedTrajectories
				}
				ts, err := load(ctx, id)
				if err != nil {
					return err
				}
				if len(ts) == 0 && executed {
					return fmt.Errorf("run %s (mode %s) has no executed trajectories", id, r.Mode)
				}
				if len(ts) == 0 {
					return fmt.Errorf("run %s (mode %s) has no executed anchor trajectories (--executed measures on all its executions)", id, r.Mode)
				}
				vs, err := st.WorldModelVersions(ctx, id)
				if err != nil {
					return err
				}
				versions = append(versions, vs...)
				tp, err := st.TurnPairs(ctx, id)
				if err != nil {
					return err
				}
				turnPairs = append(turnPairs, tp...)
				for _, tr := range ts {
					rows = append(rows, anchorRow{run: r, tr: tr})
				}
			}
			pairs, err := anchorPairs(rows, model, suiteOf)
			if err != nil {
				return err
			}
			ranges, err := worldmodel.OnPolicy(pairs, every)
			if err != nil {
				return err
			}
			rep := anchorsReport{Runs: runs, Model: name, Every: every, Ranges: ranges}
			if model == nil {
				// The per-turn pairs hold the recorded grades; a turn
				// after the first was sampled knowing the previous answer,
				// which --model does not re-score.
				if rep.Turns, err = turnAnchors(turnPairs, every); err != nil {
					return err
				}
			}
			if len(versions) > 0 && model == nil {
				// The runs' world model was refreshed: the recorded scores
				// are the on-policy versions'; re-score the same programs
				// with the frozen model the versions extend.
				frozen, err := frozenModel(frozenPath, rows)
				if err != nil {
					return fmt.Errorf("--frozen: %w", err)
				}
				for _, v := range versions {
					if v.Base != frozen.Checksum {
						return fmt.Errorf("run %s was refreshed from world model %.12s, --frozen is %.12s: pass the run's frozen model "+
							"(the worker's --world-model)", v.Run, v.Base, frozen.Checksum)
					}
				}
				fpairs, err := anchorPairs(rows, frozen, suiteOf)
				if err != nil {
					return err
				}
				if rep.Frozen, err = worldmodel.OnPolicy(fpairs, every); err != nil {
					return err
				}
				rep.Model = "recorded (refreshed)"
				rep.Versions = versions
			}
			if asJSON {
				return writeSuiteJSON(cmd.OutOrStdout(), rep)
			}
			return writeAnchors(cmd.OutOrStdout(), rep)
		},
	}
	uses(cmd, groupPostgres)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().IntVar(&every, "every", 10, "steps per range")
	cmd.Flags().StringVar(&modelPath, "model", "", "re-score with this world-model artefact (default: the scores the runs recorded)")
	cmd.Flags().BoolVar(&executed, "executed", false, "every executed trajectory (grpo runs: all), re-scored by --model, instead of the anchor groups")
	cmd.Flags().StringVar(&frozenPath, "frozen", "", "the frozen world model refreshed runs started from (default: the embedded one of the runs' world_model.features)")
	return cmd
}

// frozenModel is the frozen world model refreshed runs started from: the
// artefact at path, or the stored model of the runs' world_model.features
// (which must be the same for every run).
func frozenModel(path string, rows []anchorRow) (*worldmodel.Model, error) {
	if path != "" {
		m, _, err := loadModel(path)
		return m, err
	}
	set, seen := "", map[string]bool{}
	for _, row := range rows {
		if seen[row.run.ID] {
			continue
		}
		cfg, err := runConfig(row.run)
		if err != nil {
			return nil, err
		}
		if f := cfg.WorldModel.Features; len(seen) == 0 {
			set = f
		} else if f != set {
			return nil, fmt.Errorf("the runs have world_model.features %q and %q: measure them apart, or name the frozen model", set, f)
		}
		seen[row.run.ID] = true
	}
	fs, err := worldmodel.ParseFeatureSet(set)
	if err != nil {
		return nil, err
	}
	return worldmodel.DefaultFor(fs)
}

func writeAnchors(w io.Writer, rep anchorsReport) error {
	fmt.Fprintf(w, "world model: %s; runs: %s\n", rep.Model, strings.Join(rep.Runs, ", "))
	for _, v := range rep.Versions {
		fmt.Fprintf(w, "refreshed after step %d of %s: %.12s (%d pairs + %d base examples)\n", v.Step, v.Run, v.Hash, v.Pairs, v.BaseExamples)
	}
	spearman := func(r worldmodel.StepRange) string {
		if r.Ranked == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.3f", r.Spearman)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if rep.Frozen == nil {
		fmt.Fprintln(tw, "steps\tpairs\tgroups\tranked\tspearman\ttied\tbias\t")
		for _, r := range rep.Ranges {
			fmt.Fprintf(tw, "%d-%d\t%d\t%d\t%d\t%s\t%d\t%+.4f\t\n", r.From, r.To, r.Pairs, r.Groups, r.Ranked, spearman(r), r.Tied, r.Bias)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		return writeTurnAnchors(w, rep.Turns, spearman)
	}
	// Refreshed runs: the on-policy versions' Spearman next to the frozen
	// model's on the same pairs (the ranges are the same: the same pairs).
	fmt.Fprintln(tw, "steps\tpairs\tgroups\tranked\tspearman\tfrozen\ttied\tbias\tfrozen bias\t")
	for i, r := range rep.Ranges {
		f := rep.Frozen[i]
		fmt.Fprintf(tw, "%d-%d\t%d\t%d\t%d\t%s\t%s\t%d\t%+.4f\t%+.4f\t\n", r.From, r.To, r.Pairs, r.Groups, r.Ranked, spearman(r),
			spearman(f), r.Tied, r.Bias, f.Bias)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeTurnAnchors(w, rep.Turns, spearman)
}

// writeTurnAnchors prints the per-turn table of multi-turn runs (nothing
// for single-shot runs).
func writeTurnAnchors(w io.Writer, turns []turnRanges, spearman func(worldmodel.StepRange) string) error {
	if len(turns) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nper turn index (every real turn and the world model's grade of it):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "turn\tsteps\tpairs\tgroups\tranked\tspearman\ttied\tbias\t")
	for _, t := range turns {
		for _, r := range t.Ranges {
			fmt.Fprintf(tw, "%d\t%d-%d\t%d\t%d\t%d\t%s\t%d\t%+.4f\t\n", t.Turn, r.From, r.To, r.Pairs, r.Groups, r.Ranked,
				spearman(r), r.Tied, r.Bias)
		}
	}
	return tw.Flush()
}
