// Package collect reads a benchmark run's records from Postgres into the
// model of package reproduce: completed steps with their metrics, the
// training executions and world-model calls counted from the trajectories
// table, and the held-out evaluations counted apart. A run still going is
// read as far as it got.
package collect

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/reproduce"
	"github.com/wmrl/wmrl/internal/store"
)

// Reader is the part of the store Run reads.
type Reader interface {
	Run(ctx context.Context, id string) (store.Run, error)
	Steps(ctx context.Context, run string) ([]store.Step, error)
	RunUsage(ctx context.Context, run string) ([]store.StepUsage, error)
	RunEvaluations(ctx context.Context, run string) ([]store.EvalUsage, error)
}

var _ Reader = (*store.Store)(nil)

// Run reads run id's record: its completed steps in order, each with the
// held-out evaluation of the checkpoint it produced (version step+1) when
// there is one, and the run's wall-clock time (from its creation to its
// completion, or to its last completed step while it is not completed).
// It also returns the stored run.
func Run(ctx context.Context, r Reader, id string) (reproduce.Record, store.Run, error) {
	run, err := r.Run(ctx, id)
	if err != nil {
		return reproduce.Record{}, run, fmt.Errorf("collect: %w", err)
	}
	steps, err := r.Steps(ctx, id)
	if err != nil {
		return reproduce.Record{}, run, fmt.Errorf("collect: %w", err)
	}
	usage, err := r.RunUsage(ctx, id)
	if err != nil {
		return reproduce.Record{}, run, fmt.Errorf("collect: %w", err)
	}
	evals, err := r.RunEvaluations(ctx, id)
	if err != nil {
		return reproduce.Record{}, run, fmt.Errorf("collect: %w", err)
	}
	byStep := make(map[int]store.StepUsage, len(usage))
	for _, u := range usage {
		byStep[u.Step] = u
	}
	evalOf := make(map[int]store.EvalUsage, len(evals))
	for _, e := range evals {
		evalOf[e.Step] = e
	}
	rec := reproduce.Record{Mode: run.Mode, Seed: run.Seed, RunID: id, Steps: []reproduce.StepRecord{}}
	end := run.CreatedAt
	for _, s := range steps {
		if s.Status != store.StepCompleted {
			continue
		}
		u := byStep[s.Step]
		m := s.Metrics
		sr := reproduce.StepRecord{
			Step: s.Step, Groups: m.Groups, AnchorGroups: m.AnchorGroups,
			Executions: u.Executed, CPUSeconds: u.CPUSeconds, WallSeconds: u.WallSeconds, WMCalls: u.WMScored,
			Rho: m.Rho, BiasBefore: m.BiasBefore, BiasAfter: m.BiasAfter,
		}
		if e, ok := evalOf[s.Step+1]; ok && e.HeldOut.Tasks > 0 {
			score := e.HeldOut.Score
			sr.HeldOut, sr.EvalExecutions, sr.EvalCPUSeconds = &score, e.Executions, e.CPUSeconds
		}
		if u.TurnExecutions > 0 || u.TurnWMCalls > 0 {
			// A multi-turn step: every turn's execution and world-model
			// call counts.
			sr.Executions, sr.WMCalls = u.TurnExecutions, u.TurnWMCalls
		}
		rec.Steps = append(rec.Steps, sr)
		if s.FinishedAt != nil && s.FinishedAt.After(end) {
			end = *s.FinishedAt
		}
	}
	if run.State == store.RunCompleted {
		end = run.UpdatedAt
	}
	rec.WallSeconds = end.Sub(run.CreatedAt).Seconds()
	return rec, run, nil
}
