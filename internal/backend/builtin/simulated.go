package builtin

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/budget"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/seed"
)

// SimulatedWorldModel is a world model of controlled quality, for studying
// the method, never for training a real agent (world_model.backend:
// simulated): its score of a program is the program's real score (the
// executor run in process, outside the counted sandbox, its cost counted
// as a prediction's) degraded by a bias and Gaussian noise the run chooses
// (backend.Simulation), clamped to [0,1]. With no noise and no bias it is
// an oracle. The noise of an item is a function of the simulation's seed
// and the item's key only, so a retried scoring gives the same scores.
type SimulatedWorldModel struct {
	Tasks *Tasks
	// Timeout bounds one in-process execution (0: the budget's default
	// deadline); a program over the default budget is scored as its
	// refusal (a timeout), as the sandbox would.
	Timeout time.Duration
}

var (
	_ backend.WorldModel     = (*SimulatedWorldModel)(nil)
	_ backend.SettingsScorer = (*SimulatedWorldModel)(nil)
)

// Score is the oracle: ScoreSimulated with no noise and no bias.
func (w *SimulatedWorldModel) Score(ctx context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	return w.ScoreSimulated(ctx, items, backend.Simulation{})
}

// ScoreWith scores each item as the run's world_model.simulated says.
func (w *SimulatedWorldModel) ScoreWith(ctx context.Context, req backend.ScoreRequest) ([]backend.Prediction, error) {
	return w.ScoreSimulated(ctx, req.Items, req.Settings.Simulation)
}

// ScoreSimulated scores each item as s says.
func (w *SimulatedWorldModel) ScoreSimulated(ctx context.Context, items []backend.ScoreItem, s backend.Simulation) ([]backend.Prediction, error) {
	if err := s.Check(); err != nil {
		return nil, backend.Permanent(err)
	}
	timeout := w.Timeout
	if timeout == 0 {
		timeout = budget.DefaultDeadlineSeconds * time.Second
	}
	out := make([]backend.Prediction, len(items))
	for i, it := range items {
		task, err := w.Tasks.suiteTask(ctx, it.Task.Suite, it.Task.ID)
		if err != nil {
			return nil, err
		}
		key := seed.String(it.Key)
		job := &executor.Job{TaskID: task.ID, Program: it.Solution, Data: task.Data, Leaderboard: task.Leaderboard,
			Seed: seed.Derive(key, 1)}
		var res executor.Result
		if est, over := budget.OverBudget(job, budget.DefaultBudget); over {
			res = budget.Refusal(est, budget.DefaultBudget)
		} else {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			res, err = executor.Run(rctx, job)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s: simulated world model: %w", it.Key, err)
			}
		}
		z := rand.New(rand.NewPCG(seed.Derive(s.Seed, key), 0x5eed)).NormFloat64()
		v := res.Score + s.Bias + s.Noise*z
		out[i] = backend.Prediction{Graded: true, Score: math.Min(1, math.Max(0, v))}
	}
	return out, nil
}
