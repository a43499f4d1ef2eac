package plan

import (
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/seed"
)

// Purpose tags, so that the run's seeds for different uses never collide.
var (
	tagInit = seed.String("wmrl/policy/init")
	tagTask = seed.String("wmrl/task")
	tagExec = seed.String("wmrl/exec")
	tagEval = seed.String("wmrl/eval")
	tagTurn = seed.String("wmrl/turn")
)

// TaskIndex is the index, among the suite's training tasks, of the task of
// group g at step s: a hash of (run seed, step, group) modulo the number of
// training tasks.
func TaskIndex(runSeed uint64, step, group, tasks int) int {
	return int(seed.Derive(tagTask, runSeed, uint64(step), uint64(group)) % uint64(tasks))
}

// ExecSeed is the seed of the real execution of a trajectory (the pipeline's
// own random choices).
func ExecSeed(runSeed uint64, step, group, sample int) uint64 {
	return seed.Derive(tagExec, runSeed, uint64(step), uint64(group), uint64(sample))
}

// SampleSeed is the sampling seed of sample i of group g at step s
// (policy.SampleSeed), which the policy port gets with each request.
func SampleSeed(runSeed uint64, step, group, sample int) uint64 {
	return policy.SampleSeed(runSeed, uint64(step), uint64(group), uint64(sample))
}

// TurnSampleSeed is the sampling seed of turn t (from 1) of sample i of
// group g at step s: SampleSeed at turn 1, so that a multi-turn
// trajectory's first action is drawn as a single-shot one; a hash of it and
// t after.
func TurnSampleSeed(runSeed uint64, step, group, sample, turn int) uint64 {
	s := SampleSeed(runSeed, step, group, sample)
	if turn <= 1 {
		return s
	}
	return seed.Derive(tagTurn, s, uint64(turn))
}

// TurnExecSeed is the seed of the real execution of turn t (from 1) of a
// trajectory: ExecSeed at turn 1, a hash of it and t after.
func TurnExecSeed(runSeed uint64, step, group, sample, turn int) uint64 {
	s := ExecSeed(runSeed, step, group, sample)
	if turn <= 1 {
		return s
	}
	return seed.Derive(tagTurn, s, uint64(turn))
}

// InitSeed is the seed of a run's initial policy (checkpoint 0).
func InitSeed(runSeed uint64) uint64 { return seed.Derive(tagInit, runSeed) }

// EvalSampleSeed is the sampling seed of program i of the held-out
// evaluation of task taskID at checkpoint version, under evaluation seed
// evalSeed.
func EvalSampleSeed(evalSeed uint64, version int, taskID string, i int) uint64 {
	return policy.SampleSeed(seed.Derive(tagEval, evalSeed), uint64(version), seed.String(taskID), uint64(i))
}

// EvalExecSeed is the execution seed of that program.
func EvalExecSeed(evalSeed uint64, version int, taskID string, i int) uint64 {
	return seed.Derive(tagEval, evalSeed, uint64(version), seed.String(taskID), uint64(i))
}

// EvalTurnSampleSeed is the sampling seed of attempt t (from 1) of program
// i of a held-out evaluation: turn t of a multi-turn policy's evaluation,
// or the t-th of eval.best_of independent single-shot attempts.
// EvalSampleSeed at t = 1, so the first attempt is the single-shot
// evaluation's program; a hash of it and t after.
func EvalTurnSampleSeed(evalSeed uint64, version int, taskID string, i, turn int) uint64 {
	s := EvalSampleSeed(evalSeed, version, taskID, i)
	if turn <= 1 {
		return s
	}
	return seed.Derive(tagTurn, s, uint64(turn))
}

// EvalTurnExecSeed is the execution seed of attempt t (from 1) of program
// i: EvalExecSeed at t = 1, a hash of it and t after.
func EvalTurnExecSeed(evalSeed uint64, version int, taskID string, i, turn int) uint64 {
	s := EvalExecSeed(evalSeed, version, taskID, i)
	if turn <= 1 {
		return s
	}
	return seed.Derive(tagTurn, s, uint64(turn))
}
