package executor

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Reporter writes the one result line of an executor and enforces its
// deadline, so that every sandbox measures the deadline the same way: on the
// executor's own clock, from when it has read its job to when its result is
// ready. Neither the sandbox's start-up (creating a container, executing a
// process) nor the job's transfer counts; only the evaluation does.
//
// A result ready after the deadline is reported as a timeout, and at the
// deadline a watchdog reports a timeout and ends the process, whatever the
// job is doing. The two are exclusive: exactly one line is written, and
// whether it is a timeout depends on one clock only. The sandboxes' own
// kills are backstops for an executor that cannot stop itself.
type Reporter struct {
	w        io.Writer
	start    time.Time
	deadline time.Duration
	exit     func(code int)
	timer    *time.Timer

	mu   sync.Mutex
	done bool
}

// NewReporter starts the clock of an execution whose result goes to w.
// With a deadline > 0 it arms the watchdog, which writes a timeout line and
// calls exit(0) (os.Exit in the executor binary; a test may pass a function
// that returns).
func NewReporter(w io.Writer, deadline time.Duration, exit func(code int)) *Reporter {
	r := &Reporter{w: w, start: time.Now(), deadline: deadline, exit: exit}
	if deadline > 0 {
		r.timer = time.AfterFunc(deadline, r.expire)
	}
	return r
}

// Context returns parent bounded by the deadline, so that a job that
// watches its context stops by itself.
func (r *Reporter) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if r.deadline <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithDeadline(parent, r.start.Add(r.deadline))
}

// Report writes res with the executor's wall time and CPU time, or a
// timeout if the deadline has passed. Only the first report (or the
// watchdog's) is written; later ones return nil.
func (r *Reporter) Report(res Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	r.done = true
	if r.timer != nil {
		r.timer.Stop()
	}
	wall := time.Since(r.start)
	if r.deadline > 0 && wall > r.deadline {
		res = r.timeout(wall)
	}
	res.WallSeconds = wall.Seconds()
	res.CPUSeconds = SelfCPUSeconds()
	_, err := r.w.Write(res.Line())
	return err
}

// expire is the watchdog: it reports a timeout and ends the process, unless
// the result was reported first.
func (r *Reporter) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	wall := time.Since(r.start)
	res := r.timeout(wall)
	res.WallSeconds = wall.Seconds()
	res.CPUSeconds = SelfCPUSeconds()
	if _, err := r.w.Write(res.Line()); err != nil {
		r.exit(1)
		return
	}
	r.exit(0)
}

func (r *Reporter) timeout(wall time.Duration) Result {
	return Failed(StatusTimeout, fmt.Sprintf("ran %v, past its deadline of %v", wall.Round(time.Microsecond), r.deadline))
}
