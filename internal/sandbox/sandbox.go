package sandbox

import (
	"bytes"
	"context"
	"fmt"
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
}

// Limits bound one execution.
type Limits struct {
	MemoryBytes int64         `json:"memory_bytes"` // resident memory of the executor
	CPUs        float64       `json:"cpus"`         // CPU cores (fractions allowed in Docker)
	Pids        int64         `json:"pids"`         // processes and threads
	Deadline    time.Duration `json:"deadline"`     // wall time from start to kill
}

// DefaultLimits suit one suite execution on a laptop.
func DefaultLimits() Limits {
	return Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 64, Deadline: 30 * time.Second}
}

// Check reports whether every limit is set and sane.
func (l Limits) Check() error {
	switch {
	case l.MemoryBytes < 32<<20:
		return fmt.Errorf("memory limit %d bytes below 32 MiB", l.MemoryBytes)
	case !(l.CPUs > 0):
		return fmt.Errorf("cpu limit %v not positive", l.CPUs)
	case l.Pids < 8:
		return fmt.Errorf("pid limit %d below 8 (the Go runtime needs threads)", l.Pids)
	case l.Deadline <= 0:
		return fmt.Errorf("deadline %v not positive", l.Deadline)
	}
	return nil
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
	timedOut  bool   // killed by the sandbox at the deadline
	oomKilled bool   // killed by the kernel or cgroup for memory
	code      int    // exit code; -1 when killed by a signal
	signal    string // the killing signal, if any
	stdout    *capped
	stderr    *capped
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

// classify turns an observed exit into a result (timings left to the caller).
func classify(e exit) executor.Result {
	stderr := e.stderr.buf.String()
	switch {
	case e.timedOut:
		return executor.Failed(executor.StatusTimeout, "killed at the deadline")
	case e.oomKilled:
		return executor.Failed(executor.StatusMemory, "killed for exceeding its memory limit")
	case e.code == 0:
		if e.stdout.truncated {
			return executor.Failed(executor.StatusInvalidOutput, fmt.Sprintf("output longer than %d bytes", maxStdout))
		}
		r, err := executor.ParseLine(e.stdout.buf.Bytes())
		if err != nil {
			return executor.Failed(executor.StatusInvalidOutput, "executor output: "+err.Error())
		}
		return r
	case outOfMemory(stderr) != "":
		return executor.Failed(executor.StatusMemory, outOfMemory(stderr))
	case e.limitBytes > 0 && float64(e.peakBytes) >= nearLimit*float64(e.limitBytes):
		return executor.Failed(executor.StatusMemory, fmt.Sprintf("crashed at %d MiB of its %d MiB memory limit: %s",
			e.peakBytes>>20, e.limitBytes>>20, firstLines(stderr, 1)))
	case e.signal != "":
		return executor.Failed(executor.StatusRuntimeError, "killed by "+e.signal+": "+firstLines(stderr, 2))
	default:
		return executor.Failed(executor.StatusRuntimeError, fmt.Sprintf("exit %d: %s", e.code, firstLines(stderr, 3)))
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
