// Package plan derives, from a run's seed, every choice of a training run
// that is not learned: which training task each group works on, the seed of
// each real execution, the seed of the initial policy and the seeds of the
// held-out evaluation. (The sampling seed of a trajectory is
// policy.SampleSeed(run seed, step, group, sample).)
//
// Each choice is seed.Derive of a purpose tag ("wmrl/task", "wmrl/exec",
// "wmrl/policy/init", "wmrl/eval") and the coordinates it depends on, so
// the seeds of different purposes never collide and a retried, resumed or
// replayed step makes the same choices. The orchestrated path (activities)
// and the in-process reference loop (internal/grpoloop) both take their
// choices from here, which is what lets them reach the same checkpoints.
//
// The tags and the derivations are fixed forever: changing one would change
// every existing run's tasks, executions or initial policy on resume. The
// tests pin known values.
package plan
