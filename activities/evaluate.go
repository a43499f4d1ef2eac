package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/telemetry"
	"github.com/wmrl/wmrl/internal/turns"
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
	// Turns is the run's trajectory.turns: above 1, each sample is a
	// trajectory of Turns real turns, turn t > 1 sampled from the policy
	// conditioned on turn t − 1's attempt and its grade, as in training,
	// and scored by Reward over its turns (docs/design.md, "Held-out
	// evaluation over turns"). 0 or 1 is the single-shot evaluation.
	Turns int `json:"turns,omitempty"`
	// Reward is the reduction of a sample's turns (trajectory.reward:
	// "max", "last"; "" is "max").
	Reward string `json:"reward,omitempty"`
	// BestOf is eval.best_of: above 1, each sample is BestOf independent
	// single-shot attempts and scores their best. It excludes Turns > 1.
	BestOf int `json:"best_of,omitempty"`
}

// maxEvalAttempts bounds Turns and BestOf (runconfig's bounds are lower).
const maxEvalAttempts = 64

// attempts is the number of executions of one sample.
func (r EvaluateRequest) attempts() int { return max(1, r.Turns, r.BestOf) }

// reduction is the reduction of a sample's attempts: Reward over turns,
// the maximum over best_of attempts.
func (r EvaluateRequest) reduction() string {
	if r.Turns > 1 && r.Reward != "" {
		return r.Reward
	}
	return turns.Max
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
	if r.Turns < 0 || r.Turns > maxEvalAttempts || r.BestOf < 0 || r.BestOf > maxEvalAttempts {
		return fmt.Errorf("turns %d best_of %d: want each in [0,%d]", r.Turns, r.BestOf, maxEvalAttempts)
	}
	if r.Turns > 1 && r.BestOf > 1 {
		return fmt.Errorf("turns %d with best_of %d: a multi-turn policy is evaluated over its turns, best_of is for a single-shot one",
			r.Turns, r.BestOf)
	}
	switch r.Reward {
	case "", turns.Max, turns.Last:
	default:
		return fmt.Errorf("reward %q: want %q or %q", r.Reward, turns.Max, turns.Last)
	}
	return checkBudget(r.Budget)
}

// EvaluateResponse counts the executions of this attempt.
type EvaluateResponse struct {
	// Executed counts the executions of this attempt (a sample's, or each
	// of its executed turns or attempts); Unexecuted the turns that
	// executed nothing (a multi-turn sample's request_info and malformed
	// turns); Resumed the samples an earlier attempt had stored (from its
	// heartbeat).
	Executed   int     `json:"executed"`
	Unexecuted int     `json:"unexecuted,omitempty"`
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
	if req.attempts() > 1 {
		return a.evaluateAttempts(ctx, req, task, ck)
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

// evaluateAttempts is Evaluate of a request with more than one attempt per
// sample: Turns real turns, turn t > 1 sampled from the previous turn's
// program and its grade (status and score bucket, turns.GraderAnswer, as
// the training turns' Previous), or BestOf independent single-shot
// attempts. A turn's action is read as a training turn's (turnAction): a
// request_info or malformed turn executes nothing and is answered as in
// training (answerUnexecuted), counted apart from the executions. Attempt
// t of sample i has the seeds plan.EvalTurnSampleSeed and
// plan.EvalTurnExecSeed, so attempt 1 is the single-shot evaluation's
// program and execution. A sample's row holds the attempt reduction
// chooses (turns.ReduceAt over the ladder scores of its graded attempts:
// under max the best held-out position, as every failure is below every
// valid output) with the CPU and wall seconds of all of them and their
// count; a sample none of whose attempts has a verdict is not stored. The
// heartbeat is the next sample: a retried attempt redoes a sample it had
// not finished, from the same seeds.
func (a *Activities) evaluateAttempts(ctx context.Context, req EvaluateRequest, task backend.Task, ck backend.Checkpoint) (EvaluateResponse, error) {
	version := req.Checkpoint.Version
	n, multi, how := req.attempts(), req.Turns > 1, req.reduction()
	var batch []string
	if !multi {
		// The attempts are independent: one request for all of them.
		seeds := make([]uint64, req.Samples*n)
		for i := range req.Samples {
			for t := 1; t <= n; t++ {
				seeds[i*n+t-1] = plan.EvalTurnSampleSeed(req.Seed, version, task.ID, i, t)
			}
		}
		cs, err := a.sample(ctx, backend.SampleRequest{Run: req.RunID, Checkpoint: ck, Task: task, Seeds: seeds,
			Key: fmt.Sprintf("%s/best-of-%d", backend.EvalKey(req.RunID, version, task.ID, -1), n)}, "task "+task.ID)
		if err != nil {
			return EvaluateResponse{}, err
		}
		if len(cs) != len(seeds) {
			return EvaluateResponse{}, fmt.Errorf("task %s: policy returned %d completions for %d seeds", task.ID, len(cs), len(seeds))
		}
		batch = texts(cs)
	}
	var resp EvaluateResponse
	start := 0
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &start); err != nil || start < 0 || start > req.Samples {
			start = 0
		}
	}
	resp.Resumed = start
	word := "attempt"
	if multi {
		word = "turn"
	}
	for i := start; i < req.Samples; i++ {
		progs, grades := make([]string, n), make([]backend.Grade, n)
		var prev []backend.Previous
		unexecuted := 0
		for t := 1; t <= n; t++ {
			key := backend.EvalKey(req.RunID, version, task.ID, i)
			if t > 1 {
				key = fmt.Sprintf("%s/%s-%d", key, word, t)
			}
			what := fmt.Sprintf("evaluate %s sample %d %s %d", task.ID, i, word, t)
			if multi {
				cs, err := a.sample(ctx, backend.SampleRequest{Run: req.RunID, Checkpoint: ck, Task: task,
					Seeds: []uint64{plan.EvalTurnSampleSeed(req.Seed, version, task.ID, i, t)}, Key: key, Previous: prev}, what)
				if err != nil {
					return EvaluateResponse{}, err
				}
				if len(cs) != 1 {
					return EvaluateResponse{}, fmt.Errorf("%s: policy returned %d completions for 1 seed", what, len(cs))
				}
				progs[t-1] = cs[0].Text
			} else {
				progs[t-1] = batch[i*n+t-1]
			}
			if multi {
				act, err := a.turnAction(ctx, req.RunID, progs[t-1])
				if err != nil {
					return EvaluateResponse{}, err
				}
				if act.Kind != backend.ActionExecuteCode {
					ans, err := a.answerUnexecuted(ctx, req.RunID, task, act)
					if err != nil {
						return EvaluateResponse{}, err
					}
					grades[t-1] = gradeOfUnexecuted(ans)
					unexecuted++
					resp.Unexecuted++
					prev = []backend.Previous{previousAttempt(progs[t-1], ans)}
					continue
				}
			}
			g, err := a.grade(ctx, req.RunID, backend.GradeItem{Task: task, Solution: progs[t-1],
				Seed: plan.EvalTurnExecSeed(req.Seed, version, task.ID, i, t), Key: key}, req.Limits, req.Budget, what,
				telemetry.PhaseHeldOut)
			if err != nil {
				return EvaluateResponse{}, err
			}
			grades[t-1] = g
			resp.Executed++
			resp.CPUSeconds += g.CPUSeconds
			ans := turns.GraderAnswer(g)
			prev = []backend.Previous{previousAttempt(progs[t-1], ans)}
		}
		if ev, ok, err := reduceAttempts(req, task.ID, i, how, word, progs, grades); err != nil {
			return EvaluateResponse{}, invalid(err)
		} else if ok {
			ev.Unexecuted = unexecuted
			if _, err := a.Store.SaveEvaluations(ctx, []store.Evaluation{ev}); err != nil {
				return EvaluateResponse{}, err
			}
		}
		heartbeat(ctx, i+1)
	}
	return resp, nil
}

// gradeOfUnexecuted is the answer to a turn that executed nothing as the
// grade reduceAttempts reads: a malformed turn's the ladder's rung of
// reward 0 (graded), a request_info turn's no verdict, so that, as in
// training (turns.NoExecuteTurn), a sample whose turns are all
// request_info scores 0 rather than being left out.
func gradeOfUnexecuted(ans turns.Answer) backend.Grade {
	return backend.Grade{Graded: ans.Graded, Status: ans.Status, Score: ans.Score, Feedback: ans.Feedback}
}

// previousAttempt is an attempt and its answer as the next turn's policy
// input (backend.Previous): the answer's status and, when graded, its score
// bucket, as a training turn's (previousOf).
func previousAttempt(text string, ans turns.Answer) backend.Previous {
	var reward *float64
	if ans.Graded {
		reward = &ans.Score
	}
	return previous(text, ans.Status, reward)
}

// reduceAttempts is the evaluation row of sample i from its attempts'
// programs and grades: the attempt turns.ReduceAt chooses among the graded
// ones by how, with the CPU and wall seconds of all attempts and their
// count. ok is false when no attempt has a verdict.
func reduceAttempts(req EvaluateRequest, taskID string, i int, how, word string, progs []string,
	grades []backend.Grade) (store.Evaluation, bool, error) {
	rewards := make([]*float64, len(grades))
	statuses := make([]string, len(grades))
	var cpu, wall float64
	for t, g := range grades {
		if g.Graded {
			rewards[t] = &grades[t].Score
		}
		statuses[t] = g.Status
		cpu += g.CPUSeconds
		wall += g.WallSeconds
	}
	at, err := turns.ReduceAt(rewards, how)
	if err != nil {
		return store.Evaluation{}, false, err
	}
	if at < 0 && word == "turn" && turns.NoExecuteTurn(statuses) {
		// Only request_info turns: the sample executed nothing and scores
		// 0, as a training trajectory does (ReduceTurns).
		return store.Evaluation{Run: req.RunID, Step: req.Checkpoint.Version, TaskID: taskID, Sample: i,
			Program: progs[len(progs)-1], Executions: len(grades), Result: executor.Result{Status: executor.StatusInvalidProgram,
				Detail: fmt.Sprintf("%s over %d turns: no execute turn (all request_info)", how, len(grades))}}, true, nil
	}
	if at < 0 {
		return store.Evaluation{}, false, nil
	}
	r := resultOf(grades[at])
	r.CPUSeconds, r.WallSeconds = cpu, wall
	label := fmt.Sprintf("%s over %d turns: turn %d", how, len(grades), at+1)
	if word != "turn" {
		label = fmt.Sprintf("best of %d: attempt %d", len(grades), at+1)
	}
	if r.Detail != "" {
		label += "; " + r.Detail
	}
	r.Detail = label
	return store.Evaluation{Run: req.RunID, Step: req.Checkpoint.Version, TaskID: taskID, Sample: i,
		Program: progs[at], Result: r, Executions: len(grades)}, true, nil
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
