package worldmodel

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
)

// Defaults of `wmrl worldmodel fit` and `wmrl worldmodel eval`. The stored
// artefact (default.json) was built with DefaultFitSeed and
// DefaultSamplesPerTask on suite.DefaultSeed.
const (
	DefaultSamplesPerTask = 32
	DefaultFitSeed        = 1
	DefaultEvalSeed       = 2
)

// FitConfig says how to build a world model from logged executions.
type FitConfig struct {
	SamplesPerTask int    `json:"samples_per_task"`
	Seed           uint64 `json:"seed"`
	// Workers bounds concurrent executions; 0 means GOMAXPROCS.
	Workers int        `json:"workers"`
	Options FitOptions `json:"options"`
	// Features is the feature set to fit on; "" is FeaturesV1.
	Features FeatureSet `json:"features,omitempty"`
}

// DefaultFitConfig is the configuration of the stored artefact.
func DefaultFitConfig() FitConfig {
	return FitConfig{SamplesPerTask: DefaultSamplesPerTask, Seed: DefaultFitSeed, Options: DefaultFitOptions()}
}

// Fit logs executions of random valid programs on the suite's TRAINING
// tasks only (see Collect), featurises them and fits the model (see
// FitLinear). It returns the model and the logged records. The same suite,
// configuration and run function give the same model, byte for byte.
func Fit(ctx context.Context, s *suite.Suite, cfg FitConfig, run RunFunc) (*Model, []Record, error) {
	fs, err := ParseFeatureSet(string(cfg.Features))
	if err != nil {
		return nil, nil, fmt.Errorf("fit world model: %w", err)
	}
	tasks := s.Split(suite.Train)
	if len(tasks) == 0 {
		return nil, nil, fmt.Errorf("fit world model: suite %d has no training tasks", s.Options.Seed)
	}
	recs, err := Collect(ctx, tasks, cfg.SamplesPerTask, cfg.Seed, run, cfg.Workers)
	if err != nil {
		return nil, nil, fmt.Errorf("fit world model: %w", err)
	}
	examples, err := examplesOf(s, recs, fs)
	if err != nil {
		return nil, nil, fmt.Errorf("fit world model: %w", err)
	}
	m, err := FitLinear(examples, fs.Names(), cfg.Options)
	if err != nil {
		return nil, nil, err
	}
	m.setFeatures(fs)
	m.Fit.SuiteSeed = s.Options.Seed
	m.Fit.SuiteHash = s.Hash
	m.Fit.SamplesPerTask = cfg.SamplesPerTask
	m.Fit.Seed = cfg.Seed
	m.Fit.Tasks = len(tasks)
	return m, recs, nil
}

// setFeatures records the feature set on a fitted model: nothing for
// FeaturesV1, so that a v1 artefact keeps the bytes it had before feature
// sets existed.
func (m *Model) setFeatures(fs FeatureSet) {
	if fs == FeaturesV1 {
		m.Features = ""
		return
	}
	m.Features = fs
}

// examplesOf featurises logged records against their tasks' cards.
func examplesOf(s *suite.Suite, recs []Record, fs FeatureSet) ([]Example, error) {
	cards := map[string][]float64{}
	out := make([]Example, len(recs))
	for i, r := range recs {
		card, ok := cards[r.Task]
		if !ok {
			t, err := s.Task(r.Task)
			if err != nil {
				return nil, err
			}
			card = t.Card.Vector()
			cards[r.Task] = card
		}
		p, err := program.Parse(r.Program)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		out[i] = Example{Group: r.Task, X: fs.Features(card, p), Y: r.Score}
	}
	return out, nil
}

// Predict returns r_wm for program p on a task with card vector card.
func (m *Model) Predict(card []float64, p program.Program) float64 {
	return m.PredictFeatures(m.FeatureSet().Features(card, p))
}

// PredictText parses program text and predicts its score. A program that
// does not parse has no prediction: the error says why (its real score is
// the ladder's 0). A card vector of the wrong length is an error too.
// A Model is read-only after Load, so predictions may run concurrently.
func (m *Model) PredictText(card []float64, text string) (float64, error) {
	if len(card) != suite.VectorLen {
		return 0, fmt.Errorf("world model: card vector of length %d, want %d", len(card), suite.VectorLen)
	}
	p, err := program.Parse(text)
	if err != nil {
		return 0, fmt.Errorf("world model: %w", err)
	}
	return m.Predict(card, p), nil
}
