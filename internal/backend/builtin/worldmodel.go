package builtin

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
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
type WorldModel struct {
	Model Predictor
}

var _ backend.WorldModel = (*WorldModel)(nil)

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
