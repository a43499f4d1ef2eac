package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/diskspace"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// Predictor predicts the reward of a program on a task from the task's card
// vector and the program's text (*worldmodel.Model).
type Predictor interface {
	PredictText(card []float64, text string) (float64, error)
}

var _ Predictor = (*worldmodel.Model)(nil)

// WorldModel is the frozen built-in world model as a backend.WorldModel. It
// always grades; a program it cannot read is a permanent error (the policy
// only samples programs of its grammar).
//
// When its Model is a *worldmodel.Model it is also a backend.Refresher: a
// refresh refits the model's regression on its original training data
// (regenerated from what the artefact records, checked to give the model
// back, and kept in memory and, with CacheDir, on disk) plus the run's
// executions (worldmodel.Refit).
type WorldModel struct {
	Model Predictor
	// Suites gives the suite the frozen model was fitted on, for its
	// training data; Run executes that data's programs (nil:
	// worldmodel.ExecutorRun, in process, as `wmrl worldmodel fit` does).
	Suites Suites
	Run    worldmodel.RunFunc
	// CacheDir, when set, keeps the frozen model's training records
	// (worldmodel-base-<checksum>.json): regenerating them executes
	// samples_per_task programs on every training task once per process
	// otherwise.
	CacheDir string

	mu   sync.Mutex
	base []worldmodel.Example
}

var (
	_ backend.WorldModel = (*WorldModel)(nil)
	_ backend.Refresher  = (*WorldModel)(nil)
)

// Score predicts each item from its task's features and its program text.
func (w *WorldModel) Score(ctx context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	out := make([]backend.Prediction, len(items))
	for i, it := range items {
		v, err := w.Model.PredictText(it.Task.Features, it.Solution)
		if err != nil {
			return nil, backend.Permanent(fmt.Errorf("%s: world model: %w", it.Key, err))
		}
		out[i] = backend.Prediction{Graded: true, Score: v}
	}
	return out, nil
}

// frozen returns the model as a *worldmodel.Model, or a permanent error.
func (w *WorldModel) frozen() (*worldmodel.Model, error) {
	m, ok := w.Model.(*worldmodel.Model)
	if !ok || m == nil {
		return nil, backend.Permanent(errors.New("world model: this worker's built-in model cannot be retrained (not a worldmodel artefact)"))
	}
	return m, nil
}

// Refresh refits the frozen model on its training data plus items.
func (w *WorldModel) Refresh(ctx context.Context, items []backend.TrainItem) (backend.Refreshed, error) {
	base, err := w.frozen()
	if err != nil {
		return backend.Refreshed{}, err
	}
	data, err := w.baseData(ctx, base)
	if err != nil {
		return backend.Refreshed{}, err
	}
	run := make([]worldmodel.RunExample, len(items))
	for i, it := range items {
		if !(it.Score >= 0 && it.Score <= 1) {
			return backend.Refreshed{}, backend.Permanent(fmt.Errorf("%s: refresh: score %v, want [0,1]", it.Key, it.Score))
		}
		if !(it.Weight >= 0) || math.IsInf(it.Weight, 0) {
			return backend.Refreshed{}, backend.Permanent(fmt.Errorf("%s: refresh: weight %v, want finite and >= 0", it.Key, it.Weight))
		}
		run[i] = worldmodel.RunExample{Group: it.Group, Card: it.Task.Features, Program: it.Solution, Score: it.Score, Weight: it.Weight}
	}
	m, err := worldmodel.Refit(base, data, run)
	if err != nil {
		return backend.Refreshed{}, backend.Permanent(err)
	}
	b, err := m.Marshal()
	if err != nil {
		return backend.Refreshed{}, err
	}
	return backend.Refreshed{Artefact: b, Base: m.Fit.Base, BaseExamples: len(data), TrainMSE: m.Fit.TrainMSE,
		TrainSpearman: m.Fit.TrainSpearman}, nil
}

// Open loads a refreshed artefact as a world model.
func (w *WorldModel) Open(artefact []byte) (backend.WorldModel, error) {
	m, err := worldmodel.Load(artefact)
	if err != nil {
		return nil, backend.Permanent(err)
	}
	return &WorldModel{Model: m}, nil
}

// baseData returns the frozen model's training examples: from memory, from
// the cache directory, or regenerated (worldmodel.BaseData); each is
// checked to give the model back.
func (w *WorldModel) baseData(ctx context.Context, base *worldmodel.Model) ([]worldmodel.Example, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.base != nil {
		return w.base, nil
	}
	if w.Suites == nil {
		return nil, backend.Permanent(errors.New("world model: no suites to regenerate the frozen model's training data from"))
	}
	s, err := w.Suites.Suite(ctx, base.Fit.SuiteSeed)
	if err != nil {
		return nil, fmt.Errorf("world model base data: %w", err)
	}
	sealed, err := base.Marshal()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(sealed)
	path := ""
	if w.CacheDir != "" {
		path = filepath.Join(w.CacheDir, "worldmodel-base-"+hex.EncodeToString(sum[:8])+".json")
		if b, err := os.ReadFile(path); err == nil {
			var recs []worldmodel.Record
			if json.Unmarshal(b, &recs) == nil {
				if ex, err := worldmodel.BaseExamples(base, s, recs); err == nil {
					w.base = ex
					return ex, nil
				}
			}
			// A damaged or stale cache is regenerated below.
		}
	}
	run := w.Run
	if run == nil {
		run = worldmodel.ExecutorRun
	}
	recs, ex, err := worldmodel.BaseData(ctx, base, s, run, 0)
	if err != nil {
		return nil, backend.Permanent(err)
	}
	if path != "" {
		if err := writeFileAtomic(path, recs); err != nil {
			return nil, fmt.Errorf("world model base data cache: %w", err)
		}
	}
	w.base = ex
	return ex, nil
}

func writeFileAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return diskspace.Annotate(err, path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return diskspace.Annotate(err, path)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return diskspace.Annotate(err, path)
}
