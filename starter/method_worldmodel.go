package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

func newWorldModelCmd(cf *connFlags) *cobra.Command {
	return newWorldModelCmdWith(cf, suite.DefaultOptions)
}

func newWorldModelCmdWith(cf *connFlags, options suiteOptionsFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worldmodel",
		Short: "Fit and evaluate the frozen world model of the built-in suite",
		Long: `The world model predicts a program's execution score r_wm in [0, 1] from the
task's data card and the program text, without running it: a ridge
regression on hand-made features, fitted in the space of a link function
(the stored model: log, read back as min(1, exp(z))). It is trained offline
on logged executions of random valid programs on the TRAINING tasks only,
and is deliberately imperfect: it ranks programs within a task usefully but
is biased and miscalibrated, which is what wmrl's debiasing and denoising
correct.

The stored model (embedded in wmrl) is rebuilt byte for byte by
  wmrl worldmodel fit --out internal/worldmodel/default.json

eval measures it on random programs of held-out tasks; anchors measures it on
the programs training runs actually sampled (their anchor groups).`,
	}
	cmd.AddCommand(newWorldModelFitCmd(options), newWorldModelEvalCmd(options), newWorldModelAnchorsCmd(cf, options),
		newWorldModelOnPolicyCmd(options))
	return cmd
}

// timedRun wraps a RunFunc and sums the wall time of its executions.
type timedRun struct {
	run   worldmodel.RunFunc
	mu    sync.Mutex
	n     int
	total time.Duration
}

func (t *timedRun) Run(ctx context.Context, task *suite.Task, prog string, seed uint64) (float64, error) {
	start := time.Now()
	s, err := t.run(ctx, task, prog, seed)
	d := time.Since(start)
	t.mu.Lock()
	t.n++
	t.total += d
	t.mu.Unlock()
	return s, err
}

func (t *timedRun) mean() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return 0
	}
	return t.total.Seconds() / float64(t.n)
}

// fitSummary is wmrl worldmodel fit --json.
type fitSummary struct {
	Out      string             `json:"out"`
	SHA256   string             `json:"sha256"`
	Fit      worldmodel.FitInfo `json:"fit"`
	Features int                `json:"features"`
	// ExecSecondsMean is the mean wall time of one logged execution.
	ExecSecondsMean float64 `json:"exec_seconds_mean"`
}

func newWorldModelFitCmd(options suiteOptionsFunc) *cobra.Command {
	var (
		suiteSeed uint64
		cfg       = worldmodel.DefaultFitConfig()
		out       string
		logPath   string
		asJSON    bool
		features  string
	)
	cmd := &cobra.Command{
		Use:   "fit [--suite-seed N] [--samples-per-task N] [--seed N] [--features v1|v2] [--out PATH]",
		Short: "Fit the world model on logged executions of the training tasks",
		Long: `fit samples --samples-per-task random valid programs for every TRAINING task
of the suite (a uniformly random legal token at each position of the program
grammar; sample j of task i drawn from a seed derived from (--seed, i, j)),
executes each in-process with the executor (no sandbox; at most GOMAXPROCS at
a time), fits the model on the logged (task, program, score) triples and
writes the artefact to --out. Held-out tasks are never executed.

The same flags give the same artefact byte for byte; with the defaults it is
the stored model, internal/worldmodel/default.json, and with --features v2
the stored v2 model (world_model.features: v2),
internal/worldmodel/default-v2.json. --features picks the feature set: v1,
the stored model's, or v2, which adds each family's hyperparameters against
the task's card. --log writes the logged executions as JSON lines.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFitFlags(cfg.SamplesPerTask, cfg.Options.Lambda); err != nil {
				return err
			}
			set, err := worldmodel.ParseFeatureSet(features)
			if err != nil {
				return usagef("--features: %v", err)
			}
			cfg.Features = set
			s, err := loadSuiteForCmd(cmd, options(suiteSeed))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "executing %d programs on each of %d training tasks...\n",
				cfg.SamplesPerTask, len(s.Split(suite.Train)))
			tr := &timedRun{run: worldmodel.ExecutorRun}
			m, recs, err := worldmodel.Fit(cmd.Context(), s, cfg, tr.Run)
			if err != nil {
				return err
			}
			art, err := m.Marshal()
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, art, 0o644); err != nil {
				return fmt.Errorf("write world model: %w", err)
			}
			if logPath != "" {
				if err := writeRecords(logPath, recs); err != nil {
					return err
				}
			}
			sum := sha256.Sum256(art)
			fs := fitSummary{Out: out, SHA256: hex.EncodeToString(sum[:]), Fit: m.Fit, Features: len(m.Weights), ExecSecondsMean: tr.mean()}
			if asJSON {
				return writeSuiteJSON(cmd.OutOrStdout(), fs)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(),
				"wrote %s (sha256 %s)\n%d executions on %d training tasks (suite seed %d), %d features, lambda %g\ntraining fit: within-group Spearman %.3f, MSE %.4f; mean execution %.1f ms\n",
				out, fs.SHA256, m.Fit.Samples, m.Fit.Tasks, m.Fit.SuiteSeed, fs.Features, m.Fit.Lambda,
				m.Fit.TrainSpearman, m.Fit.TrainMSE, 1000*fs.ExecSecondsMean)
			return err
		},
	}
	addSuiteSeedFlag(cmd, &suiteSeed)
	f := cmd.Flags()
	f.IntVar(&cfg.SamplesPerTask, "samples-per-task", cfg.SamplesPerTask, "random programs executed per training task")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the program samples and their executions")
	f.Float64Var(&cfg.Options.Lambda, "lambda", cfg.Options.Lambda, "ridge penalty per example on standardised features")
	f.StringVar(&out, "out", "worldmodel.json", "where to write the artefact")
	f.StringVar(&features, "features", string(worldmodel.FeaturesV1), "feature set: v1 (the stored model's) or v2")
	f.StringVar(&logPath, "log", "", "also write the logged executions (JSON lines) here")
	f.BoolVar(&asJSON, "json", false, "print a JSON summary")
	return cmd
}

// maxSamplesPerTask bounds --samples-per-task: each is one execution per
// task, and the fit holds them all in memory.
const maxSamplesPerTask = 10_000

// checkFitFlags refuses the fit's flags out of their ranges.
func checkFitFlags(samples int, lambda float64) error {
	if err := intIn("samples-per-task", samples, 1, maxSamplesPerTask); err != nil {
		return err
	}
	return floatIn("lambda", lambda, 0, 1e6)
}

func writeRecords(path string, recs []worldmodel.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return fmt.Errorf("write log: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	return nil
}

// evalReport is wmrl worldmodel eval --json: the report plus costs.
type evalReport struct {
	worldmodel.Report
	Model string `json:"model"`
	// ExecSecondsMean is the mean wall time of one real execution,
	// PredictSecondsMean of one prediction (features and score), and
	// CostRatio their ratio.
	ExecSecondsMean    float64 `json:"exec_seconds_mean"`
	PredictSecondsMean float64 `json:"predict_seconds_mean"`
	CostRatio          float64 `json:"cost_ratio"`
}

func newWorldModelEvalCmd(options suiteOptionsFunc) *cobra.Command {
	var (
		suiteSeed uint64
		cfg       = worldmodel.DefaultEvalConfig()
		split     string
		modelPath string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "eval [--suite-seed N] [--samples-per-task N] [--json]",
		Short: "Measure the world model against real executions on held-out tasks",
		Long: `eval samples --samples-per-task random valid programs for every HELD-OUT task
(seeds derived from --seed), executes them in-process, predicts each with the
world model (the stored one, or --model PATH) and reports:

  spearman_within_group  mean over tasks of the Spearman correlation between
                         r_wm and r_env among the task's programs
  mean_bias              mean(r_wm - r_env)
  calibration            r_wm cut into equal-width bins: per bin the count,
                         mean r_wm and mean r_env (a calibrated model has
                         mean_wm = mean_env in every bin)

and the cost of a prediction against that of an execution. after_isotonic
gives the same statistics after a monotone (isotonic) map of r_wm fitted on
the other half of the tasks: how much of the miscalibration a debiasing map
removes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := intIn("samples-per-task", cfg.SamplesPerTask, 1, maxSamplesPerTask); err != nil {
				return err
			}
			cfg.Split = suite.Split(split)
			if cfg.Split != suite.Train && cfg.Split != suite.HeldOut {
				return usagef("--split must be %s or %s, got %q", suite.Train, suite.HeldOut, clipArg(split))
			}
			m, name, err := loadModel(modelPath)
			if err != nil {
				return err
			}
			s, err := loadSuiteForCmd(cmd, options(suiteSeed))
			if err != nil {
				return err
			}
			tr := &timedRun{run: worldmodel.ExecutorRun}
			rep, recs, err := worldmodel.Evaluate(cmd.Context(), m, s, cfg, tr.Run)
			if err != nil {
				return err
			}
			er := evalReport{Report: rep, Model: name, ExecSecondsMean: tr.mean(), PredictSecondsMean: predictCost(m, s, recs)}
			if er.PredictSecondsMean > 0 {
				er.CostRatio = er.ExecSecondsMean / er.PredictSecondsMean
			}
			if asJSON {
				return writeSuiteJSON(cmd.OutOrStdout(), er)
			}
			return writeEval(cmd.OutOrStdout(), er)
		},
	}
	addSuiteSeedFlag(cmd, &suiteSeed)
	f := cmd.Flags()
	f.IntVar(&cfg.SamplesPerTask, "samples-per-task", cfg.SamplesPerTask, "random programs executed per task")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the program samples and their executions")
	f.StringVar(&split, "split", string(suite.HeldOut), "tasks to evaluate on: heldout or train")
	f.StringVar(&modelPath, "model", "", "world model artefact to evaluate (default: the stored one)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func loadModel(path string) (*worldmodel.Model, string, error) {
	if path == "" {
		m, err := worldmodel.Default()
		return m, "default", err
	}
	m, err := loadModelFile(path)
	return m, path, err
}

// maxModelBytes bounds a world-model artefact read from a file (the stored
// one has 14 KB).
const maxModelBytes = 16 << 20

// loadModelFile reads a world-model artefact, bounded by maxModelBytes.
func loadModelFile(path string) (*worldmodel.Model, error) {
	b, err := readFileMax(path, maxModelBytes)
	if err != nil {
		return nil, fmt.Errorf("read world model: %w", err)
	}
	m, err := worldmodel.Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// predictCost measures the mean wall time of one prediction (parse-free:
// features from the card and program, then the score) over the evaluated
// programs, repeated until at least 50 ms have passed.
func predictCost(m *worldmodel.Model, s *suite.Suite, recs []worldmodel.Record) float64 {
	type item struct {
		card []float64
		text string
	}
	items := make([]item, 0, len(recs))
	for _, r := range recs {
		t, err := s.Task(r.Task)
		if err != nil {
			continue
		}
		items = append(items, item{t.Card.Vector(), r.Program})
	}
	if len(items) == 0 {
		return 0
	}
	n := 0
	start := time.Now()
	for time.Since(start) < 50*time.Millisecond {
		for _, it := range items {
			if _, err := m.PredictText(it.card, it.text); err == nil {
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return time.Since(start).Seconds() / float64(n)
}

func writeEval(w io.Writer, r evalReport) error {
	fmt.Fprintf(w, "world model %s on %d %s tasks of suite %d, %d programs each (seed %d)\n",
		r.Model, r.Tasks, r.Split, r.SuiteSeed, r.SamplesPerTask, r.Seed)
	fmt.Fprintf(w, "spearman_within_group  %.3f  (mean over %d tasks; pooled %.3f)\n", r.SpearmanWithinGroup, r.SpearmanGroups, r.SpearmanPooled)
	fmt.Fprintf(w, "mean_bias              %+.4f  (mean r_wm %.4f, mean r_env %.4f)\n", r.MeanBias, r.MeanWM, r.MeanEnv)
	fmt.Fprintf(w, "rmse                   %.4f\n", r.RMSE)
	fmt.Fprintf(w, "calibration_error      %.4f  (count-weighted mean |mean r_wm - mean r_env| per bin)\n", r.CalibrationError)
	if a := r.AfterIsotonic; a != nil {
		fmt.Fprintf(w, "after isotonic         spearman %.3f, mean_bias %+.4f, rmse %.4f, calibration_error %.4f  (map cross-fitted on the other half of the tasks)\n",
			a.SpearmanWithinGroup, a.MeanBias, a.RMSE, a.CalibrationError)
	}
	fmt.Fprintf(w, "cost                   execution %.2f ms, prediction %.2f µs, ratio %.0fx\n\n",
		1000*r.ExecSecondsMean, 1e6*r.PredictSecondsMean, r.CostRatio)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "r_wm bin\tn\tmean r_wm\tmean r_env\t")
	for _, b := range r.Calibration {
		fmt.Fprintf(tw, "[%.1f, %.1f)\t%d\t%.3f\t%.3f\t\n", b.Lo, b.Hi, b.N, b.MeanWM, b.MeanEnv)
	}
	return tw.Flush()
}
