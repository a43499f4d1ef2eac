// Package sandbox runs one executor job in isolation and turns whatever
// happens into an executor.Result.
//
// The executor (internal/executor/wmrl-executor) is a static binary that
// reads a job on stdin and prints one JSON result line. A Sandbox starts it
// with limits on memory, CPUs, processes and wall time, feeds it the job and
// classifies the end:
//
//   - exit 0 with one valid result line: that result (its score recomputed
//     by executor.Reward);
//   - exit 0 with another complete line, or more output than fits:
//     invalid_output (0.2);
//   - past the deadline: timeout (0.1), reported by the executor itself or,
//     as a backstop, by the sandbox's kill;
//   - killed for memory (cgroup OOM kill, or the Go runtime's "out of
//     memory" under the rlimit): memory (0.1);
//   - any other non-zero exit (a panic, a crash): runtime_error (0.1).
//
// All of these are scores, returned with a nil error. An error is returned
// when the sandbox itself fails (binary or image missing, Docker engine
// unreachable or refusing the container, an output stream or a wait cut
// short, an executor that exited 0 without a complete result line, one
// that refused its job) or when the caller's context is cancelled: the
// caller should retry, never score it. Limits that cannot be met are a
// *LimitError, from Limits.Check or Preflight; retrying does not help.
//
// The deadline is measured the same way in every sandbox, on the
// executor's own clock, from when it has read its job to when its result is
// ready (executor.Reporter): a container's or a process's start-up does not
// count. The executor stops itself at the deadline; the sandbox kills it a
// little later only if it did not. The WallSeconds of a result the
// executor reported are its own, the time the deadline was measured on;
// CPUSeconds are measured from outside.
//
// Two implementations: Docker (one throw-away container per execution from a
// FROM-scratch image built locally from the executor binary) and Process (a
// limited child process, for machines without Docker). Each documents what it
// enforces.
package sandbox
