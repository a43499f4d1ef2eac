package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tabular"
)

// suiteOptionsFunc gives the suite options for a suite seed. The command
// line uses suite.DefaultOptions; tests pass a small suite.
type suiteOptionsFunc func(seed uint64) suite.Options

// loadSuiteForCmd loads (or builds and caches) the suite for a seed, writing a
// progress note to the command's stderr while it is being built.
func loadSuiteForCmd(cmd *cobra.Command, opts suite.Options) (*suite.Suite, error) {
	l := suite.Loader{Progress: cmd.ErrOrStderr()}
	return l.Load(cmd.Context(), opts)
}

// maxTaskID bounds a task id given on the command line (ids are short:
// "train-07").
const maxTaskID = 256

// checkTaskID refuses an empty or overlong task id before the suite loads.
func checkTaskID(what, id string) error {
	if id == "" || len(id) > maxTaskID {
		return usagef("%s: %d bytes, want a task id of 1..%d (see wmrl suite list)", what, len(id), maxTaskID)
	}
	return nil
}

// addSuiteSeedFlag adds --suite-seed to cmd, stored in *seed.
func addSuiteSeedFlag(cmd *cobra.Command, seed *uint64) {
	cmd.Flags().Uint64Var(seed, "suite-seed", suite.DefaultSeed,
		"seed of the built-in task suite (another seed gives a fresh suite nobody tuned on)")
}

func newSuiteCmd() *cobra.Command { return newSuiteCmdWith(suite.DefaultOptions) }

func newSuiteCmdWith(options suiteOptionsFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "List and show the tasks of the built-in tabular research suite",
		Long: `The built-in suite is a deterministic set of tabular ML research tasks
(regression and binary classification in several structure families), split
into training and held-out tasks. It is generated from a suite seed
(--suite-seed, default fixed), built once (about a minute the first time) and
cached under $WMRL_CACHE (default: the user cache directory, wmrl/) with a
content hash, so every worker sees the same tasks.`,
	}
	cmd.AddCommand(newSuiteListCmd(options), newSuiteShowCmd(options))
	return cmd
}

// suiteListEntry is one element of wmrl suite list --json.
type suiteListEntry struct {
	ID     string `json:"id"`
	Split  string `json:"split"`
	Kind   string `json:"kind"`
	Family string `json:"family"`
}

func newSuiteListCmd(options suiteOptionsFunc) *cobra.Command {
	var (
		seed   uint64
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [--suite-seed N] [--json]",
		Short: "List the suite's tasks: id, split, kind, family",
		Long: `list prints every task of the suite in order: its id, split (train or
heldout), kind (regression or classification), family, and size.

--json prints a list of {id, split, kind, family}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadSuiteForCmd(cmd, options(seed))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				list := make([]suiteListEntry, len(s.Tasks))
				for i, t := range s.Tasks {
					list[i] = suiteListEntry{ID: t.ID, Split: string(t.Split), Kind: string(t.Kind), Family: string(t.Family)}
				}
				return writeSuiteJSON(out, list)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSPLIT\tKIND\tFAMILY\tTRAIN ROWS\tFEATURES")
			for _, t := range s.Tasks {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", t.ID, t.Split, t.Kind, t.Family, t.Card.TrainRows, len(t.Card.Features))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%d tasks (%d train, %d held-out), suite seed %d, hash %s\n",
				len(s.Tasks), len(s.Split(suite.Train)), len(s.Split(suite.HeldOut)), s.Options.Seed, s.Hash)
			return err
		},
	}
	addSuiteSeedFlag(cmd, &seed)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON list of {id, split, kind, family}")
	return cmd
}

// suiteShowReport is wmrl suite show --json.
type suiteShowReport struct {
	ID             string     `json:"id"`
	Split          string     `json:"split"`
	Kind           string     `json:"kind"`
	Family         string     `json:"family"`
	Question       string     `json:"question"`
	Metric         string     `json:"metric"`
	Card           suite.Card `json:"card"`
	ExampleProgram string     `json:"example_program"`
	Leaderboard    []float64  `json:"leaderboard"`
	SuiteSeed      uint64     `json:"suite_seed"`
	SuiteHash      string     `json:"suite_hash"`
}

func newSuiteShowCmd(options suiteOptionsFunc) *cobra.Command {
	var (
		seed   uint64
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show TASK [--suite-seed N] [--json]",
		Short: "Show a task: its research question, data card and an example program",
		Long: `show prints one task: the research question, the data card the agent sees
(sizes, per-feature and target summaries of the train split; the test labels
stay hidden), the metric, the leaderboard of the reference panel, and
example_program, the panel's best program on this task.

--json prints one object: id, split, kind, family, question, metric, card,
example_program, leaderboard (best first), suite_seed, suite_hash.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTaskID("TASK", args[0]); err != nil {
				return err
			}
			s, err := loadSuiteForCmd(cmd, options(seed))
			if err != nil {
				return err
			}
			t, err := s.Task(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeSuiteJSON(out, suiteShowReport{
					ID: t.ID, Split: string(t.Split), Kind: string(t.Kind), Family: string(t.Family),
					Question: t.Question, Metric: t.Metric, Card: t.Card, ExampleProgram: t.ExampleProgram,
					Leaderboard: t.Leaderboard, SuiteSeed: s.Options.Seed, SuiteHash: s.Hash,
				})
			}
			return writeTask(out, t)
		},
	}
	addSuiteSeedFlag(cmd, &seed)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task as one JSON object")
	return cmd
}

// writeTask prints a task for people.
func writeTask(w io.Writer, t *suite.Task) error {
	c := t.Card
	lb := t.Leaderboard
	fmt.Fprintf(w, "task      %s (%s, %s, %s)\n", t.ID, t.Split, t.Kind, t.Family)
	fmt.Fprintf(w, "question  %s\n", t.Question)
	if len(lb) == 0 {
		fmt.Fprintf(w, "metric    %s, higher is better; no reference panel\n\n", t.Metric)
	} else {
		fmt.Fprintf(w, "metric    %s, higher is better; reference panel: best %.4f, median %.4f, worst %.4f (%d pipelines)\n\n",
			t.Metric, lb[0], lb[len(lb)/2], lb[len(lb)-1], len(lb))
	}
	fmt.Fprintf(w, "data card: %d train rows, %d hidden test rows, %d features\n", c.TrainRows, c.TestRows, len(c.Features))
	if c.Kind == tabular.Classification {
		fmt.Fprintf(w, "  target: %.1f%% positive\n", 100*c.Target.PositiveFrac)
	} else {
		fmt.Fprintf(w, "  target: mean %.4g, std %.4g, skew %.2f, outliers %.1f%%\n",
			c.Target.Mean, c.Target.Std, c.Target.Skew, 100*c.Target.OutlierFrac)
	}
	fmt.Fprintf(w, "  max |corr(x², y)| %.3f, max |corr(xa·xb, y)| %.3f, mean |corr(xa, xb)| %.3f\n",
		c.MaxSquareCorr, c.MaxPairCorr, c.MeanFeatureCorr)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  feature\tmean\tstd\tskew\toutliers\tcorr(y)\t")
	for _, f := range c.Features {
		fmt.Fprintf(tw, "  %s\t%.4g\t%.4g\t%.2f\t%.1f%%\t%+.3f\t\n", f.Name, f.Mean, f.Std, f.Skew, 100*f.OutlierFrac, f.CorrTarget)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nexample_program\n  %s\n", t.ExampleProgram)
	return err
}

// writeSuiteJSON prints v as indented JSON.
func writeSuiteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
