package activities

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/prompt"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/telemetry"
	"github.com/wmrl/wmrl/internal/tokenizer"
	"github.com/wmrl/wmrl/internal/turns"
)

// The activities of a multi-turn trajectory's turns (docs/design.md,
// "Multi-turn trajectories"): Generate, Execute and ScoreWorldModel with a
// turn, and ReduceTurns after a group's last turn. Each reads what it needs
// from Postgres (the turns so far) and writes its rows before it returns,
// so a retry finds them.

// Source is who answers a group's turns (store.Source), for the
// workflows, which keep out of package store.
type Source = store.Source

// The sources of a group's turns.
const (
	SourceReal       = store.SourceReal
	SourceWorldModel = store.SourceWorldModel
)

// observationTokenizer counts an observation's tokens for its cap: in
// bytes, for every policy. The built-in policy has no text tokenizer; for a
// language model (the Tinker policy) a byte count bounds its byte-level BPE
// tokens from above, so the cap holds in its tokens too. Its own tokenizer
// is not used because the answering activity (Execute on a sandbox worker)
// need not have the policy backend, and the observation must not depend on
// which worker rendered it.
var observationTokenizer tokenizer.Tokenizer = tokenizer.Bytes{}

// turnKey is the idempotency key of a turn's remote call.
func turnKey(k store.Key, turn int) string {
	return fmt.Sprintf("%s/turn-%d", backend.SampleKey(k.Run, k.Step, k.Group, k.Sample), turn)
}

// groupTurn returns turn t of every sample of a group, in sample order.
func (a *Activities) groupTurn(ctx context.Context, run string, step, group, turn int) ([]store.Turn, error) {
	all, err := a.Store.GroupTurns(ctx, run, step, group)
	if err != nil {
		return nil, err
	}
	var out []store.Turn
	for _, t := range all {
		if t.Turn == turn {
			out = append(out, t)
		}
	}
	return out, nil
}

// previousOf is a turn's answer as the next turn's policy input.
func previousOf(t store.Turn) backend.Previous {
	return previous(t.Action, t.Answer.Status, t.Answer.Reward)
}

// previous is an action, the status of its answer and its reward (nil when
// ungraded) as the next turn's policy input.
func previous(text, status string, reward *float64) backend.Previous {
	p := backend.Previous{Text: text, Status: status}
	if reward != nil {
		p.Graded, p.Bucket = true, turns.Bucket(*reward)
	}
	return p
}

// exchangeOf is a turn as a token policy's sequence holds it: its action's
// tokens and logprobs (when the policy gave them) and its observation.
func exchangeOf(t store.Turn) backend.Exchange {
	var e backend.Exchange
	if c := t.Completion; c != nil {
		e.Tokens, e.LogProbs = c.Tokens, c.LogProbs
	}
	if t.Answer != nil {
		e.Observation = t.Answer.Observation
	}
	return e
}

// generateTurn samples turn req.Turn of the group's n trajectories: at turn
// 1 from the task alone, stored as the trajectories and their first turns;
// after it from each trajectory's previous turn, which must be answered.
func (a *Activities) generateTurn(ctx context.Context, req GenerateRequest, task backend.Task, ck backend.Checkpoint) (GenerateResponse, error) {
	seeds := make([]uint64, req.Samples)
	for i := range seeds {
		seeds[i] = plan.TurnSampleSeed(req.Seed, req.Step, req.Group, i, req.Turn)
	}
	sreq := backend.SampleRequest{Run: req.RunID, Checkpoint: ck, Task: task, Seeds: seeds,
		Key: backend.SampleKey(req.RunID, req.Step, req.Group, -1)}
	if req.Turn > 1 {
		sreq.Key = fmt.Sprintf("%s/turn-%d", sreq.Key, req.Turn)
		all, err := a.Store.GroupTurns(ctx, req.RunID, req.Step, req.Group)
		if err != nil {
			return GenerateResponse{}, err
		}
		// Each trajectory's turns before this one, in turn order (the
		// store's (sample, turn) order): the previous attempt for the
		// built-in policy, the whole sequence so far for a token policy.
		sreq.Previous = make([]backend.Previous, req.Samples)
		sreq.History = make([][]backend.Exchange, req.Samples)
		have := make([]int, req.Samples)
		for _, t := range all {
			if t.Turn >= req.Turn {
				continue
			}
			if t.Sample < 0 || t.Sample >= req.Samples || t.Turn != have[t.Sample]+1 {
				return GenerateResponse{}, invalid(fmt.Errorf("group %d turn %d: unexpected %s", req.Group, req.Turn, t.TurnKey))
			}
			if t.Answer == nil {
				return GenerateResponse{}, invalid(fmt.Errorf("%s is not answered: its next turn cannot be sampled", t.TurnKey))
			}
			have[t.Sample] = t.Turn
			sreq.History[t.Sample] = append(sreq.History[t.Sample], exchangeOf(t))
			if t.Turn == req.Turn-1 {
				sreq.Previous[t.Sample] = previousOf(t)
			}
		}
		for i, h := range have {
			if h != req.Turn-1 {
				return GenerateResponse{}, invalid(fmt.Errorf("group %d turn %d: sample %d has %d of its %d earlier turns",
					req.Group, req.Turn, i, h, req.Turn-1))
			}
		}
	}
	cs, err := a.sample(ctx, sreq, fmt.Sprintf("group %d turn %d", req.Group, req.Turn))
	if err != nil {
		return GenerateResponse{}, err
	}
	sols, err := solutionsOf(req, task.ID, cs)
	if err != nil {
		return GenerateResponse{}, err
	}
	if req.Turn == 1 {
		if _, err := a.Store.InsertTrajectories(ctx, sols); err != nil {
			return GenerateResponse{}, err
		}
	}
	acts := make([]store.TurnAction, len(sols))
	for i, s := range sols {
		acts[i] = store.TurnAction{TurnKey: store.TurnKey{Key: s.Key, Turn: req.Turn}, Action: s.Program,
			Completion: s.Completion, Source: req.Source}
	}
	n, err := a.Store.InsertTurns(ctx, acts)
	if err != nil {
		return GenerateResponse{}, err
	}
	return GenerateResponse{TaskID: task.ID, Inserted: n}, nil
}

// turnOf returns turn t of a trajectory and the trajectory.
func (a *Activities) turnOf(ctx context.Context, k store.Key, turn int) (store.Turn, store.Trajectory, error) {
	traj, err := a.Store.Trajectory(ctx, k)
	if err != nil {
		return store.Turn{}, store.Trajectory{}, err
	}
	ts, err := a.Store.TrajectoryTurns(ctx, k)
	if err != nil {
		return store.Turn{}, store.Trajectory{}, err
	}
	for _, t := range ts {
		if t.Turn == turn {
			return t, traj, nil
		}
	}
	return store.Turn{}, store.Trajectory{}, invalid(fmt.Errorf("%s has no turn %d: Generate of the turn runs first", k, turn))
}

// executeResponseOf is a turn's stored answer as Execute's response.
func executeResponseOf(a store.Answer, reused bool) ExecuteResponse {
	r := ExecuteResponse{Status: executor.Status(a.Status), CPUSeconds: a.CPUSeconds, WallSeconds: a.WallSeconds, Reused: reused,
		Unexecuted: a.Unexecuted}
	if a.Reward != nil {
		r.Score = *a.Reward
	}
	return r
}

// executeTurn has the grader execute turn req.Turn's action and stores the
// answer: the observation (turns.Render of the verdict), the status, the
// reward and the cost. A request_info or malformed turn executes nothing
// (answerUnexecuted): its answer, and the response, say so (Unexecuted). A
// turn already answered is returned without running again, Unexecuted as
// its action's kind says (an answer stored before the column existed
// reads as executed). An ungraded verdict is stored too (status ungraded,
// no reward), so the trajectory's next turn has an answer to read.
func (a *Activities) executeTurn(ctx context.Context, req ExecuteRequest) (ExecuteResponse, error) {
	t, traj, err := a.turnOf(ctx, req.key(), req.Turn)
	if err != nil {
		return ExecuteResponse{}, err
	}
	if t.Source != store.SourceReal {
		return ExecuteResponse{}, invalid(fmt.Errorf("%s is answered by the %s, not executed", t.TurnKey, t.Source))
	}
	act, err := a.turnAction(ctx, req.RunID, t.Action)
	if err != nil {
		return ExecuteResponse{}, err
	}
	if t.Answer != nil {
		r := executeResponseOf(*t.Answer, true)
		r.Unexecuted = act.Kind != backend.ActionExecuteCode
		return r, nil
	}
	task, err := a.task(ctx, req.RunID, req.SuiteSeed, traj.TaskID)
	if err != nil {
		return ExecuteResponse{}, err
	}
	var g backend.Grade
	var ans turns.Answer
	switch act.Kind {
	case backend.ActionExecuteCode:
		g, err = a.grade(ctx, req.RunID, backend.GradeItem{Task: task, Solution: act.Solution, Action: act.Kind,
			Key: turnKey(req.key(), req.Turn), Seed: plan.TurnExecSeed(req.Seed, req.Step, req.Group, req.Sample, req.Turn)},
			req.Limits, req.Budget, "execute "+t.TurnKey.String(), telemetry.PhaseTrain)
		ans = turns.GraderAnswer(g)
	default:
		ans, err = a.answerUnexecuted(ctx, req.RunID, task, act)
	}
	if err != nil {
		return ExecuteResponse{}, err
	}
	obs, err := turns.Render(ans, req.ObservationTokens, observationTokenizer)
	if err != nil {
		return ExecuteResponse{}, invalid(err)
	}
	stored := store.Answer{Observation: obs, Status: ans.Status, CPUSeconds: g.CPUSeconds, WallSeconds: g.WallSeconds,
		Unexecuted: act.Kind != backend.ActionExecuteCode}
	if ans.Graded {
		score := ans.Score
		stored.Reward = &score
	}
	got, err := a.Store.AnswerTurns(ctx, []store.TurnAnswer{{TurnKey: t.TurnKey, Answer: stored}})
	if err != nil {
		return ExecuteResponse{}, err
	}
	return executeResponseOf(got[0].Answer, false), nil
}

// scoreTurn has the world model predict turn req.Turn of the group's
// trajectories: it answers the turns of a group it is the source of
// (turns.WorldModelAnswer, rendered), and grades those of a real group
// (their wm_reward). The model is deterministic, so a retry stores the
// same.
func (a *Activities) scoreTurn(ctx context.Context, req ScoreRequest) (ScoreResponse, error) {
	ts, err := a.groupTurn(ctx, req.RunID, req.Step, req.Group, req.Turn)
	if err != nil {
		return ScoreResponse{}, err
	}
	if len(ts) == 0 {
		return ScoreResponse{}, invalid(fmt.Errorf("group %d of %s step %d has no turn %d", req.Group, req.RunID, req.Step, req.Turn))
	}
	traj, err := a.Store.Trajectory(ctx, ts[0].Key)
	if err != nil {
		return ScoreResponse{}, err
	}
	task, err := a.task(ctx, req.RunID, req.SuiteSeed, traj.TaskID)
	if err != nil {
		return ScoreResponse{}, err
	}
	// Only a script is the world model's to predict; a request_info or
	// malformed turn is answered as the real environment answers it
	// (answerUnexecuted), so its observation does not say who answered,
	// and a real one gets no world-model grade.
	var items []backend.ScoreItem
	var predicted []int // index in ts of each item
	var answers []store.TurnAnswer
	for i, t := range ts {
		act, err := a.turnAction(ctx, req.RunID, t.Action)
		if err != nil {
			return ScoreResponse{}, err
		}
		if act.Kind == backend.ActionExecuteCode {
			items = append(items, backend.ScoreItem{Task: task, Solution: act.Solution, Action: act.Kind, Key: turnKey(t.Key, t.Turn)})
			predicted = append(predicted, i)
			continue
		}
		if t.Source == store.SourceReal {
			continue
		}
		ans, err := a.answerUnexecuted(ctx, req.RunID, task, act)
		if err != nil {
			return ScoreResponse{}, err
		}
		obs, err := turns.Render(ans, req.ObservationTokens, observationTokenizer)
		if err != nil {
			return ScoreResponse{}, invalid(err)
		}
		stored := store.Answer{Observation: obs, Status: ans.Status, Unexecuted: true}
		if ans.Graded {
			score := ans.Score
			stored.Reward = &score
		}
		answers = append(answers, store.TurnAnswer{TurnKey: t.TurnKey, Answer: stored})
	}
	var preds []backend.Prediction
	if len(items) > 0 {
		if preds, err = a.predict(ctx, req, items); err != nil {
			return ScoreResponse{}, err
		}
	}
	var sum float64
	var scored int
	var grades []store.TurnWM
	for k, p := range preds {
		i := predicted[k]
		if p.Graded {
			if p.Score < 0 || p.Score > 1 || p.Score != p.Score {
				return ScoreResponse{}, invalid(fmt.Errorf("%s: world model score %v: want [0,1] or ungraded", ts[i].TurnKey, p.Score))
			}
			sum += p.Score
			scored++
		}
		if ts[i].Source == store.SourceReal {
			if p.Graded {
				grades = append(grades, store.TurnWM{TurnKey: ts[i].TurnKey, WM: p.Score})
			}
			continue
		}
		ans := turns.WorldModelAnswer(p)
		obs, err := turns.Render(ans, req.ObservationTokens, observationTokenizer)
		if err != nil {
			return ScoreResponse{}, invalid(err)
		}
		stored := store.Answer{Observation: obs, Status: ans.Status, WMTokens: p.Tokens}
		if ans.Graded {
			score := ans.Score
			stored.Reward = &score
		}
		answers = append(answers, store.TurnAnswer{TurnKey: ts[i].TurnKey, Answer: stored})
	}
	if _, err := a.Store.AnswerTurns(ctx, answers); err != nil {
		return ScoreResponse{}, err
	}
	if err := a.Store.SetTurnWMRewards(ctx, grades); err != nil {
		return ScoreResponse{}, err
	}
	if scored == 0 {
		return ScoreResponse{}, nil
	}
	return ScoreResponse{Scored: scored, Mean: sum / float64(scored)}, nil
}

// ReduceTurnsRequest asks for the reduction of one group's turns into its
// trajectories, after the group's last turn.
type ReduceTurnsRequest struct {
	RunID string `json:"run_id"`
	Step  int    `json:"step"`
	Group int    `json:"group"`
	// Turns is K; Reward the reduction (turns.Max or turns.Last).
	Turns  int    `json:"turns"`
	Reward string `json:"reward"`
}

// Validate checks the request.
func (r ReduceTurnsRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	switch {
	case r.Group < 0:
		return fmt.Errorf("group %d: want >= 0", r.Group)
	case r.Turns < 2:
		return fmt.Errorf("turns %d: want at least 2 (a single-shot step reduces nothing)", r.Turns)
	case r.Reward != turns.Max && r.Reward != turns.Last:
		return fmt.Errorf("reward %q: want %q or %q", r.Reward, turns.Max, turns.Last)
	}
	return nil
}

// ReduceTurnsResponse counts what the reduction stored.
type ReduceTurnsResponse struct {
	// Executed counts the trajectories that got an r_env, Scored those
	// that got an r_wm.
	Executed int `json:"executed"`
	Scored   int `json:"scored"`
}

// ReduceTurns writes each trajectory's reduced rewards into its row, from
// its K answered turns: r_env, the reduction of a real trajectory's turn
// rewards (its status the chosen turn's, its CPU and wall seconds the sum
// over its turns); r_wm, the reduction of the world model's answers (its
// own groups) or grades (real groups in modes with a world model). A
// trajectory none of whose turns has a reward keeps no r_env (ungraded).
// Both writes are idempotent (first write wins; the same r_wm again is a
// no-op).
func (a *Activities) ReduceTurns(ctx context.Context, req ReduceTurnsRequest) (ReduceTurnsResponse, error) {
	if err := req.Validate(); err != nil {
		return ReduceTurnsResponse{}, invalid(err)
	}
	all, err := a.Store.GroupTurns(ctx, req.RunID, req.Step, req.Group)
	if err != nil {
		return ReduceTurnsResponse{}, err
	}
	bySample := map[int][]store.Turn{}
	var samples []int
	for _, t := range all {
		if _, ok := bySample[t.Sample]; !ok {
			samples = append(samples, t.Sample)
		}
		bySample[t.Sample] = append(bySample[t.Sample], t)
	}
	if len(samples) == 0 {
		return ReduceTurnsResponse{}, invalid(fmt.Errorf("group %d of %s step %d has no turns", req.Group, req.RunID, req.Step))
	}
	var execs []store.Execution
	var scores []store.Score
	for _, i := range samples {
		ts := bySample[i]
		if len(ts) != req.Turns {
			return ReduceTurnsResponse{}, invalid(fmt.Errorf("%s has %d turns, want %d", ts[0].Key, len(ts), req.Turns))
		}
		rewards, wm := make([]*float64, len(ts)), make([]*float64, len(ts))
		statuses := make([]string, len(ts))
		var cpu, wall float64
		for j, t := range ts {
			if t.Answer == nil {
				return ReduceTurnsResponse{}, invalid(fmt.Errorf("%s is not answered", t.TurnKey))
			}
			rewards[j], wm[j], statuses[j] = t.Answer.Reward, t.WMReward, t.Answer.Status
			cpu += t.Answer.CPUSeconds
			wall += t.Answer.WallSeconds
		}
		// A trajectory of request_info turns only executed nothing: its
		// reward is 0 (turns.NoExecuteTurn): r_env of a real one, r_wm of
		// a world-model one (a real one has no world-model grade to pair).
		noExec := turns.NoExecuteTurn(statuses)
		if ts[0].Source == store.SourceWorldModel {
			wm = rewards
		} else {
			at, err := turns.ReduceAt(rewards, req.Reward)
			if err != nil {
				return ReduceTurnsResponse{}, invalid(err)
			}
			switch {
			case at >= 0:
				execs = append(execs, store.Execution{Key: ts[0].Key, Result: reducedResult(ts, at, cpu, wall, req.Reward)})
			case noExec:
				// The rung of reward 0 (the store keeps ladder statuses).
				execs = append(execs, store.Execution{Key: ts[0].Key, Result: executor.Result{Status: executor.StatusInvalidProgram,
					Detail: fmt.Sprintf("%s over %d turns: no execute turn (all request_info)", req.Reward, len(ts))}})
			}
		}
		if r, ok, err := turns.Reduce(wm, req.Reward); err != nil {
			return ReduceTurnsResponse{}, invalid(err)
		} else if ok || noExec && ts[0].Source == store.SourceWorldModel {
			scores = append(scores, store.Score{Key: ts[0].Key, WM: r})
		}
	}
	if _, err := a.Store.RecordExecutions(ctx, execs); err != nil {
		return ReduceTurnsResponse{}, err
	}
	if err := a.Store.SetWMScores(ctx, scores); err != nil {
		return ReduceTurnsResponse{}, err
	}
	return ReduceTurnsResponse{Executed: len(execs), Scored: len(scores)}, nil
}

// reducedResult is a real trajectory's execution result from its turns:
// the chosen turn's status and reward, the position its reward stands for
// (status ok), the cost of all its turns.
func reducedResult(ts []store.Turn, at int, cpu, wall float64, how string) executor.Result {
	t := ts[at]
	r := executor.Result{Status: executor.Status(t.Answer.Status), Score: *t.Answer.Reward, CPUSeconds: cpu, WallSeconds: wall,
		Detail: fmt.Sprintf("%s over %d turns: turn %d", how, len(ts), t.Turn)}
	if r.Status == executor.StatusOK {
		r.Position = min(1, max(0, 2*(r.Score-0.5)))
	}
	return r
}

// turnAction is the action of a turn's stored text: the built-in
// policy's program is always executed; a language model's stored action
// is its whole completion, whose kind and script prompt.ParseAction reads
// (the script's language is the sandbox's: Python for sandbox.kind
// python, the built-in pipeline language otherwise).
func (a *Activities) turnAction(ctx context.Context, run, text string) (prompt.Action, error) {
	cfg, err := a.runConfig(ctx, run)
	if err != nil {
		return prompt.Action{}, err
	}
	if b := cfg.Policy.Backend; b == "" || b == backend.Builtin {
		return prompt.Action{Kind: backend.ActionExecuteCode, Solution: text}, nil
	}
	lang := "builtin"
	if cfg.Sandbox.Kind == runconfig.SandboxPython {
		lang = "python"
	}
	return prompt.ParseAction(text, lang), nil
}

// answerUnexecuted answers a turn that executes nothing, the same for
// either source: a request_info turn with the structure of the task's data
// (turns.InfoAnswer, from the run's task source), a malformed one with
// turns.MalformedAnswer.
func (a *Activities) answerUnexecuted(ctx context.Context, run string, task backend.Task, act prompt.Action) (turns.Answer, error) {
	switch act.Kind {
	case backend.ActionMalformed:
		return turns.MalformedAnswer(), nil
	case backend.ActionRequestInfo:
		src, err := a.taskSourceOf(ctx, run)
		if err != nil {
			return turns.Answer{}, err
		}
		d, ok := src.(dataDescriber)
		if !ok {
			info := fmt.Sprintf("DATA STRUCTURE (read-only info):\nTask %s of suite %d (%s split).", task.ID, task.Suite, task.Split)
			if task.Prompt != "" {
				info += "\n" + task.Prompt
			}
			return turns.InfoAnswer(info), nil
		}
		info, err := d.DescribeData(ctx, task.Suite, task.ID)
		if err != nil {
			return turns.Answer{}, fromPort(fmt.Errorf("describe task %s: %w", task.ID, err))
		}
		return turns.InfoAnswer(info), nil
	}
	return turns.Answer{}, invalid(fmt.Errorf("action %q executes", act.Kind))
}

// dataDescriber is a task source that describes a task's data (the
// built-in suite's and the task store's do), for request_info.
type dataDescriber interface {
	DescribeData(ctx context.Context, suite uint64, id string) (string, error)
}
