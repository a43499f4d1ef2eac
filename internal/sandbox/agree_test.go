package sandbox

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/testlock"
)

// sandboxes returns the process sandbox and, when an engine answers, the
// Docker sandbox, both running binary.
func sandboxes(t *testing.T, binary string) map[string]Sandbox {
	t.Helper()
	p, err := NewProcess(binary)
	if err != nil {
		t.Fatal(err)
	}
	sbs := map[string]Sandbox{KindProcess: p}
	if dockerDown == "" {
		testlock.DockerImages(t, false)
		sbs[KindDocker] = openTestDocker(t, binary)
	} else {
		t.Log("docker sandbox skipped:", dockerDown)
	}
	return sbs
}

// TestDeadlineAgreement checks that both sandboxes measure the deadline the
// same way, on the executor's clock: whatever a container costs to start,
// 1 ms is too short for an evaluation and a generous deadline is enough.
func TestDeadlineAgreement(t *testing.T) {
	real, err := NewRequest(realJob(2000, 8, "standardize | poly degree=2 | ridge alpha=0.01"), testLimits())
	if err != nil {
		t.Fatal(err)
	}
	jobs := []struct {
		name   string
		binary string
		job    []byte
	}{
		{name: "real", binary: realBinary, job: real.Job},
		{name: "spin", binary: fakeBinary, job: fakeJob(t, "spin")}, // 300 ms of CPU
	}
	for _, j := range jobs {
		for kind, sb := range sandboxes(t, j.binary) {
			for _, tt := range []struct {
				deadline time.Duration
				want     executor.Status
			}{
				{deadline: time.Millisecond, want: executor.StatusTimeout},
				{deadline: 60 * time.Second, want: executor.StatusOK},
			} {
				t.Run(fmt.Sprintf("%s/%s/%v", j.name, kind, tt.deadline), func(t *testing.T) {
					lim := testLimits()
					lim.Deadline = tt.deadline
					res, err := sb.Execute(context.Background(), Request{Job: j.job, Limits: lim})
					if err != nil {
						t.Fatal(err)
					}
					if res.Status != tt.want {
						t.Fatalf("got %+v, want %s", res, tt.want)
					}
					// The executor reports its own wall time, the one the
					// deadline is measured on.
					if tt.want == executor.StatusTimeout && (res.WallSeconds < lim.Deadline.Seconds() || !strings.Contains(res.Detail, "past its deadline")) {
						t.Errorf("timeout %+v not the executor's own", res)
					}
				})
			}
		}
	}
}

// TestBackstopKill checks that an executor deaf to its deadline is killed
// a little past it, in both sandboxes, as a timeout.
func TestBackstopKill(t *testing.T) {
	for kind, sb := range sandboxes(t, fakeBinary) {
		t.Run(kind, func(t *testing.T) {
			lim := testLimits()
			lim.Deadline = 300 * time.Millisecond
			res, err := sb.Execute(context.Background(), Request{Job: fakeJob(t, "deaf"), Limits: lim})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != executor.StatusTimeout || !strings.Contains(res.Detail, "did not stop itself") {
				t.Errorf("deaf executor: %+v, want a timeout by the sandbox's kill", res)
			}
			if kill := killAfter(lim).Seconds(); res.WallSeconds < kill-0.05 || res.WallSeconds > kill+3 {
				t.Errorf("killed after %.2fs, want about %.2fs", res.WallSeconds, kill)
			}
		})
	}
}

// TestLostOutput checks that an executor exiting 0 without a complete
// result line is an error in both sandboxes, never a verdict.
func TestLostOutput(t *testing.T) {
	for kind, sb := range sandboxes(t, fakeBinary) {
		for _, mode := range []string{"silent", "half"} {
			t.Run(kind+"/"+mode, func(t *testing.T) {
				res, err := sb.Execute(context.Background(), Request{Job: fakeJob(t, mode), Limits: testLimits()})
				if err == nil {
					t.Errorf("scored %+v", res)
				} else {
					t.Log(err)
				}
			})
		}
	}
}

// TestLimitsBeyondStatic checks that limits out of the static bounds fail
// at once, before anything runs: --cpus 1e9 used to make the executor's
// runtime map 8 GB for GOMAXPROCS and time out after the whole deadline.
func TestLimitsBeyondStatic(t *testing.T) {
	for kind, sb := range sandboxes(t, fakeBinary) {
		t.Run(kind, func(t *testing.T) {
			lim := testLimits()
			lim.CPUs = 1e9
			start := time.Now()
			res, err := sb.Execute(context.Background(), Request{Job: fakeJob(t, "ok"), Limits: lim})
			var le *LimitError
			if !errors.As(err, &le) || le.Field != "sandbox.cpus" {
				t.Errorf("Execute with 1e9 CPUs = %+v, %v, want a *LimitError on sandbox.cpus", res, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refused after %v", d)
			}
			if err := sb.Preflight(context.Background(), lim); !errors.As(err, &le) {
				t.Errorf("Preflight with 1e9 CPUs: %v", err)
			}
		})
	}
}

func TestProcessPreflight(t *testing.T) {
	p := newTestProcess(t)
	ctx := context.Background()
	if err := p.Preflight(ctx, testLimits()); err != nil {
		t.Fatalf("Preflight(%+v): %v", testLimits(), err)
	}
	lim := testLimits()
	lim.CPUs = float64(runtime.NumCPU() + 1)
	want := fmt.Sprintf("sandbox.cpus: %d exceeds the %d CPUs of this machine", runtime.NumCPU()+1, runtime.NumCPU())
	var le *LimitError
	if err := p.Preflight(ctx, lim); !errors.As(err, &le) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Preflight(%v CPUs) = %v, want %q", lim.CPUs, err, want)
	}
	lim = testLimits()
	lim.MemoryBytes = 1 << 40 // the largest limit Check accepts
	if err := p.Preflight(ctx, lim); !errors.As(err, &le) || !strings.Contains(err.Error(), "MiB of this machine") {
		t.Errorf("Preflight(1 TiB) = %v", err)
	}
	gone := *p
	gone.Binary = t.TempDir() + "/gone"
	if err := gone.Preflight(ctx, testLimits()); err == nil || errors.As(err, &le) {
		t.Errorf("Preflight with a vanished binary = %v, want a sandbox error", err)
	}
}
