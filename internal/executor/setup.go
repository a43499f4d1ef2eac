package executor

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Setup is how a sandbox asks the executor binary to limit itself before it
// reads its job. The limits are applied by the executor to its own process,
// so they hold from the first instruction of the job on and need no helper
// process; the interpreted program has no way to lift them.
type Setup struct {
	// SoftMemoryBytes sets the Go runtime's soft memory limit
	// (debug.SetMemoryLimit), so the collector works harder before a hard
	// limit kills the process. 0 leaves the runtime's default.
	SoftMemoryBytes int64
	// DataBytes is the budget of RLIMIT_DATA, the hard cap on the
	// process's writable private memory (heap and anonymous mappings),
	// counted beyond what the runtime has mapped at start-up (about 40 MiB
	// of mostly untouched arena metadata in Go 1.26, read from VmData). An
	// allocation beyond it fails and the Go runtime dies with "out of
	// memory". Mapped, not resident, memory is counted, so the cap is a
	// little tighter than a cgroup's. 0 sets none.
	DataBytes int64
	// CPUSeconds is RLIMIT_CPU: a backstop against a child that outlives its
	// sandbox. 0 sets none.
	CPUSeconds int64
	// NoFiles forbids creating files of any size (RLIMIT_FSIZE 0) and caps
	// open descriptors.
	NoFiles bool
	// NoSpawn forbids creating processes and executing programs (a seccomp
	// filter on every thread; threads stay allowed). Linux amd64 and arm64.
	NoSpawn bool
	// MaxThreads caps the Go runtime's OS threads (debug.SetMaxThreads);
	// past it the runtime dies. 0 leaves the runtime's default.
	MaxThreads int
	// Deadline bounds the evaluation on the executor's own clock, from
	// when it has read its job (see Reporter). 0 sets none.
	Deadline time.Duration
}

// Args renders s as the executor's command-line flags.
func (s Setup) Args() []string {
	var a []string
	if s.SoftMemoryBytes > 0 {
		a = append(a, "-soft-memory", strconv.FormatInt(s.SoftMemoryBytes, 10))
	}
	if s.DataBytes > 0 {
		a = append(a, "-rlimit-data", strconv.FormatInt(s.DataBytes, 10))
	}
	if s.CPUSeconds > 0 {
		a = append(a, "-rlimit-cpu", strconv.FormatInt(s.CPUSeconds, 10))
	}
	if s.NoFiles {
		a = append(a, "-no-files")
	}
	if s.NoSpawn {
		a = append(a, "-no-spawn")
	}
	if s.MaxThreads > 0 {
		a = append(a, "-max-threads", strconv.Itoa(s.MaxThreads))
	}
	if s.Deadline > 0 {
		a = append(a, "-deadline", s.Deadline.String())
	}
	return a
}

// ParseSetup reads the flags written by Args.
func ParseSetup(name string, args []string) (Setup, error) {
	var s Setup
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int64Var(&s.SoftMemoryBytes, "soft-memory", 0, "Go soft memory limit in bytes")
	fs.Int64Var(&s.DataBytes, "rlimit-data", 0, "RLIMIT_DATA in bytes")
	fs.Int64Var(&s.CPUSeconds, "rlimit-cpu", 0, "RLIMIT_CPU in seconds")
	fs.BoolVar(&s.NoFiles, "no-files", false, "forbid creating files")
	fs.BoolVar(&s.NoSpawn, "no-spawn", false, "forbid creating processes")
	fs.IntVar(&s.MaxThreads, "max-threads", 0, "cap on OS threads")
	fs.DurationVar(&s.Deadline, "deadline", 0, "deadline of the evaluation")
	if err := fs.Parse(args); err != nil {
		return Setup{}, fmt.Errorf("parse flags: %w", err)
	}
	if fs.NArg() > 0 {
		return Setup{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if s.SoftMemoryBytes < 0 || s.DataBytes < 0 || s.CPUSeconds < 0 || s.MaxThreads < 0 || s.Deadline < 0 {
		return Setup{}, fmt.Errorf("negative limit")
	}
	return s, nil
}
