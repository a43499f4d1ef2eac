package sandbox

import (
	"strings"
	"testing"

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
		{name: "garbage", give: exit{}, stdout: "hello", want: executor.StatusInvalidOutput, wantDetail: "decode"},
		{name: "nothing", give: exit{}, want: executor.StatusInvalidOutput, wantDetail: "empty"},
		{name: "deadline wins", give: exit{timedOut: true, code: 137}, stdout: okLine, want: executor.StatusTimeout},
		{name: "oom kill", give: exit{oomKilled: true, code: 137}, want: executor.StatusMemory},
		{name: "runtime oom", give: exit{code: 2}, stderr: "fatal error: runtime: out of memory\n\ngoroutine 1", want: executor.StatusMemory, wantDetail: "out of memory"},
		{name: "mmap refused", give: exit{code: 2}, stderr: "fatal error: runtime: cannot allocate memory\n", want: executor.StatusMemory},
		{name: "crash near limit", give: exit{code: 2, peakBytes: 90 << 20, limitBytes: 100 << 20}, stderr: "SIGSEGV: segmentation violation\n", want: executor.StatusMemory, wantDetail: "90 MiB"},
		{name: "crash far from limit", give: exit{code: 2, peakBytes: 10 << 20, limitBytes: 100 << 20}, stderr: "SIGSEGV: segmentation violation\n", want: executor.StatusRuntimeError, wantDetail: "SIGSEGV"},
		{name: "panic", give: exit{code: 2}, stderr: "panic: boom\n\ngoroutine 1 [running]:\n", want: executor.StatusRuntimeError, wantDetail: "panic: boom"},
		{name: "signal", give: exit{code: -1, signal: "segmentation fault"}, want: executor.StatusRuntimeError, wantDetail: "segmentation fault"},
	}
	for _, tt := range tests {
		e := tt.give
		e.stdout, e.stderr = newCapped(maxStdout), newCapped(maxStderr)
		e.stdout.Write([]byte(tt.stdout))
		e.stderr.Write([]byte(tt.stderr))
		got := classify(e)
		if got.Status != tt.want || got.Score != executor.Reward(tt.want, got.Position) || !strings.Contains(got.Detail, tt.wantDetail) {
			t.Errorf("%s: got %+v, want %s with detail containing %q", tt.name, got, tt.want, tt.wantDetail)
		}
	}
}

func TestCapped(t *testing.T) {
	c := newCapped(4)
	for _, s := range []string{"ab", "cde", "fg"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if c.buf.String() != "abcd" || !c.truncated {
		t.Errorf("kept %q truncated=%v, want \"abcd\" true", c.buf.String(), c.truncated)
	}
}

func TestLimitsCheck(t *testing.T) {
	if err := DefaultLimits().Check(); err != nil {
		t.Errorf("default limits: %v", err)
	}
	for _, bad := range []func(*Limits){
		func(l *Limits) { l.MemoryBytes = 1 << 20 },
		func(l *Limits) { l.CPUs = 0 },
		func(l *Limits) { l.Pids = 2 },
		func(l *Limits) { l.Deadline = 0 },
	} {
		l := DefaultLimits()
		bad(&l)
		if l.Check() == nil {
			t.Errorf("limits %+v accepted", l)
		}
	}
}
