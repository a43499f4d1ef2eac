package backend

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Limits bound one execution (the run config's sandbox section). They are
// part of the Execute and Evaluate activity requests, so their JSON is
// recorded in workflow histories and must not change.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes"` // resident memory of the executor
	CPUs        float64 `json:"cpus"`         // CPU cores (fractions allowed in Docker)
	Pids        int64   `json:"pids"`         // processes and threads
	// Deadline bounds the evaluation on the executor's own clock, from
	// when it has read its job to when its result is ready
	// (executor.Reporter); sandbox start-up does not count. A sandbox
	// kills an executor that has not stopped itself a little later.
	Deadline time.Duration `json:"deadline"`
}

// DefaultLimits suit one suite execution on a laptop.
func DefaultLimits() Limits {
	return Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 64, Deadline: 30 * time.Second}
}

// Static bounds of the limits, whatever the machine: Check's, and the run
// config's bounds on sandbox.memory_mb, sandbox.cpus and
// sandbox.deadline_seconds.
const (
	MinMemoryBytes = 32 << 20 // the executor's runtime and a small job
	MaxMemoryBytes = 1 << 40
	// MinCPUs is the smallest CPU quota Docker accepts.
	MinCPUs = 0.01
	// MaxCPUs bounds GOMAXPROCS = ceil(CPUs), which the Go runtime
	// allocates for before the executor can limit itself: GOMAXPROCS=1e9
	// makes it map 8 GB at start-up and never reach main.
	MaxCPUs     = 1024
	minPids     = 8       // the Go runtime needs threads
	maxPids     = 1 << 22 // Linux's largest pid_max
	MaxDeadline = 24 * time.Hour
)

// Run-config fields (runconfig.Sandbox's YAML keys) that limit errors name.
// Pids is not in the run config (it keeps DefaultLimits' value); wmrl exec
// sets it with --pids.
const (
	FieldMemory   = "sandbox.memory_mb"
	FieldCPUs     = "sandbox.cpus"
	FieldPids     = "sandbox.pids"
	FieldDeadline = "sandbox.deadline_seconds"
)

// LimitError is a limit that cannot be met: the configuration's fault, not
// the grader's, so retrying does not help. Its message names the
// run-config field and the value as the user wrote it, e.g.
// "sandbox.cpus: 4 exceeds the 2 CPUs of the Docker engine".
type LimitError struct {
	Field  string // "sandbox.cpus", "sandbox.memory_mb", "sandbox.deadline_seconds" or "sandbox.pids"
	Value  string // in the field's unit: cores, MiB, seconds, count
	Reason string
}

func (e *LimitError) Error() string { return e.Field + ": " + e.Value + " " + e.Reason }

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// MemoryError is a *LimitError on the memory limit b (bytes, shown in MiB).
func MemoryError(b int64, format string, args ...any) *LimitError {
	mib := strconv.FormatFloat(float64(b)/(1<<20), 'f', -1, 64)
	return &LimitError{Field: FieldMemory, Value: mib, Reason: fmt.Sprintf(format, args...)}
}

// CPUsError is a *LimitError on the CPU limit c.
func CPUsError(c float64, format string, args ...any) *LimitError {
	return &LimitError{Field: FieldCPUs, Value: formatFloat(c), Reason: fmt.Sprintf(format, args...)}
}

// PidsError is a *LimitError on the process limit n.
func PidsError(n int64, format string, args ...any) *LimitError {
	return &LimitError{Field: FieldPids, Value: strconv.FormatInt(n, 10), Reason: fmt.Sprintf(format, args...)}
}

// DeadlineError is a *LimitError on the deadline d (shown in seconds).
func DeadlineError(d time.Duration, format string, args ...any) *LimitError {
	return &LimitError{Field: FieldDeadline, Value: formatFloat(d.Seconds()), Reason: fmt.Sprintf(format, args...)}
}

// Check reports whether every limit is set and within the static bounds,
// whatever the machine (Preflight also checks the machine). The error
// joins one *LimitError per bad limit.
func (l Limits) Check() error {
	var errs []error
	switch {
	case l.MemoryBytes < MinMemoryBytes:
		errs = append(errs, MemoryError(l.MemoryBytes, "is below the minimum of %d", MinMemoryBytes>>20))
	case l.MemoryBytes > MaxMemoryBytes:
		errs = append(errs, MemoryError(l.MemoryBytes, "exceeds the maximum of %d", MaxMemoryBytes>>20))
	}
	switch {
	case math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) || l.CPUs <= 0:
		errs = append(errs, CPUsError(l.CPUs, "is not a positive number"))
	case l.CPUs < MinCPUs:
		errs = append(errs, CPUsError(l.CPUs, "is below the minimum of %v", MinCPUs))
	case l.CPUs > MaxCPUs:
		errs = append(errs, CPUsError(l.CPUs, "exceeds the maximum of %d", MaxCPUs))
	}
	switch {
	case l.Pids < minPids:
		errs = append(errs, PidsError(l.Pids, "is below the minimum of %d (the Go runtime needs threads)", minPids))
	case l.Pids > maxPids:
		errs = append(errs, PidsError(l.Pids, "exceeds the maximum of %d", maxPids))
	}
	switch {
	case l.Deadline <= 0:
		errs = append(errs, DeadlineError(l.Deadline, "is not positive"))
	case l.Deadline > MaxDeadline:
		errs = append(errs, DeadlineError(l.Deadline, "exceeds the maximum of %v", MaxDeadline.Seconds()))
	}
	return errors.Join(errs...)
}
