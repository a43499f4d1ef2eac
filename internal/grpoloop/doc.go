// Package grpoloop is the in-process reference loop of the built-in suite:
// plain GRPO with real executions, no Temporal and no Postgres. It is the
// `grpo` mode (docs/design.md, "Modes") run in one process, used by the
// learning tests, by benchmarks and as the reference the orchestrated path
// must agree with.
//
// One Step of a Loop takes the orchestrated path's grpo step: it samples G
// groups of n programs from the policy, executes every program for real
// with executor.Run, fuses the rewards with internal/fusion (as the Fuse
// activity does in grpo mode: advantage.Group within each group, the same
// normalised weight 1/(G·n) for every trajectory) and calls policy.Update
// once on fusion.Examples of the batch (as the Update activity does). Every
// seeded choice comes from internal/plan, as in the activities: group g of
// step s works on training task plan.TaskIndex(run seed, s, g, len(tasks)),
// sample i is drawn with policy.SampleSeed(run seed, s, g, i) and executed
// with plan.ExecSeed(run seed, s, g, i), and InitPolicy makes checkpoint 0
// from plan.InitSeed(run seed). So, given the suite's training tasks in
// suite order, the run's policy configuration and its budget, a Loop
// reaches the same checkpoint hashes as a grpo run of the same seed
// (activities.TestReferenceLoopAgrees checks it on the small test suite).
//
// HeldOut is the held-out score (docs/design.md, "Held-out score"; avg@8):
// for each held-out task, 8 programs sampled from the policy are really
// executed; a task's score is the mean of their leaderboard positions, 0 for
// a program that fails; the score is the mean over tasks. Its sample seeds
// depend on the evaluation seed, the task id and the sample index, not on
// the policy, so two checkpoints are compared on common random numbers (the
// orchestrated Evaluate activity also hashes the checkpoint version into its
// seeds, plan.EvalSampleSeed, so it does not; the two held-out scores are
// measured alike but not on the same samples).
//
// # Determinism
//
// Executions run on Workers goroutines, but every result lands in its
// job's slot and every sum runs in job order, so the trajectories, scores,
// advantages and checkpoints are bit-identical for any GOMAXPROCS. A
// wall-clock deadline would make scores depend on the machine's speed, so
// the budget is static: before running a program, Execute estimates its
// work with tabular.EstimateCost on the task's sizes and scores a program
// above ExecConfig.Budget as a timeout (0.1) without running it
// (internal/budget, as the Execute activity does). The per-execution
// deadline (ExecConfig.DeadlineSeconds) is only a safety net set well above
// what the budget admits; should it fire, that one score is
// timing-dependent.
//
// # Cost accounting
//
// Every call reports a Cost: programs executed, programs refused by the
// budget, the process CPU seconds spent while the batch ran (this includes
// gonum's helper goroutines, and anything else the process does meanwhile)
// and the batch's wall seconds. Each Result also carries its own wall
// seconds and the CPU seconds of the thread that ran it (on Linux; a lower
// bound when gonum parallelises a large product). Timings are the only
// outputs that are not deterministic.
package grpoloop
