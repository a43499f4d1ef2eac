package grpoloop

import (
	"context"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/seed"
	"github.com/wmrl/wmrl/internal/suite"
)

// HeldOutSamples is the number of programs per task of the held-out score
// (avg@8).
const HeldOutSamples = 8

// EvalConfig says how the held-out score is measured.
type EvalConfig struct {
	// Seed is the evaluation seed the sample seeds derive from.
	Seed uint64 `json:"seed"`
	// Samples is the number of programs per task (HeldOutSamples).
	Samples int        `json:"samples"`
	Exec    ExecConfig `json:"exec"`
}

// DefaultEvalConfig returns avg@8 with the default execution settings.
func DefaultEvalConfig(evalSeed uint64) EvalConfig {
	return EvalConfig{Seed: evalSeed, Samples: HeldOutSamples, Exec: DefaultExecConfig()}
}

// TaskScore is one task's part of a held-out score.
type TaskScore struct {
	TaskID string `json:"task_id"`
	// Score is the mean of Positions.
	Score float64 `json:"score"`
	// Programs and Positions are the sampled programs and their leaderboard
	// positions (0 for a program that failed).
	Programs  []string  `json:"programs"`
	Positions []float64 `json:"positions"`
}

// HeldOutResult is a held-out score with its parts and what it cost (kept
// apart from training executions).
type HeldOutResult struct {
	Score float64     `json:"score"`
	Tasks []TaskScore `json:"tasks"`
	Cost  Cost        `json:"cost"`
}

// heldOutTag separates held-out sample seeds from training ones.
const heldOutTag = "wmrl/grpoloop/heldout"

// HeldOutSeed is the sample seed of program i on task id: a hash of the
// evaluation seed, the task id and i, independent of the policy so that
// checkpoints are compared on the same random numbers.
func HeldOutSeed(evalSeed uint64, taskID string, i int) uint64 {
	return seed.Derive(seed.String(heldOutTag), evalSeed, seed.String(taskID), uint64(i))
}

// heldOutExecTag separates held-out execution seeds from the sample seeds
// they derive from.
const heldOutExecTag = "wmrl/grpoloop/exec"

// HeldOutExecSeed is the seed of the pipeline run of the held-out program
// with sample seed sd (HeldOutSeed).
func HeldOutExecSeed(sd uint64) uint64 { return seed.Derive(seed.String(heldOutExecTag), sd) }

// HeldOut measures the held-out score of p on the tasks of s named by
// taskIDs: for each task, cfg.Samples programs sampled from p are executed;
// the task's score is the mean of their leaderboard positions, 0 for a
// program that fails (any status but ok, including a refusal by the
// budget); the score is the mean over tasks.
func HeldOut(ctx context.Context, s *suite.Suite, p *policy.Policy, taskIDs []string, cfg EvalConfig) (HeldOutResult, error) {
	if len(taskIDs) == 0 {
		return HeldOutResult{}, errors.New("held-out score: no tasks")
	}
	if cfg.Samples < 1 {
		return HeldOutResult{}, fmt.Errorf("held-out score: samples %d: want >= 1", cfg.Samples)
	}
	k := cfg.Samples
	out := HeldOutResult{Tasks: make([]TaskScore, len(taskIDs))}
	jobs := make([]*executor.Job, 0, len(taskIDs)*k)
	for ti, id := range taskIDs {
		t, err := s.Task(id)
		if err != nil {
			return HeldOutResult{}, fmt.Errorf("held-out score: %w", err)
		}
		card := t.Card.Vector()
		ts := TaskScore{TaskID: id, Programs: make([]string, k), Positions: make([]float64, k)}
		for i := range k {
			sd := HeldOutSeed(cfg.Seed, id, i)
			tr, err := SampleProgram(p, card, sd)
			if err != nil {
				return HeldOutResult{}, fmt.Errorf("held-out score: task %s sample %d: %w", id, i, err)
			}
			ts.Programs[i] = tr.Program
			jobs = append(jobs, executor.NewJob(t, tr.Program, HeldOutExecSeed(sd)))
		}
		out.Tasks[ti] = ts
	}
	results, cost, err := Execute(ctx, cfg.Exec, jobs)
	if err != nil {
		return HeldOutResult{}, fmt.Errorf("held-out score: %w", err)
	}
	out.Cost = cost
	for ti := range out.Tasks {
		ts := &out.Tasks[ti]
		var sum float64
		for i := range k {
			if r := results[ti*k+i]; r.Status == executor.StatusOK {
				ts.Positions[i] = r.Position
			}
			sum += ts.Positions[i]
		}
		ts.Score = sum / float64(k)
		out.Score += ts.Score
	}
	out.Score /= float64(len(out.Tasks))
	return out, nil
}

// Score is a shorthand for HeldOut(...).Score.
func Score(ctx context.Context, s *suite.Suite, p *policy.Policy, taskIDs []string, cfg EvalConfig) (float64, error) {
	r, err := HeldOut(ctx, s, p, taskIDs, cfg)
	return r.Score, err
}
