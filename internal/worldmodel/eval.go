package worldmodel

import (
	"context"
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/suite"
)

// DefaultBins is the number of equal-width bins of the calibration curve.
const DefaultBins = 10

// Report is the world model's quality on a set of tasks, from real
// executions: how well it orders programs within a task, its mean bias and
// its calibration curve.
type Report struct {
	SuiteSeed      uint64 `json:"suite_seed"`
	Split          string `json:"split"`
	Tasks          int    `json:"tasks"`
	SamplesPerTask int    `json:"samples_per_task"`
	Seed           uint64 `json:"seed"`
	Samples        int    `json:"samples"`
	// SpearmanWithinGroup is the mean over tasks of the Spearman correlation
	// between r_wm and r_env among a task's programs; SpearmanGroups tasks
	// had a defined correlation.
	SpearmanWithinGroup float64 `json:"spearman_within_group"`
	SpearmanGroups      int     `json:"spearman_groups"`
	// SpearmanPooled ignores the tasks: one correlation over all pairs.
	SpearmanPooled float64 `json:"spearman_pooled"`
	// MeanBias is mean(r_wm − r_env).
	MeanBias float64 `json:"mean_bias"`
	MeanWM   float64 `json:"mean_wm"`
	MeanEnv  float64 `json:"mean_env"`
	RMSE     float64 `json:"rmse"`
	// CalibrationError is the count-weighted mean over bins of
	// |mean r_wm − mean r_env| (the expected calibration error).
	CalibrationError float64 `json:"calibration_error"`
	// Calibration is the binned curve: r_wm cut into equal-width bins on
	// [0, 1]; empty bins are left out.
	Calibration []Bin `json:"calibration"`
	// AfterIsotonic is what a monotone recalibration of r_wm removes: the
	// same statistics after an isotonic map fitted on the other half of the
	// tasks (two folds: tasks in even and odd order of appearance), the
	// correction wmrl's debiasing makes from anchor pairs. Nil with fewer
	// than two tasks.
	AfterIsotonic *Recalibrated `json:"after_isotonic,omitempty"`
}

// Recalibrated are a report's statistics after recalibration.
type Recalibrated struct {
	SpearmanWithinGroup float64 `json:"spearman_within_group"`
	MeanBias            float64 `json:"mean_bias"`
	RMSE                float64 `json:"rmse"`
	CalibrationError    float64 `json:"calibration_error"`
}

// Bin is one point of the calibration curve.
type Bin struct {
	Lo      float64 `json:"lo"`
	Hi      float64 `json:"hi"`
	N       int     `json:"n"`
	MeanWM  float64 `json:"mean_wm"`
	MeanEnv float64 `json:"mean_env"`
}

// Summarize computes the report's statistics from pairs (wm[i], env[i])
// grouped by group[i]; bins is the number of calibration bins. The run
// description fields are left for the caller. It panics when the lengths
// differ.
func Summarize(group []string, wm, env []float64, bins int) Report {
	if len(group) != len(wm) || len(wm) != len(env) {
		panic("worldmodel: Summarize of slices with different lengths")
	}
	if bins < 1 {
		bins = DefaultBins
	}
	r := summarize(group, wm, env, bins)
	if cal, ok := crossCalibrate(group, wm, env); ok {
		c := summarize(group, cal, env, bins)
		r.AfterIsotonic = &Recalibrated{
			SpearmanWithinGroup: c.SpearmanWithinGroup,
			MeanBias:            c.MeanBias,
			RMSE:                c.RMSE,
			CalibrationError:    c.CalibrationError,
		}
	}
	return r
}

// crossCalibrate replaces every prediction by an isotonic map of it fitted
// on the pairs of the other fold of tasks (tasks alternate between two
// folds in order of first appearance). ok is false with fewer than two
// tasks.
func crossCalibrate(group []string, wm, env []float64) ([]float64, bool) {
	order, members := groupIndex(group)
	if len(order) < 2 {
		return nil, false
	}
	fold := make([]int, len(wm))
	for k, g := range order {
		for _, i := range members[g] {
			fold[i] = k % 2
		}
	}
	out := make([]float64, len(wm))
	for f := range 2 {
		var x, y []float64
		for i := range wm {
			if fold[i] != f {
				x, y = append(x, wm[i]), append(y, env[i])
			}
		}
		m, err := isotonic.Fit(x, y, nil)
		if err != nil {
			return nil, false // non-finite input: no recalibration to report
		}
		for i := range wm {
			if fold[i] == f {
				out[i] = m.Apply(wm[i])
			}
		}
	}
	return out, true
}

func summarize(group []string, wm, env []float64, bins int) Report {
	r := Report{Samples: len(wm)}
	if len(wm) == 0 {
		return r
	}
	r.SpearmanWithinGroup, r.SpearmanGroups = WithinGroupSpearman(group, wm, env)
	r.SpearmanPooled, _ = Spearman(wm, env)
	n := float64(len(wm))
	var se float64
	for i := range wm {
		r.MeanWM += wm[i] / n
		r.MeanEnv += env[i] / n
		se += (wm[i] - env[i]) * (wm[i] - env[i])
	}
	r.MeanBias = r.MeanWM - r.MeanEnv
	r.RMSE = math.Sqrt(se / n)
	cnt := make([]int, bins)
	sx := make([]float64, bins)
	sy := make([]float64, bins)
	for i := range wm {
		k := min(bins-1, max(0, int(wm[i]*float64(bins))))
		cnt[k]++
		sx[k] += wm[i]
		sy[k] += env[i]
	}
	for k := range bins {
		if cnt[k] == 0 {
			continue
		}
		c := float64(cnt[k])
		b := Bin{Lo: float64(k) / float64(bins), Hi: float64(k+1) / float64(bins), N: cnt[k], MeanWM: sx[k] / c, MeanEnv: sy[k] / c}
		r.Calibration = append(r.Calibration, b)
		r.CalibrationError += c / n * math.Abs(b.MeanWM-b.MeanEnv)
	}
	return r
}

// EvalConfig says which executions an evaluation makes.
type EvalConfig struct {
	Split          suite.Split `json:"split"`
	SamplesPerTask int         `json:"samples_per_task"`
	Seed           uint64      `json:"seed"`
	Workers        int         `json:"workers"`
	Bins           int         `json:"bins"`
}

// DefaultEvalConfig evaluates on the held-out tasks.
func DefaultEvalConfig() EvalConfig {
	return EvalConfig{Split: suite.HeldOut, SamplesPerTask: DefaultSamplesPerTask, Seed: DefaultEvalSeed, Bins: DefaultBins}
}

// Evaluate executes random valid programs on the tasks of one split (see
// Collect), predicts each with m, and summarises the pairs. It returns the
// report and the records (with real scores).
func Evaluate(ctx context.Context, m *Model, s *suite.Suite, cfg EvalConfig, run RunFunc) (Report, []Record, error) {
	tasks := s.Split(cfg.Split)
	if len(tasks) == 0 {
		return Report{}, nil, fmt.Errorf("evaluate world model: suite %d has no %s tasks", s.Options.Seed, cfg.Split)
	}
	recs, err := Collect(ctx, tasks, cfg.SamplesPerTask, cfg.Seed, run, cfg.Workers)
	if err != nil {
		return Report{}, nil, fmt.Errorf("evaluate world model: %w", err)
	}
	examples, err := examplesOf(s, recs, m.FeatureSet())
	if err != nil {
		return Report{}, nil, fmt.Errorf("evaluate world model: %w", err)
	}
	group := make([]string, len(examples))
	wm := make([]float64, len(examples))
	env := make([]float64, len(examples))
	for i, e := range examples {
		group[i], wm[i], env[i] = e.Group, m.PredictFeatures(e.X), e.Y
	}
	r := Summarize(group, wm, env, cfg.Bins)
	r.SuiteSeed, r.Split, r.Tasks = s.Options.Seed, string(cfg.Split), len(tasks)
	r.SamplesPerTask, r.Seed = cfg.SamplesPerTask, cfg.Seed
	return r, recs, nil
}
