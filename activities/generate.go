package activities

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
)

// GenerateRequest asks for the n trajectories of one group of a step.
type GenerateRequest struct {
	RunID      string        `json:"run_id"`
	Step       int           `json:"step"`
	Group      int           `json:"group"`
	Samples    int           `json:"samples"`
	Seed       uint64        `json:"seed"`
	SuiteSeed  uint64        `json:"suite_seed"`
	Checkpoint CheckpointRef `json:"checkpoint"`
}

// Validate checks the request: the checkpoint must be the step's (version
// s at step s).
func (r GenerateRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	switch {
	case r.Group < 0:
		return fmt.Errorf("group %d: want >= 0", r.Group)
	case r.Samples < 1:
		return fmt.Errorf("samples %d: want >= 1", r.Samples)
	case r.Checkpoint.Version != r.Step:
		return fmt.Errorf("checkpoint version %d at step %d: want the step's checkpoint", r.Checkpoint.Version, r.Step)
	}
	return r.Checkpoint.validate()
}

// GenerateResponse names the group's task and counts the new rows.
type GenerateResponse struct {
	TaskID   string `json:"task_id"`
	Inserted int    `json:"inserted"`
}

// Generate samples the group's n programs from checkpoint s and stores them
// as trajectories. The task is a training task chosen by plan.TaskIndex, sample
// i uses policy.SampleSeed(seed, step, group, i): a retry stores nothing new.
func (a *Activities) Generate(ctx context.Context, req GenerateRequest) (GenerateResponse, error) {
	if err := req.Validate(); err != nil {
		return GenerateResponse{}, invalid(err)
	}
	s, err := a.suite(ctx, req.SuiteSeed)
	if err != nil {
		return GenerateResponse{}, err
	}
	train := s.Split(suite.Train)
	if len(train) == 0 {
		return GenerateResponse{}, invalid(fmt.Errorf("suite %d has no training tasks", req.SuiteSeed))
	}
	task := train[plan.TaskIndex(req.Seed, req.Step, req.Group, len(train))]
	p, err := a.loadPolicy(ctx, req.RunID, req.Checkpoint)
	if err != nil {
		return GenerateResponse{}, err
	}
	progs, err := samplePrograms(p, task.Card.Vector(), req.Samples, func(i int) uint64 {
		return policy.SampleSeed(req.Seed, uint64(req.Step), uint64(req.Group), uint64(i))
	})
	if err != nil {
		return GenerateResponse{}, fmt.Errorf("group %d: %w", req.Group, err)
	}
	sols := make([]store.Solution, len(progs))
	for i, text := range progs {
		sols[i] = store.Solution{Key: store.Key{Run: req.RunID, Step: req.Step, Group: req.Group, Sample: i},
			TaskID: task.ID, Program: text}
	}
	n, err := a.Store.InsertTrajectories(ctx, sols)
	if err != nil {
		return GenerateResponse{}, err
	}
	return GenerateResponse{TaskID: task.ID, Inserted: n}, nil
}

// samplePrograms draws n programs for a card, sample i with seedOf(i), and
// returns their canonical texts.
func samplePrograms(p *policy.Policy, card []float64, n int, seedOf func(int) uint64) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		_, text, err := p.SampleProgram(card, seedOf(i))
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		out[i] = text
	}
	return out, nil
}

// ScoreRequest asks for the world model's scores of one group.
type ScoreRequest struct {
	RunID     string `json:"run_id"`
	Step      int    `json:"step"`
	Group     int    `json:"group"`
	SuiteSeed uint64 `json:"suite_seed"`
}

// Validate checks the request.
func (r ScoreRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.Group < 0 {
		return fmt.Errorf("group %d: want >= 0", r.Group)
	}
	return nil
}

// ScoreResponse summarises the group's world-model scores.
type ScoreResponse struct {
	Scored int     `json:"scored"`
	Mean   float64 `json:"mean"`
}

// ScoreWorldModel stores r_wm for every trajectory of the group. The world
// model is frozen and deterministic, so a retry stores the same values.
func (a *Activities) ScoreWorldModel(ctx context.Context, req ScoreRequest) (ScoreResponse, error) {
	if err := req.Validate(); err != nil {
		return ScoreResponse{}, invalid(err)
	}
	s, err := a.suite(ctx, req.SuiteSeed)
	if err != nil {
		return ScoreResponse{}, err
	}
	ts, err := a.Store.StepTrajectories(ctx, req.RunID, req.Step)
	if err != nil {
		return ScoreResponse{}, err
	}
	var scores []store.Score
	var sum float64
	cards := map[string][]float64{}
	for _, t := range ts {
		if t.Group != req.Group {
			continue
		}
		card, ok := cards[t.TaskID]
		if !ok {
			task, err := s.Task(t.TaskID)
			if err != nil {
				return ScoreResponse{}, invalid(err)
			}
			card = task.Card.Vector()
			cards[t.TaskID] = card
		}
		wm, err := a.WorldModel.PredictText(card, t.Program)
		if err != nil {
			return ScoreResponse{}, invalid(fmt.Errorf("%s: world model: %w", t.Key, err))
		}
		scores = append(scores, store.Score{Key: t.Key, WM: wm})
		sum += wm
	}
	if len(scores) == 0 {
		return ScoreResponse{}, invalid(fmt.Errorf("group %d of %s step %d has no trajectories", req.Group, req.RunID, req.Step))
	}
	if err := a.Store.SetWMScores(ctx, scores); err != nil {
		return ScoreResponse{}, err
	}
	return ScoreResponse{Scored: len(scores), Mean: sum / float64(len(scores))}, nil
}
