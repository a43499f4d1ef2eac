package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/telemetry"
)

// HeldOutTasksRequest asks for the held-out tasks of a suite.
type HeldOutTasksRequest struct {
	// RunID picks the task source (the run's tasks); "" (requests of
	// workflows recorded before it was set) is the built-in suite.
	RunID     string `json:"run_id,omitempty"`
	SuiteSeed uint64 `json:"suite_seed"`
	// Limit keeps the first Limit tasks; 0 keeps all.
	Limit int `json:"limit"`
}

// HeldOutTasksResponse lists held-out task ids in suite order.
type HeldOutTasksResponse struct {
	TaskIDs []string `json:"task_ids"`
}

// HeldOutTasks lists the suite's held-out tasks.
func (a *Activities) HeldOutTasks(ctx context.Context, req HeldOutTasksRequest) (HeldOutTasksResponse, error) {
	if req.Limit < 0 {
		return HeldOutTasksResponse{}, invalid(fmt.Errorf("limit %d: want >= 0", req.Limit))
	}
	heldOut, err := a.tasks(ctx, req.RunID, req.SuiteSeed, backend.HeldOut)
	if err != nil {
		return HeldOutTasksResponse{}, err
	}
	ids := []string{}
	for _, t := range heldOut {
		if req.Limit > 0 && len(ids) == req.Limit {
			break
		}
		ids = append(ids, t.ID)
	}
	return HeldOutTasksResponse{TaskIDs: ids}, nil
}

// EvaluateRequest asks for the held-out evaluation of one task at a
// checkpoint: Samples programs, each really executed.
type EvaluateRequest struct {
	RunID      string         `json:"run_id"`
	Checkpoint CheckpointRef  `json:"checkpoint"`
	TaskID     string         `json:"task_id"`
	Samples    int            `json:"samples"`
	Seed       uint64         `json:"seed"`
	SuiteSeed  uint64         `json:"suite_seed"`
	Limits     backend.Limits `json:"limits"`
	Budget     float64        `json:"budget"`
}

// Validate checks the request.
func (r EvaluateRequest) Validate() error {
	if err := checkRun(r.RunID); err != nil {
		return err
	}
	if err := r.Checkpoint.validate(); err != nil {
		return err
	}
	if r.TaskID == "" || r.Samples < 1 {
		return fmt.Errorf("task %q samples %d: want a task and >= 1 sample", r.TaskID, r.Samples)
	}
	if err := r.Limits.Check(); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	return checkBudget(r.Budget)
}

// EvaluateResponse counts the executions of this attempt.
type EvaluateResponse struct {
	// Executed counts the samples executed by this attempt; Resumed the
	// samples an earlier attempt had stored (from its heartbeat).
	Executed   int     `json:"executed"`
	Resumed    int     `json:"resumed"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// Evaluate samples the task's programs from the checkpoint and has the
// grader execute each, storing one evaluation row per sample (keyed by run,
// checkpoint version, task and sample; first write wins); the held-out
// score of a sample is its leaderboard position, 0 when the program fails
// (store.HeldOutScore). These executions are counted apart from the
// training ones. After each sample it heartbeats the next sample's index, and
// a retried attempt resumes there.
func (a *Activities) Evaluate(ctx context.Context, req EvaluateRequest) (EvaluateResponse, error) {
	if err := req.Validate(); err != nil {
		return EvaluateResponse{}, invalid(err)
	}
	task, err := a.task(ctx, req.RunID, req.SuiteSeed, req.TaskID)
	if err != nil {
		return EvaluateResponse{}, err
	}
	if task.Split != backend.HeldOut {
		return EvaluateResponse{}, invalid(fmt.Errorf("task %s is not a held-out task", req.TaskID))
	}
	ck, err := a.checkpoint(ctx, req.RunID, req.Checkpoint)
	if err != nil {
		return EvaluateResponse{}, err
	}
	version := req.Checkpoint.Version
	seeds := make([]uint64, req.Samples)
	for i := range seeds {
		seeds[i] = plan.EvalSampleSeed(req.Seed, version, task.ID, i)
	}
	cs, err := a.sample(ctx, backend.SampleRequest{Run: req.RunID, Checkpoint: ck, Task: task, Seeds: seeds,
		Key: backend.EvalKey(req.RunID, version, task.ID, -1)}, "task "+task.ID)
	if err != nil {
		return EvaluateResponse{}, err
	}
	progs := texts(cs)
	var resp EvaluateResponse
	start := 0
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &start); err != nil || start < 0 || start > len(progs) {
			start = 0
		}
	}
	resp.Resumed = start
	for i := start; i < len(progs); i++ {
		g, err := a.grade(ctx, req.RunID, backend.GradeItem{Task: task, Solution: progs[i], Seed: plan.EvalExecSeed(req.Seed, version, task.ID, i),
			Key: backend.EvalKey(req.RunID, version, task.ID, i)}, req.Limits, req.Budget, fmt.Sprintf("evaluate %s sample %d", task.ID, i),
			telemetry.PhaseHeldOut)
		if err != nil {
			return EvaluateResponse{}, err
		}
		// A sample without a verdict is not stored: the held-out score
		// averages the graded samples.
		if g.Graded {
			_, err = a.Store.SaveEvaluations(ctx, []store.Evaluation{{Run: req.RunID, Step: req.Checkpoint.Version,
				TaskID: task.ID, Sample: i, Program: progs[i], Result: resultOf(g)}})
			if err != nil {
				return EvaluateResponse{}, err
			}
		}
		resp.Executed++
		resp.CPUSeconds += g.CPUSeconds
		heartbeat(ctx, i+1)
	}
	return resp, nil
}

// HeldOutScoreRequest names a checkpoint version of a run.
type HeldOutScoreRequest struct {
	RunID   string `json:"run_id"`
	Version int    `json:"version"`
}

// HeldOutScoreResponse is a checkpoint's held-out score: the mean over
// Tasks tasks of the mean score of their samples (Samples in all).
type HeldOutScoreResponse struct {
	Score   float64 `json:"score"`
	Tasks   int     `json:"tasks"`
	Samples int     `json:"samples"`
}

// HeldOutScore returns the held-out score of a checkpoint from the stored
// evaluations: the mean over tasks of the mean score of their samples.
func (a *Activities) HeldOutScore(ctx context.Context, req HeldOutScoreRequest) (HeldOutScoreResponse, error) {
	if err := (StepRequest{RunID: req.RunID, Step: req.Version}).Validate(); err != nil {
		return HeldOutScoreResponse{}, invalid(err)
	}
	h, err := a.Store.HeldOutScore(ctx, req.RunID, req.Version)
	if err != nil {
		return HeldOutScoreResponse{}, err
	}
	if h.Tasks > 0 {
		a.Metrics.HeldOut(a.metricsRun(ctx, req.RunID), req.Version, h.Score)
	}
	return HeldOutScoreResponse{Score: h.Score, Tasks: h.Tasks, Samples: h.Samples}, nil
}
