package executor

import (
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
)

// maxOpenFiles covers stdin, stdout, stderr and the runtime's own descriptors.
const maxOpenFiles = 32

// defaultStartupData is assumed when /proc does not tell: the Go 1.26
// runtime maps about 40 MiB of writable but mostly untouched memory (heap
// arena metadata) before main runs.
const defaultStartupData = 64 << 20

// startupData is the process's writable private memory now (VmData), which
// RLIMIT_DATA counts but which is the runtime's, not the job's.
func startupData() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return defaultStartupData
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmData:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // "40672 kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			break
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			break
		}
		return kb << 10
	}
	return defaultStartupData
}

// Apply sets the limits of s on the current process.
func (s Setup) Apply() error {
	if s.SoftMemoryBytes > 0 {
		debug.SetMemoryLimit(s.SoftMemoryBytes)
	}
	if s.MaxThreads > 0 {
		debug.SetMaxThreads(s.MaxThreads)
	}
	set := func(name string, res int, v uint64) error {
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("set %s to %d: %w", name, v, err)
		}
		return nil
	}
	if err := set("RLIMIT_CORE", syscall.RLIMIT_CORE, 0); err != nil {
		return err
	}
	if s.DataBytes > 0 {
		if err := set("RLIMIT_DATA", syscall.RLIMIT_DATA, startupData()+uint64(s.DataBytes)); err != nil {
			return err
		}
	}
	if s.CPUSeconds > 0 {
		// The runtime ignores SIGXCPU at the soft limit; the hard limit one
		// second later is a SIGKILL.
		lim := &syscall.Rlimit{Cur: uint64(s.CPUSeconds), Max: uint64(s.CPUSeconds) + 1}
		if err := syscall.Setrlimit(syscall.RLIMIT_CPU, lim); err != nil {
			return fmt.Errorf("set RLIMIT_CPU to %d: %w", s.CPUSeconds, err)
		}
	}
	if s.NoFiles {
		if err := set("RLIMIT_FSIZE", syscall.RLIMIT_FSIZE, 0); err != nil {
			return err
		}
		if err := set("RLIMIT_NOFILE", syscall.RLIMIT_NOFILE, maxOpenFiles); err != nil {
			return err
		}
	}
	if s.NoSpawn {
		if err := forbidSpawn(); err != nil {
			return err
		}
	}
	return nil
}

// SelfCPUSeconds is the CPU time (user and system, all threads) the current
// process has used so far, or 0 if the kernel does not say.
func SelfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
