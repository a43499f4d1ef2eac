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
//   - exit 0 with anything else on stdout: invalid_output (0.2);
//   - killed at the deadline: timeout (0.1);
//   - killed for memory (cgroup OOM kill, or the Go runtime's "out of
//     memory" under the rlimit): memory (0.1);
//   - any other non-zero exit (a panic, a crash): runtime_error (0.1).
//
// All of these are scores, returned with a nil error. An error is returned
// only when the sandbox itself fails (binary or image missing, Docker
// daemon down, a container cannot be created) or when the caller's context
// is cancelled: the caller should retry, never score it.
//
// Two implementations: Docker (one throw-away container per execution from a
// FROM-scratch image built locally from the executor binary) and Process (a
// limited child process, for machines without Docker). Each documents what it
// enforces.
package sandbox
