package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

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

// Limits bound one execution.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes"` // resident memory of the executor
	CPUs        float64 `json:"cpus"`         // CPU cores (fractions allowed in Docker)
	Pids        int64   `json:"pids"`         // processes and threads
	// Deadline bounds the evaluation on the executor's own clock, from
	// when it has read its job to when its result is ready
	// (executor.Reporter); sandbox start-up does not count. A sandbox
	// kills an executor that has not stopped itself a little later
	// (killAfter).
	Deadline time.Duration `json:"deadline"`
}

// DefaultLimits suit one suite execution on a laptop.
func DefaultLimits() Limits {
	return Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 64, Deadline: 30 * time.Second}
}

// Static bounds of the limits, whatever the machine.
const (
	minMemoryBytes = 32 << 20 // the executor's runtime and a small job
	maxMemoryBytes = 1 << 40  // runconfig's bound on sandbox.memory_mb
	// minCPUs is the smallest CPU quota Docker accepts.
	minCPUs = 0.01
	// maxCPUs bounds GOMAXPROCS = ceil(CPUs), which the Go runtime
	// allocates for before the executor can limit itself: GOMAXPROCS=1e9
	// makes it map 8 GB at start-up and never reach main.
	maxCPUs     = 1024
	minPids     = 8       // the Go runtime needs threads
	maxPids     = 1 << 22 // Linux's largest pid_max
	maxDeadline = 24 * time.Hour
)

// Run-config fields (runconfig.Sandbox's YAML keys) that limit errors name.
// Pids is not in the run config (it keeps DefaultLimits' value); wmrl exec
// sets it with --pids.
const (
	fieldMemory   = "sandbox.memory_mb"
	fieldCPUs     = "sandbox.cpus"
	fieldPids     = "sandbox.pids"
	fieldDeadline = "sandbox.deadline_seconds"
)

// LimitError is a limit that cannot be met: the configuration's fault, not
// the sandbox's, so retrying does not help. Its message names the
// run-config field and the value as the user wrote it, e.g.
// "sandbox.cpus: 4 exceeds the 2 CPUs of the Docker engine".
type LimitError struct {
	Field  string // "sandbox.cpus", "sandbox.memory_mb", "sandbox.deadline_seconds" or "sandbox.pids"
	Value  string // in the field's unit: cores, MiB, seconds, count
	Reason string
}

func (e *LimitError) Error() string { return e.Field + ": " + e.Value + " " + e.Reason }

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func memoryError(b int64, format string, args ...any) *LimitError {
	mib := strconv.FormatFloat(float64(b)/(1<<20), 'f', -1, 64)
	return &LimitError{Field: fieldMemory, Value: mib, Reason: fmt.Sprintf(format, args...)}
}

func cpusError(c float64, format string, args ...any) *LimitError {
	return &LimitError{Field: fieldCPUs, Value: formatFloat(c), Reason: fmt.Sprintf(format, args...)}
}

func pidsError(n int64, format string, args ...any) *LimitError {
	return &LimitError{Field: fieldPids, Value: strconv.FormatInt(n, 10), Reason: fmt.Sprintf(format, args...)}
}

func deadlineError(d time.Duration, format string, args ...any) *LimitError {
	return &LimitError{Field: fieldDeadline, Value: formatFloat(d.Seconds()), Reason: fmt.Sprintf(format, args...)}
}

// Check reports whether every limit is set and within the static bounds,
// whatever the machine (Preflight also checks the machine). The error
// joins one *LimitError per bad limit.
func (l Limits) Check() error {
	var errs []error
	switch {
	case l.MemoryBytes < minMemoryBytes:
		errs = append(errs, memoryError(l.MemoryBytes, "is below the minimum of %d", minMemoryBytes>>20))
	case l.MemoryBytes > maxMemoryBytes:
		errs = append(errs, memoryError(l.MemoryBytes, "exceeds the maximum of %d", maxMemoryBytes>>20))
	}
	switch {
	case math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) || l.CPUs <= 0:
		errs = append(errs, cpusError(l.CPUs, "is not a positive number"))
	case l.CPUs < minCPUs:
		errs = append(errs, cpusError(l.CPUs, "is below the minimum of %v", minCPUs))
	case l.CPUs > maxCPUs:
		errs = append(errs, cpusError(l.CPUs, "exceeds the maximum of %d", maxCPUs))
	}
	switch {
	case l.Pids < minPids:
		errs = append(errs, pidsError(l.Pids, "is below the minimum of %d (the Go runtime needs threads)", minPids))
	case l.Pids > maxPids:
		errs = append(errs, pidsError(l.Pids, "exceeds the maximum of %d", maxPids))
	}
	switch {
	case l.Deadline <= 0:
		errs = append(errs, deadlineError(l.Deadline, "is not positive"))
	case l.Deadline > maxDeadline:
		errs = append(errs, deadlineError(l.Deadline, "exceeds the maximum of %v", maxDeadline.Seconds()))
	}
	return errors.Join(errs...)
}

// killAfter is how long a sandbox lets an executor run, on its own clock
// from the executor's start, before killing it: the deadline, which the
// executor enforces itself, plus a margin for the job's transfer and the
// executor's start-up. A kill is a backstop, classified as a timeout.
func (l Limits) killAfter() time.Duration {
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

// capped keeps the first max bytes written to it and discards the rest,
// never failing, so a flooding child can neither block nor exhaust memory.
type capped struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func newCapped(max int) *capped { return &capped{max: max} }

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
			c.truncated = true
		} else {
			c.buf.Write(p)
		}
	} else if len(p) > 0 {
		c.truncated = true
	}
	return len(p), nil
}

// exit is what a sandbox observed of a finished executor.
type exit struct {
	timedOut  bool   // killed by the sandbox past the deadline (a backstop)
	oomKilled bool   // killed by the kernel or cgroup for memory
	code      int    // exit code; -1 when killed by a signal
	signal    string // the killing signal, if any
	stdout    *capped
	stderr    *capped
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
	return fmt.Errorf("executor rejected its job: %s", firstLines(e.stderr.buf.String(), 3))
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
	out := e.stdout.buf.Bytes()
	switch {
	case e.cut:
		return fmt.Errorf("executor output cut short: the stream broke after %d bytes", len(out))
	case e.stdout.truncated:
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
	stderr := e.stderr.buf.String()
	switch {
	case e.timedOut:
		return executor.Failed(executor.StatusTimeout, "killed past the deadline: the executor did not stop itself"), false
	case e.oomKilled:
		return executor.Failed(executor.StatusMemory, "killed for exceeding its memory limit"), false
	case e.code == 0:
		if e.stdout.truncated {
			return executor.Failed(executor.StatusInvalidOutput, fmt.Sprintf("output longer than %d bytes", maxStdout)), false
		}
		r, err := executor.ParseLine(e.stdout.buf.Bytes())
		if err != nil {
			return executor.Failed(executor.StatusInvalidOutput, "executor output: "+err.Error()), false
		}
		return r, true
	case outOfMemory(stderr) != "":
		return executor.Failed(executor.StatusMemory, outOfMemory(stderr)), false
	case e.limitBytes > 0 && float64(e.peakBytes) >= nearLimit*float64(e.limitBytes):
		return executor.Failed(executor.StatusMemory, fmt.Sprintf("crashed at %d MiB of its %d MiB memory limit: %s",
			e.peakBytes>>20, e.limitBytes>>20, firstLines(stderr, 1))), false
	case e.signal != "":
		return executor.Failed(executor.StatusRuntimeError, "killed by "+e.signal+": "+firstLines(stderr, 2)), false
	default:
		return executor.Failed(executor.StatusRuntimeError, fmt.Sprintf("exit %d: %s", e.code, firstLines(stderr, 3))), false
	}
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
