package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

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
}

func newWorldModelAnchorsCmd(cf *connFlags, options suiteOptionsFunc) *cobra.Command {
	var (
		asJSON    bool
		every     int
		modelPath string
	)
	cmd := &cobra.Command{
		Use:   "anchors RUN... [--every N] [--model PATH] [--json]",
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
the anchor mode executes its anchor groups but scores nothing.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, runs []string) error {
			if err := intIn("every", every, 1, maxStep); err != nil {
				return err
			}
			var model *worldmodel.Model
			name := "recorded"
			if modelPath != "" {
				m, err := loadModelFile(modelPath)
				if err != nil {
					return fmt.Errorf("--model: %w", err)
				}
				model, name = m, modelPath
			}
			ctx := cmd.Context()
			st, err := cf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			suites := map[uint64]*suite.Suite{}
			var pairs []worldmodel.Pair
			for _, id := range runs {
				r, err := findRun(ctx, st, id)
				if err != nil {
					return err
				}
				ts, err := st.AnchorTrajectories(ctx, id)
				if err != nil {
					return err
				}
				if len(ts) == 0 {
					return fmt.Errorf("run %s (mode %s) has no executed anchor trajectories", id, r.Mode)
				}
				var s *suite.Suite
				if model != nil {
					cfg, err := runConfig(r)
					if err != nil {
						return err
					}
					if s = suites[cfg.SuiteSeed]; s == nil {
						if s, err = loadSuiteForCmd(cmd, options(cfg.SuiteSeed)); err != nil {
							return err
						}
						suites[cfg.SuiteSeed] = s
					}
				}
				for _, tr := range ts {
					wm := *tr.WMScore
					if model != nil {
						task, err := s.Task(tr.TaskID)
						if err != nil {
							return fmt.Errorf("run %s step %d group %d: %w", id, tr.Step, tr.Group, err)
						}
						if wm, err = model.PredictText(task.Card.Vector(), tr.Program); err != nil {
							return fmt.Errorf("run %s step %d group %d sample %d: %w", id, tr.Step, tr.Group, tr.Sample, err)
						}
					}
					pairs = append(pairs, worldmodel.Pair{Group: id + "/" + strconv.Itoa(tr.Step) + "/" + strconv.Itoa(tr.Group),
						Step: tr.Step, WM: wm, Env: tr.Exec.Score})
				}
			}
			ranges, err := worldmodel.OnPolicy(pairs, every)
			if err != nil {
				return err
			}
			rep := anchorsReport{Runs: runs, Model: name, Every: every, Ranges: ranges}
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
	return cmd
}

func writeAnchors(w io.Writer, rep anchorsReport) error {
	fmt.Fprintf(w, "world model: %s; runs: %s\n", rep.Model, strings.Join(rep.Runs, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "steps\tpairs\tgroups\tranked\tspearman\ttied\tbias\t")
	for _, r := range rep.Ranges {
		sp := "n/a"
		if r.Ranked > 0 {
			sp = fmt.Sprintf("%.3f", r.Spearman)
		}
		fmt.Fprintf(tw, "%d-%d\t%d\t%d\t%d\t%s\t%d\t%+.4f\t\n", r.From, r.To, r.Pairs, r.Groups, r.Ranked, sp, r.Tied, r.Bias)
	}
	return tw.Flush()
}
