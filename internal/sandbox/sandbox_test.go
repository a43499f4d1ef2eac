package sandbox

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/dockerrun"
	"github.com/wmrl/wmrl/internal/executor"
)

func TestClassify(t *testing.T) {
	okLine := string(executor.NewResult(executor.StatusOK, 0.7, 0.25, "").Line())
	tests := []struct {
		name       string
		give       exit
		stdout     string
		stderr     string
		want       executor.Status
		wantDetail string
	}{
		{name: "valid line", give: exit{}, stdout: okLine, want: executor.StatusOK},
		{name: "garbage", give: exit{}, stdout: "hello\n", want: executor.StatusInvalidOutput, wantDetail: "decode"},
		{name: "deadline wins", give: exit{timedOut: true, code: 137}, stdout: okLine, want: executor.StatusTimeout},
		{name: "oom kill", give: exit{oomKilled: true, code: 137}, want: executor.StatusMemory},
		{name: "runtime oom", give: exit{code: 2}, stderr: "fatal error: runtime: out of memory\n\ngoroutine 1", want: executor.StatusMemory, wantDetail: "out of memory"},
		{name: "mmap refused", give: exit{code: 2}, stderr: "fatal error: runtime: cannot allocate memory\n", want: executor.StatusMemory},
		{name: "crash near limit", give: exit{code: 2, peakBytes: 90 << 20, limitBytes: 100 << 20}, stderr: "SIGSEGV: segmentation violation\n", want: executor.StatusMemory, wantDetail: "90 MiB"},
		{name: "crash far from limit", give: exit{code: 2, peakBytes: 10 << 20, limitBytes: 100 << 20}, stderr: "SIGSEGV: segmentation violation\n", want: executor.StatusRuntimeError, wantDetail: "SIGSEGV"},
		{name: "runtime fault under a memory limit", give: exit{code: 2, peakBytes: 10 << 20, limitBytes: 40 << 20},
			stderr: "SIGSEGV: segmentation violation\nPC=0x4322dd m=0 sigcode=1 addr=0x0\n\ngoroutine 0 gp=0x0 m=0 mp=0x6c1c60 [idle]:\n",
			want:   executor.StatusMemory, wantDetail: "the Go runtime faulted under the memory limit"},
		{name: "runtime fault without a memory limit", give: exit{code: 2},
			stderr: "SIGSEGV: segmentation violation\nPC=0x4322dd m=0 sigcode=1 addr=0x0\n", want: executor.StatusRuntimeError, wantDetail: "SIGSEGV"},
		{name: "nil dereference under a memory limit", give: exit{code: 2, peakBytes: 10 << 20, limitBytes: 40 << 20},
			stderr: "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a1b2c]\n",
			want:   executor.StatusRuntimeError, wantDetail: "nil pointer"},
		{name: "panic", give: exit{code: 2}, stderr: "panic: boom\n\ngoroutine 1 [running]:\n", want: executor.StatusRuntimeError, wantDetail: "panic: boom"},
		{name: "signal", give: exit{code: -1, signal: "segmentation fault"}, want: executor.StatusRuntimeError, wantDetail: "segmentation fault"},
	}
	for _, tt := range tests {
		e := tt.give
		e.stdout, e.stderr = dockerrun.NewCapped(maxStdout), dockerrun.NewCapped(maxStderr)
		e.stdout.Write([]byte(tt.stdout))
		e.stderr.Write([]byte(tt.stderr))
		if err := incomplete(e); err != nil {
			t.Errorf("%s: incomplete: %v", tt.name, err)
		}
		got, own := classify(e)
		if got.Status != tt.want || got.Score != executor.Reward(tt.want, got.Position) || !strings.Contains(got.Detail, tt.wantDetail) {
			t.Errorf("%s: got %+v, want %s with detail containing %q", tt.name, got, tt.want, tt.wantDetail)
		}
		if wantOwn := tt.name == "valid line"; own != wantOwn {
			t.Errorf("%s: own = %v, want %v", tt.name, own, wantOwn)
		}
	}
}

// TestIncomplete checks that an executor exiting 0 without a complete
// result line is the sandbox's failure, not a verdict.
func TestIncomplete(t *testing.T) {
	okLine := string(executor.NewResult(executor.StatusOK, 0.7, 0.25, "").Line())
	tests := []struct {
		name   string
		give   exit
		stdout string
		want   string // "" for no error
	}{
		{name: "nothing", want: "without output"},
		{name: "blank", stdout: "\n", want: "without output"},
		{name: "half a line", stdout: okLine[:len(okLine)/2], want: "without an end of line"},
		{name: "stream broke", give: exit{cut: true}, stdout: okLine, want: "cut short"},
		{name: "valid line", stdout: okLine},
		{name: "garbage line", stdout: "hello\n"},
		{name: "crash without output", give: exit{code: 2}},
		{name: "killed", give: exit{timedOut: true, code: 137}},
	}
	for _, tt := range tests {
		e := tt.give
		e.stdout, e.stderr = dockerrun.NewCapped(maxStdout), dockerrun.NewCapped(maxStderr)
		e.stdout.Write([]byte(tt.stdout))
		err := incomplete(e)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestLimitsCheck(t *testing.T) {
	if err := DefaultLimits().Check(); err != nil {
		t.Errorf("default limits: %v", err)
	}
	tests := []struct {
		give func(*Limits)
		want string
	}{
		{give: func(l *Limits) { l.MemoryBytes = 1 << 20 }, want: "sandbox.memory_mb: 1 is below the minimum of 32"},
		{give: func(l *Limits) { l.MemoryBytes = 2 << 40 }, want: "sandbox.memory_mb: 2097152 exceeds the maximum of 1048576"},
		{give: func(l *Limits) { l.CPUs = 0 }, want: "sandbox.cpus: 0 is not a positive number"},
		{give: func(l *Limits) { l.CPUs = math.NaN() }, want: "sandbox.cpus: NaN is not a positive number"},
		{give: func(l *Limits) { l.CPUs = 0.001 }, want: "sandbox.cpus: 0.001 is below the minimum of 0.01"},
		{give: func(l *Limits) { l.CPUs = 1e9 }, want: "sandbox.cpus: 1e+09 exceeds the maximum of 1024"},
		{give: func(l *Limits) { l.Pids = 2 }, want: "sandbox.pids: 2 is below the minimum of 8"},
		{give: func(l *Limits) { l.Pids = 1 << 30 }, want: "sandbox.pids: 1073741824 exceeds the maximum"},
		{give: func(l *Limits) { l.Deadline = 0 }, want: "sandbox.deadline_seconds: 0 is not positive"},
		{give: func(l *Limits) { l.Deadline = 48 * time.Hour }, want: "sandbox.deadline_seconds: 172800 exceeds the maximum of 86400"},
	}
	for _, tt := range tests {
		l := DefaultLimits()
		tt.give(&l)
		err := l.Check()
		var le *LimitError
		if err == nil || !errors.As(err, &le) || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Check(%+v) = %v, want a *LimitError %q", l, err, tt.want)
		}
	}
	// Every bad limit is named at once.
	l := Limits{CPUs: 2000, MemoryBytes: 1, Pids: 64, Deadline: time.Second}
	if err := l.Check(); err == nil || !strings.Contains(err.Error(), "sandbox.cpus") || !strings.Contains(err.Error(), "sandbox.memory_mb") {
		t.Errorf("Check(%+v) = %v, want both cpus and memory named", l, err)
	}
}
