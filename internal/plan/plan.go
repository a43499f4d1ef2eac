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
