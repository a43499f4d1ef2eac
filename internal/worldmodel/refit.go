package worldmodel

import (
	"context"
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
)

// RunExample is one real execution of a training run the world model may
// learn from: the card vector of its task, the program text and its real
// score r_env. Group names its group (one task of one step), for the
// training metrics.
type RunExample struct {
	Group   string
	Card    []float64
	Program string
	Score   float64
	// Weight is the example's weight relative to the other run examples,
	// > 0; 0 means 1. Refit scales the run's weights to sum to their
	// number, so that the run as a whole counts as many base examples as
	// it has executions, as without weights, and only the share among
	// them moves: a refresh weighted toward the current policy
	// (world_model.refresh.half_life) gives older executions less and the
	// newest more.
	Weight float64
}

// BaseData regenerates the original training data of a frozen model from
// what its artefact records (Fit: suite seed, samples per task, seed): the
// same random programs on the same training tasks, executed by run, and
// checked by BaseExamples.
func BaseData(ctx context.Context, base *Model, s *suite.Suite, run RunFunc, workers int) ([]Record, []Example, error) {
	if err := checkBase(base, s); err != nil {
		return nil, nil, err
	}
	recs, err := Collect(ctx, s.Split(suite.Train), base.Fit.SamplesPerTask, base.Fit.Seed, run, workers)
	if err != nil {
		return nil, nil, fmt.Errorf("world model base data: %w", err)
	}
	ex, err := BaseExamples(base, s, recs)
	return recs, ex, err
}

func checkBase(base *Model, s *suite.Suite) error {
	if base.Fit.Base != "" {
		return fmt.Errorf("world model base data: the model is itself refreshed (from %.12s); start from a frozen model", base.Fit.Base)
	}
	if s.Options.Seed != base.Fit.SuiteSeed || (base.Fit.SuiteHash != "" && s.Hash != base.Fit.SuiteHash) {
		return fmt.Errorf("world model base data: the model was fitted on suite %d (%.12s), not %d (%.12s)",
			base.Fit.SuiteSeed, base.Fit.SuiteHash, s.Options.Seed, s.Hash)
	}
	return nil
}

// BaseExamples featurises a frozen model's training records (from BaseData,
// or a cache of them) and checks that refitting them alone gives the model
// back byte for byte, so a refreshed model extends exactly the model the run
// started with; records that do not (another suite, a stale artefact, a
// damaged cache) are an error.
func BaseExamples(base *Model, s *suite.Suite, recs []Record) ([]Example, error) {
	if err := checkBase(base, s); err != nil {
		return nil, err
	}
	fs := base.FeatureSet()
	ex, err := examplesOf(s, recs, fs)
	if err != nil {
		return nil, fmt.Errorf("world model base data: %w", err)
	}
	m, err := FitLinear(ex, fs.Names(), base.Fit.Options())
	if err != nil {
		return nil, fmt.Errorf("world model base data: %w", err)
	}
	m.setFeatures(fs)
	m.Fit.SuiteSeed, m.Fit.SuiteHash = s.Options.Seed, s.Hash
	m.Fit.SamplesPerTask, m.Fit.Seed, m.Fit.Tasks = base.Fit.SamplesPerTask, base.Fit.Seed, len(s.Split(suite.Train))
	got, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	want, err := base.Marshal()
	if err != nil {
		return nil, err
	}
	if string(got) != string(want) {
		return nil, fmt.Errorf("world model base data: refitting the regenerated data gives checksum %.12s, not the model's %.12s",
			checksumOf(got), checksumOf(want))
	}
	return ex, nil
}

func checksumOf(artefact []byte) string {
	m, err := Load(artefact)
	if err != nil {
		return "?"
	}
	return m.Checksum
}

// Refit retrains a frozen model on its original training data (baseData,
// from BaseData) plus a run's own executions, with the frozen model's
// regularisation: the on-policy world model. The result is a pure function
// of its inputs and their order; its Fit records the base model and the
// number of run examples. The refreshed model reads the base model's
// feature set. Run examples carry relative weights (RunExample.Weight),
// scaled to sum to the number of run examples; base examples weigh 1.
// When every weight is 1 the fit is the unweighted one, byte for byte.
// A run example whose program does not parse is an error (the world model
// scored it, so it parsed when the run sampled it).
func Refit(base *Model, baseData []Example, run []RunExample) (*Model, error) {
	if base.Fit.Base != "" {
		return nil, fmt.Errorf("refit world model: the base is itself refreshed (from %.12s)", base.Fit.Base)
	}
	fs := base.FeatureSet()
	examples := make([]Example, 0, len(baseData)+len(run))
	examples = append(examples, baseData...)
	weights, err := runWeights(len(baseData), run)
	if err != nil {
		return nil, err
	}
	for i, r := range run {
		if len(r.Card) != suite.VectorLen {
			return nil, fmt.Errorf("refit world model: run example %d (%s): card vector of length %d, want %d", i, r.Group, len(r.Card), suite.VectorLen)
		}
		p, err := program.Parse(r.Program)
		if err != nil {
			return nil, fmt.Errorf("refit world model: run example %d (%s): %w", i, r.Group, err)
		}
		examples = append(examples, Example{Group: "run/" + r.Group, X: fs.Features(r.Card, p), Y: r.Score})
	}
	sealed, err := base.Marshal()
	if err != nil {
		return nil, err
	}
	baseSum := checksumOf(sealed)
	m, err := FitWeighted(examples, weights, fs.Names(), base.Fit.Options())
	if err != nil {
		return nil, fmt.Errorf("refit world model: %w", err)
	}
	m.setFeatures(fs)
	info := base.Fit
	info.Samples, info.TrainMSE, info.TrainSpearman = m.Fit.Samples, m.Fit.TrainMSE, m.Fit.TrainSpearman
	info.Base, info.RunExamples = baseSum, len(run)
	m.Fit = info
	return m, nil
}

// runWeights returns the weights of base examples (1) and run examples
// (RunExample.Weight scaled to sum to len(run)), or nil when every run
// weight is 1 (or 0, meaning 1): the unweighted fit.
func runWeights(nBase int, run []RunExample) ([]float64, error) {
	var sum float64
	unweighted := true
	for i, r := range run {
		w := r.Weight
		if w == 0 {
			w = 1
		}
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("refit world model: run example %d (%s): weight %v, want finite and > 0", i, r.Group, r.Weight)
		}
		unweighted = unweighted && w == 1
		sum += w
	}
	if unweighted {
		return nil, nil
	}
	weights := make([]float64, nBase+len(run))
	for i := range nBase {
		weights[i] = 1
	}
	scale := float64(len(run)) / sum
	for i, r := range run {
		w := r.Weight
		if w == 0 {
			w = 1
		}
		// A weight scaled below the smallest positive float64 stays
		// positive.
		weights[nBase+i] = math.Max(w*scale, math.SmallestNonzeroFloat64)
	}
	return weights, nil
}
