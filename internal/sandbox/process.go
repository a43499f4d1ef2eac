package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/dockerrun"
	"github.com/wmrl/wmrl/internal/executor"
)

// Process runs the executor as a limited child process, for machines
// without Docker. What it enforces:
//
//   - deadline: the executor stops itself at the deadline, measured on its
//     own clock from when it has read its job (executor.Reporter). As a
//     backstop the child leads its own process group, which is killed with
//     SIGKILL a little past the deadline (killAfter, from the start
//     of the child), so nothing it started survives. The child also dies
//     with SIGKILL if the worker thread that started it dies (Pdeathsig),
//     and carries an RLIMIT_CPU backstop.
//   - memory: the executor caps itself with RLIMIT_DATA (heap and anonymous
//     mappings; RLIMIT_AS would count the Go runtime's address-space
//     reservations and fail at startup) before reading its job, and sets the
//     Go soft memory limit to 90% of it. An allocation past the cap makes the
//     runtime die with "out of memory" (or, when the failed mapping is the
//     runtime's own, a crash at a peak resident size near the limit): both
//     are classified as memory.
//   - CPUs: GOMAXPROCS = ceil(CPUs). A cap on parallelism, not a hard
//     quota as in Docker.
//   - files: RLIMIT_FSIZE 0 (no file can be written) and few descriptors.
//   - when the worker runs as root: the child runs as an unprivileged user
//     (65534 by default) in its own, empty network namespace.
//   - processes: the executor installs a seccomp filter on itself that
//     makes fork, vfork, clone without CLONE_THREAD, clone3, execve and
//     execveat fail (Linux amd64 and arm64), so it stays one process, and
//     caps its threads at Limits.Pids (debug.SetMaxThreads; past it the
//     runtime dies: runtime_error). RLIMIT_NPROC is not used: it counts
//     every process of the user (and does not apply to root), so
//     concurrent executions would fail each other's thread creation.
//     Anything that still ran in the group dies with it.
type Process struct {
	// Binary is the path of the executor binary.
	Binary string
	// Credential, when set, is the user the child runs as (needs root).
	Credential *syscall.Credential
	// NewNetwork gives the child an empty network namespace (needs root).
	NewNetwork bool
	// KillGrace is how long Execute waits for the child's output after a
	// kill before giving up on the pipes.
	KillGrace time.Duration
	// AllowSpawn lifts the executor's process filter (for tests of the
	// group kill).
	AllowSpawn bool
}

var _ Sandbox = (*Process)(nil)

// NobodyID is the user and group the sandboxes run executors as.
const NobodyID = dockerrun.NobodyID

// NewProcess returns a process sandbox for the executor at binary. Run as
// root, it drops the child to user and group 65534 in a new network
// namespace; the binary and its directories must then be readable and
// searchable by that user.
func NewProcess(binary string) (*Process, error) {
	st, err := os.Stat(binary)
	if err != nil {
		return nil, fmt.Errorf("executor binary: %w", err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("executor binary %s is not an executable file", binary)
	}
	p := &Process{Binary: binary, KillGrace: 2 * time.Second}
	if os.Geteuid() == 0 {
		p.Credential = &syscall.Credential{Uid: NobodyID, Gid: NobodyID, Groups: []uint32{}}
		p.NewNetwork = true
	}
	return p, nil
}

// setupFor is how the process sandbox asks the executor to limit itself.
func (p *Process) setupFor(l Limits) executor.Setup {
	procs := math.Ceil(l.CPUs)
	return executor.Setup{
		SoftMemoryBytes: l.MemoryBytes / 10 * 9,
		DataBytes:       l.MemoryBytes,
		CPUSeconds:      int64(math.Ceil(l.Deadline.Seconds()*procs)) + 1,
		NoFiles:         true,
		NoSpawn:         !p.AllowSpawn,
		MaxThreads:      int(l.Pids),
		Deadline:        l.Deadline,
	}
}

// Preflight checks l against this machine (CPUs, physical memory) and that
// the executor binary is still there.
func (p *Process) Preflight(ctx context.Context, l Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	var errs []error
	if n := runtime.NumCPU(); l.CPUs > float64(n) {
		errs = append(errs, backend.CPUsError(l.CPUs, "exceeds the %d CPUs of this machine (process sandbox)", n))
	}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		errs = append(errs, fmt.Errorf("process sandbox: read physical memory: %w", err))
	} else if total := int64(si.Totalram) * int64(si.Unit); l.MemoryBytes > total {
		errs = append(errs, backend.MemoryError(l.MemoryBytes, "exceeds the %d MiB of this machine (process sandbox)", total>>20))
	}
	if st, err := os.Stat(p.Binary); err != nil {
		errs = append(errs, fmt.Errorf("process sandbox: executor binary: %w", err))
	} else if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		errs = append(errs, fmt.Errorf("process sandbox: executor binary %s is not an executable file", p.Binary))
	}
	return errors.Join(errs...)
}

// Execute runs one job in a child process.
func (p *Process) Execute(ctx context.Context, req Request) (executor.Result, error) {
	if err := req.Limits.Check(); err != nil {
		return executor.Result{}, fmt.Errorf("process sandbox: %w", err)
	}
	run, cancel := context.WithTimeout(ctx, killAfter(req.Limits))
	defer cancel()

	setup := p.setupFor(req.Limits)
	cmd := exec.CommandContext(run, p.Binary, setup.Args()...)
	cmd.Stdin = bytes.NewReader(req.Job)
	stdout, stderr := dockerrun.NewCapped(maxStdout), dockerrun.NewCapped(maxStderr)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = []string{"GOMAXPROCS=" + strconv.Itoa(int(math.Ceil(req.Limits.CPUs)))}
	cmd.Dir = "/"
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.Credential}
	if p.NewNetwork {
		attr.Cloneflags = syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = p.KillGrace

	// Pdeathsig fires when the thread that started the child exits; keep
	// this goroutine on its thread until the child is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return executor.Result{}, fmt.Errorf("start executor: %w", err)
	}
	var peak atomic.Int64
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watchPeak(cmd.Process.Pid, &peak, stopWatch)
	}()
	waitErr := cmd.Wait()
	wall := time.Since(start)
	close(stopWatch)
	<-watchDone
	// Whatever the leader did, nothing of its group outlives the execution.
	_ = killGroup(cmd.Process.Pid)

	if err := ctx.Err(); err != nil {
		return executor.Result{}, fmt.Errorf("process sandbox: %w", err)
	}
	state := cmd.ProcessState
	if state == nil {
		return executor.Result{}, fmt.Errorf("wait executor: %w", waitErr)
	}
	// With a process state, waitErr only restates it (an exit status, the
	// deadline) or says the output pipes outlived the process.

	cpu := (state.UserTime() + state.SystemTime()).Seconds()
	e := exit{code: state.ExitCode(), stdout: stdout, stderr: stderr,
		peakBytes: peak.Load(), limitBytes: req.Limits.MemoryBytes}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.signal = ws.Signal().String()
		deadlineHit := run.Err() != nil
		cpuHit := ws.Signal() == syscall.SIGKILL && cpu >= float64(setup.CPUSeconds)
		switch {
		case deadlineHit || cpuHit:
			e.timedOut = true
		case ws.Signal() == syscall.SIGKILL:
			// Nobody in the sandbox sent it: the kernel's OOM killer.
			e.oomKilled = true
		}
	}
	if errors.Is(waitErr, exec.ErrWaitDelay) && state.Success() {
		// The executor exited but something kept its output open.
		e.cut = true
	}
	if err := rejected(e); err != nil {
		return executor.Result{}, err
	}
	if err := incomplete(e); err != nil {
		return executor.Result{}, fmt.Errorf("process sandbox: %w", err)
	}
	res, own := classify(e)
	res.CPUSeconds = cpu
	if !own {
		res.WallSeconds = wall.Seconds()
	}
	return res, nil
}

// peakInterval is how often the process sandbox samples the executor's
// peak resident memory.
const peakInterval = 5 * time.Millisecond

// watchPeak keeps the peak resident size (VmHWM) of process pid in peak
// until stop is closed. The rusage of a reaped child cannot serve: its
// ru_maxrss includes the resident size of the parent it was forked from.
// The caller stops it before reaping pid, so the pid cannot be reused.
func watchPeak(pid int, peak *atomic.Int64, stop <-chan struct{}) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	tick := time.NewTicker(peakInterval)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			if v := statusKB(b, "VmHWM:"); v > peak.Load() {
				peak.Store(v)
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// statusKB returns the value of a "Key: N kB" line of /proc/PID/status in
// bytes, or 0.
func statusKB(status []byte, key string) int64 {
	for _, line := range bytes.Split(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte(key))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0
		}
		v, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		return v << 10
	}
	return 0
}

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
