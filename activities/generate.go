package activities

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
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
	// Turn is the turn of a multi-turn trajectory (from 1) whose actions
	// are sampled, answered by Source; 0 is the single-shot Generate, as
	// in every request made before turns existed.
	Turn   int          `json:"turn,omitempty"`
	Source store.Source `json:"source,omitempty"`
}

// Validate checks the request: the checkpoint must be the step's (version
// s at step s) or, sampled by an asynchronous pipeline (pipeline.max_off_policy),
// one of the runconfig.MaxOffPolicy before it.
func (r GenerateRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	switch {
	case r.Group < 0:
		return fmt.Errorf("group %d: want >= 0", r.Group)
	case r.Samples < 1:
		return fmt.Errorf("samples %d: want >= 1", r.Samples)
	case r.Checkpoint.Version > r.Step || r.Checkpoint.Version < r.Step-runconfig.MaxOffPolicy:
		return fmt.Errorf("checkpoint version %d at step %d: want the step's checkpoint or, in an asynchronous pipeline, "+
			"one of the %d before it", r.Checkpoint.Version, r.Step, runconfig.MaxOffPolicy)
	case r.Turn < 0:
		return fmt.Errorf("turn %d: want >= 0", r.Turn)
	case r.Turn > 0 && r.Source != store.SourceReal && r.Source != store.SourceWorldModel:
		return fmt.Errorf("turn %d: source %q: want %q or %q", r.Turn, r.Source, store.SourceReal, store.SourceWorldModel)
	case r.Turn == 0 && r.Source != "":
		return fmt.Errorf("source %q without a turn", r.Source)
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
// i uses plan.SampleSeed(seed, step, group, i): a retry stores nothing new.
func (a *Activities) Generate(ctx context.Context, req GenerateRequest) (GenerateResponse, error) {
	if err := req.Validate(); err != nil {
		return GenerateResponse{}, invalid(err)
	}
	if req.Checkpoint.Version != req.Step {
		// An older checkpoint only as the run's pipeline samples from it.
		cfg, err := a.runConfig(ctx, req.RunID)
		if err != nil {
			return GenerateResponse{}, err
		}
		if want := cfg.Pipeline.SamplingCheckpoint(req.Step); req.Checkpoint.Version != want {
			return GenerateResponse{}, invalid(fmt.Errorf("checkpoint version %d at step %d: the run (pipeline.max_off_policy %d) "+
				"samples step %d from checkpoint %d", req.Checkpoint.Version, req.Step, cfg.Pipeline.OffPolicy(), req.Step, want))
		}
	}
	train, err := a.tasks(ctx, req.RunID, req.SuiteSeed, backend.Train)
	if err != nil {
		return GenerateResponse{}, err
	}
	if len(train) == 0 {
		return GenerateResponse{}, invalid(fmt.Errorf("suite %d has no training tasks", req.SuiteSeed))
	}
	task := train[plan.TaskIndex(req.Seed, req.Step, req.Group, len(train))]
	ck, err := a.checkpoint(ctx, req.RunID, req.Checkpoint)
	if err != nil {
		return GenerateResponse{}, err
	}
	if req.Turn > 0 {
		return a.generateTurn(ctx, req, task, ck)
	}
	seeds := make([]uint64, req.Samples)
	for i := range seeds {
		seeds[i] = plan.SampleSeed(req.Seed, req.Step, req.Group, i)
	}
	cs, err := a.sample(ctx, backend.SampleRequest{Run: req.RunID, Checkpoint: ck, Task: task, Seeds: seeds,
		Key: backend.SampleKey(req.RunID, req.Step, req.Group, -1)}, fmt.Sprintf("group %d", req.Group))
	if err != nil {
		return GenerateResponse{}, err
	}
	sols, err := solutionsOf(req, task.ID, cs)
	if err != nil {
		return GenerateResponse{}, err
	}
	n, err := a.Store.InsertTrajectories(ctx, sols)
	if err != nil {
		return GenerateResponse{}, err
	}
	return GenerateResponse{TaskID: task.ID, Inserted: n}, nil
}

// solutionsOf are the group's completions as trajectories of its task.
func solutionsOf(req GenerateRequest, taskID string, cs []backend.Completion) ([]store.Solution, error) {
	sols := make([]store.Solution, len(cs))
	for i, c := range cs {
		sols[i] = store.Solution{Key: store.Key{Run: req.RunID, Step: req.Step, Group: req.Group, Sample: i},
			TaskID: taskID, Program: c.Text}
		// Token ids and logprobs are kept when the policy gives its
		// logprobs: a remote policy's update needs both.
		if len(c.LogProbs) > 0 {
			if len(c.LogProbs) != len(c.Tokens) {
				return nil, fmt.Errorf("group %d sample %d: policy gave %d logprobs for %d tokens",
					req.Group, i, len(c.LogProbs), len(c.Tokens))
			}
			sols[i].Completion = &store.Completion{Tokens: c.Tokens, LogProbs: c.LogProbs}
		}
	}
	return sols, nil
}

// sample returns the policy's completions, one per seed; errors say what
// was sampled.
func (a *Activities) sample(ctx context.Context, req backend.SampleRequest, what string) ([]backend.Completion, error) {
	cfg, err := a.runConfig(ctx, req.Run)
	if err != nil {
		return nil, err
	}
	policy, err := a.policyNamed(cfg.Policy.Backend)
	if err != nil {
		return nil, err
	}
	req.Settings = policySettings(cfg)
	cs, err := policy.Sample(ctx, req)
	if err != nil {
		return nil, fromPort(fmt.Errorf("%s: %w", what, err))
	}
	if len(cs) != len(req.Seeds) {
		return nil, fmt.Errorf("policy returned %d completions for %d seeds", len(cs), len(req.Seeds))
	}
	return cs, nil
}

// texts returns the completions' texts.
func texts(cs []backend.Completion) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}

// ScoreRequest asks for the world model's scores of one group.
type ScoreRequest struct {
	RunID     string `json:"run_id"`
	Step      int    `json:"step"`
	Group     int    `json:"group"`
	SuiteSeed uint64 `json:"suite_seed"`
	// WorldModel is the hash of the run's refreshed world model
	// (world_model.refresh) that scores the step; "" means the frozen
	// model, as in every request made before refreshes existed.
	WorldModel string `json:"world_model,omitempty"`
	// Turn is the turn of a multi-turn trajectory (from 1) to score; 0
	// scores the trajectories, as in every request made before turns
	// existed. The world model answers the turn of a group it is the
	// source of (the observation, status and reward of the turn), and
	// grades the turn of a real group (its wm_reward, for the anchor
	// pairs); ObservationTokens caps an answer's feedback.
	Turn              int `json:"turn,omitempty"`
	ObservationTokens int `json:"observation_tokens,omitempty"`
}

// Validate checks the request.
func (r ScoreRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.Group < 0 {
		return fmt.Errorf("group %d: want >= 0", r.Group)
	}
	if r.WorldModel != "" && !sha256Hex(r.WorldModel) {
		return fmt.Errorf("world model %q: want the artefact's sha256 (64 hex digits)", r.WorldModel)
	}
	if r.Turn < 0 || (r.Turn > 0 && r.ObservationTokens < 2) {
		return fmt.Errorf("turn %d, observation_tokens %d: want turn >= 0 and, with a turn, at least 2 tokens",
			r.Turn, r.ObservationTokens)
	}
	return nil
}

func sha256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// ScoreResponse summarises the group's world-model scores.
type ScoreResponse struct {
	Scored int     `json:"scored"`
	Mean   float64 `json:"mean"`
}

// ScoreWorldModel stores r_wm for every trajectory of the group, scored by
// the frozen world model or, when the request names one, the run's
// refreshed version of that hash. Either is deterministic, so a retry
// stores the same values.
func (a *Activities) ScoreWorldModel(ctx context.Context, req ScoreRequest) (ScoreResponse, error) {
	if err := req.Validate(); err != nil {
		return ScoreResponse{}, invalid(err)
	}
	if req.Turn > 0 {
		return a.scoreTurn(ctx, req)
	}
	ts, err := a.Store.StepTrajectories(ctx, req.RunID, req.Step)
	if err != nil {
		return ScoreResponse{}, err
	}
	var items []backend.ScoreItem
	var keys []store.Key
	tasks := map[string]backend.Task{}
	for _, t := range ts {
		if t.Group != req.Group {
			continue
		}
		task, ok := tasks[t.TaskID]
		if !ok {
			if task, err = a.task(ctx, req.RunID, req.SuiteSeed, t.TaskID); err != nil {
				return ScoreResponse{}, err
			}
			tasks[t.TaskID] = task
		}
		items = append(items, backend.ScoreItem{Task: task, Solution: t.Program, Key: t.Key.String()})
		keys = append(keys, t.Key)
	}
	if len(items) == 0 {
		return ScoreResponse{}, invalid(fmt.Errorf("group %d of %s step %d has no trajectories", req.Group, req.RunID, req.Step))
	}
	preds, err := a.predict(ctx, req, items)
	if err != nil {
		return ScoreResponse{}, err
	}
	// An ungraded prediction stores no r_wm: the trajectory is left out
	// wherever its mode needs r_wm, never scored 0.
	var scores []store.Score
	var sum float64
	for i, p := range preds {
		if !p.Graded {
			continue
		}
		if math.IsNaN(p.Score) || p.Score < 0 || p.Score > 1 {
			return ScoreResponse{}, invalid(fmt.Errorf("%s: world model score %v: want [0,1] or ungraded", keys[i], p.Score))
		}
		scores = append(scores, store.Score{Key: keys[i], WM: p.Score})
		sum += p.Score
	}
	if len(scores) == 0 {
		return ScoreResponse{}, nil
	}
	if err := a.Store.SetWMScores(ctx, scores); err != nil {
		return ScoreResponse{}, err
	}
	return ScoreResponse{Scored: len(scores), Mean: sum / float64(len(scores))}, nil
}

// predict has the run's world model (or the refreshed version req names)
// score items: one prediction per item.
func (a *Activities) predict(ctx context.Context, req ScoreRequest, items []backend.ScoreItem) ([]backend.Prediction, error) {
	cfg, err := a.runConfig(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	wm, err := a.runWorldModel(cfg)
	if err != nil {
		return nil, err
	}
	if req.WorldModel != "" {
		if wm, err = a.refreshedWorldModel(ctx, req.RunID, req.WorldModel, wm); err != nil {
			return nil, err
		}
	}
	called := time.Now()
	preds, err := backend.Score(ctx, wm, backend.ScoreRequest{Items: items, Settings: worldModelSettings(cfg)})
	a.Metrics.WorldModelCall(a.metricsRun(ctx, req.RunID), time.Since(called), err)
	if err != nil {
		return nil, fromPort(err)
	}
	if len(preds) != len(items) {
		return nil, fmt.Errorf("world model returned %d predictions for %d items", len(preds), len(items))
	}
	return preds, nil
}
