package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/dockerrun"
	"github.com/wmrl/wmrl/internal/executor"
)

// Sandbox executes one encoded executor job under limits.
type Sandbox interface {
	// Execute runs the job. A failure of the solution is a Result with its
	// status and a nil error; an error means the sandbox itself failed (or
	// ctx was cancelled) and the execution should be retried.
	Execute(ctx context.Context, req Request) (executor.Result, error)
	// Preflight reports whether executions under l can run here at all:
	// the limits are sane (Limits.Check), fit this machine or engine, and
	// the sandbox answers. A limit that cannot be met is a *LimitError
	// naming its run-config field, and retrying will not help; any other
	// error is the sandbox's own failure (an engine that does not answer,
	// an image that cannot be built). Call it before a run starts.
	Preflight(ctx context.Context, l Limits) error
}

// Limits bound one execution: the grader port's limits
// (backend.Limits), which the activity requests carry.
type Limits = backend.Limits

// LimitError is a limit that cannot be met (backend.LimitError).
type LimitError = backend.LimitError

// DefaultLimits suit one suite execution on a laptop.
func DefaultLimits() Limits { return backend.DefaultLimits() }

// killAfter is how long a sandbox lets an executor run, on its own clock
// from the executor's start, before killing it: the deadline, which the
// executor enforces itself, plus a margin for the job's transfer and the
// executor's start-up. A kill is a backstop, classified as a timeout.
func killAfter(l Limits) time.Duration {
	return l.Deadline + time.Second + l.Deadline/10
}

// Request is one execution: an encoded executor.Job and its limits.
type Request struct {
	Job    []byte `json:"job"` // executor.Job.Encode output
	Limits Limits `json:"limits"`
}

// NewRequest encodes job for execution under limits.
func NewRequest(job *executor.Job, limits Limits) (Request, error) {
	b, err := job.Encode()
	if err != nil {
		return Request{}, err
	}
	return Request{Job: b, Limits: limits}, nil
}

// Output caps: the executor prints one short line; anything longer is
// garbage and only its head is kept.
const (
	maxStdout = 64 << 10
	maxStderr = 16 << 10
)

// exit is what a sandbox observed of a finished executor.
type exit struct {
	timedOut  bool   // killed by the sandbox past the deadline (a backstop)
	oomKilled bool   // killed by the kernel or cgroup for memory
	code      int    // exit code; -1 when killed by a signal
	signal    string // the killing signal, if any
	stdout    *dockerrun.Capped
	stderr    *dockerrun.Capped
	// cut says the output stream broke or never closed: what was read of
	// it may be incomplete.
	cut bool
	// peakBytes is the executor's peak resident memory when known (the
	// process sandbox's rusage), and limitBytes its memory limit.
	peakBytes, limitBytes int64
}

// nearLimit is the fraction of its memory limit at which a crashed executor
// counts as killed for memory: under RLIMIT_DATA the Go runtime usually
// dies with "out of memory", but a failed mapping inside the runtime can
// also end in a segmentation fault.
const nearLimit = 0.8

// rejected returns an error when the executor refused its flags or job: the
// caller's or the sandbox's fault, to be reported, never scored.
func rejected(e exit) error {
	if e.timedOut || e.oomKilled || e.code != executor.ExitRejected {
		return nil
	}
	return fmt.Errorf("executor rejected its job: %s", firstLines(e.stderr.String(), 3))
}

// incomplete returns an error when an executor that exited 0 left no
// complete result line: it printed nothing, or its output stream broke or
// never closed, or ended mid-line. The executor always ends its line with a
// newline, so the sandbox lost its output: its failure, to be retried,
// never scored.
func incomplete(e exit) error {
	if e.timedOut || e.oomKilled || e.code != 0 {
		return nil
	}
	out := e.stdout.Bytes()
	switch {
	case e.cut:
		return fmt.Errorf("executor output cut short: the stream broke after %d bytes", len(out))
	case e.stdout.Truncated():
		return nil // a flood, not a loss: invalid_output
	case len(bytes.TrimSpace(out)) == 0:
		return fmt.Errorf("executor exited 0 without output")
	case out[len(out)-1] != '\n':
		return fmt.Errorf("executor output cut short: %d bytes without an end of line", len(out))
	}
	return nil
}

// classify turns an observed exit into a result. own reports whether the
// result is the executor's own line, whose timings stand (the deadline is
// measured on the executor's clock); otherwise the caller adds its own.
func classify(e exit) (res executor.Result, own bool) {
	stderr := e.stderr.String()
	switch {
	case e.timedOut:
		return executor.Failed(executor.StatusTimeout, "killed past the deadline: the executor did not stop itself"), false
	case e.oomKilled:
		return executor.Failed(executor.StatusMemory, "killed for exceeding its memory limit"), false
	case e.code == 0:
		if e.stdout.Truncated() {
			return executor.Failed(executor.StatusInvalidOutput, fmt.Sprintf("output longer than %d bytes", maxStdout)), false
		}
		r, err := executor.ParseLine(e.stdout.Bytes())
		if err != nil {
			return executor.Failed(executor.StatusInvalidOutput, "executor output: "+err.Error()), false
		}
		return r, true
	case outOfMemory(stderr) != "":
		return executor.Failed(executor.StatusMemory, outOfMemory(stderr)), false
	case e.limitBytes > 0 && runtimeFault(stderr):
		return executor.Failed(executor.StatusMemory, "the Go runtime faulted under the memory limit (a failed allocation): "+
			firstLines(stderr, 1)), false
	case e.limitBytes > 0 && float64(e.peakBytes) >= nearLimit*float64(e.limitBytes):
		return executor.Failed(executor.StatusMemory, fmt.Sprintf("crashed at %d MiB of its %d MiB memory limit: %s",
			e.peakBytes>>20, e.limitBytes>>20, firstLines(stderr, 1))), false
	case e.signal != "":
		return executor.Failed(executor.StatusRuntimeError, "killed by "+e.signal+": "+firstLines(stderr, 2)), false
	default:
		return executor.Failed(executor.StatusRuntimeError, fmt.Sprintf("exit %d: %s", e.code, firstLines(stderr, 3))), false
	}
}

// runtimeFault reports whether stderr is the Go runtime's report of a
// fatal signal in its own code ("SIGSEGV: segmentation violation" on the
// first line, then "PC=..."), not a Go panic (a nil dereference in the
// executor's code reads "panic: runtime error: ..."). Under RLIMIT_DATA an
// mmap that fails inside the allocator can fault that way instead of
// printing "out of memory": seen as 3 runs in 10 of the process sandbox's
// memory test.
func runtimeFault(stderr string) bool {
	first, rest, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	return strings.HasPrefix(first, "SIGSEGV: segmentation violation") && strings.HasPrefix(strings.TrimSpace(rest), "PC=")
}

// outOfMemory returns the Go runtime's fatal error line when stderr shows a
// failed allocation ("fatal error: runtime: out of memory", or "cannot
// allocate memory" when mmap fails under RLIMIT_DATA), else "".
func outOfMemory(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "fatal error:") &&
			(strings.Contains(line, "out of memory") || strings.Contains(line, "cannot allocate memory")) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
