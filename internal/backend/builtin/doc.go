// Package builtin is the built-in backend: the adapters of the four ports of
// package backend over the CPU pieces of this repository.
//
//   - Tasks (backend.TaskSource): the built-in tabular suite of a suite seed
//     (internal/suite, cached per process by SuiteCache); a task's Features
//     are its card vector and its Prompt is empty.
//   - Policy (backend.Policy): the small autoregressive policy
//     (internal/policy), its checkpoints files in the run's checkpoint
//     directory, verified against the hash recorded for them; its tokens
//     are the program tokens, and it gives no per-token logprobs.
//   - WorldModel (backend.WorldModel): the frozen ridge-regression model
//     (internal/worldmodel); it always grades.
//   - Grader (backend.Grader): the executor in a Docker or process sandbox
//     (internal/sandbox, internal/executor), with the static cost budget
//     (internal/budget); it always grades.
//
// New wires the four together; the worker's main and the tests use it.
package builtin
