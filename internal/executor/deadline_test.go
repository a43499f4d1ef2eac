package executor

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the watchdog's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func TestReporterInTime(t *testing.T) {
	var out syncBuffer
	exited := make(chan int, 1)
	start := time.Now()
	r := NewReporter(&out, time.Hour, func(code int) { exited <- code })
	if err := r.Report(NewResult(StatusOK, 0.9, 0.5, "")); err != nil {
		t.Fatal(err)
	}
	// Its wall time is within the test's own measure of the same calls,
	// however slow a loaded machine makes them.
	most := time.Since(start).Seconds()
	if err := r.Report(Failed(StatusRuntimeError, "second")); err != nil {
		t.Fatal(err)
	}
	got, err := ParseLine(out.Bytes())
	if err != nil {
		t.Fatalf("output %q: %v", out.Bytes(), err)
	}
	if got.Status != StatusOK || got.WallSeconds <= 0 || got.WallSeconds > most {
		t.Errorf("report in time = %+v, want ok with its wall time (at most %.6fs)", got, most)
	}
	select {
	case code := <-exited:
		t.Errorf("watchdog exited %d after the report", code)
	default:
	}
}

func TestReporterLate(t *testing.T) {
	var out syncBuffer
	exited := make(chan int, 1)
	// A result ready after the deadline is a timeout, even if the watchdog
	// has not fired yet (here it cannot: the test holds its lock).
	r := NewReporter(&out, time.Millisecond, func(code int) { exited <- code })
	r.mu.Lock()
	time.Sleep(5 * time.Millisecond)
	r.mu.Unlock()
	r.Report(NewResult(StatusOK, 0.9, 0.5, ""))
	got, err := ParseLine(out.Bytes())
	if err != nil {
		t.Fatalf("output %q: %v", out.Bytes(), err)
	}
	if got.Status != StatusTimeout || got.WallSeconds < 0.001 {
		t.Errorf("late report = %+v, want a timeout after at least 1 ms", got)
	}
}

func TestReporterWatchdog(t *testing.T) {
	var out syncBuffer
	exited := make(chan int, 1)
	r := NewReporter(&out, 20*time.Millisecond, func(code int) { exited <- code })
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("watchdog exit code %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog did not fire")
	}
	// The job's own result, later, is not written.
	r.Report(NewResult(StatusOK, 0.9, 0.5, ""))
	got, err := ParseLine(out.Bytes())
	if err != nil {
		t.Fatalf("output %q: %v", out.Bytes(), err)
	}
	if got.Status != StatusTimeout || got.WallSeconds < 0.02 {
		t.Errorf("watchdog reported %+v, want a timeout after 20 ms", got)
	}
}

func TestSetupArgsRoundTrip(t *testing.T) {
	give := Setup{SoftMemoryBytes: 90 << 20, DataBytes: 100 << 20, CPUSeconds: 3, NoFiles: true,
		NoSpawn: true, MaxThreads: 32, Deadline: 1500 * time.Microsecond}
	got, err := ParseSetup("x", give.Args())
	if err != nil || got != give {
		t.Errorf("ParseSetup(%q) = %+v, %v, want %+v", give.Args(), got, err, give)
	}
	if _, err := ParseSetup("x", []string{"-deadline", "-1s"}); err == nil {
		t.Error("negative deadline accepted")
	}
}
