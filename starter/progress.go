package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how far a command that follows work is (run and status
// --follow count steps, bench reproduce counts runs). On a terminal it
// draws a bar (progressbar) redrawn in place below the lines it prints;
// elsewhere (a pipe, a file) it prints lines only, the counts in them, so
// that the output can be read by a program.
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar // nil unless w is a terminal
	quiet bool                     // print nothing (--json)
	total int
	unit  string // what is counted: "steps", "runs"
	// start is when the first count came, first that count (-1 before);
	// done the count now. The ETA is the pace since start.
	start       time.Time
	first, done int
	// last is the key of the last status printed as a line (not on a
	// terminal).
	last string
}

// newProgress returns the progress of total units shown on w: a bar when
// tty, lines otherwise, nothing when quiet.
func newProgress(w io.Writer, total int, unit string, tty, quiet bool) *progress {
	p := &progress{w: w, quiet: quiet, total: total, unit: unit, first: -1, start: time.Now()}
	if tty && !quiet && total > 0 {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetTheme(progressbar.ThemeASCII),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(false), // the ETA is the description
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// seen records the count done.
func (p *progress) seen(done int) {
	if p.first < 0 {
		p.first, p.start = done, time.Now()
	}
	p.done = done
}

// eta is the time left at the pace since the first count.
func (p *progress) eta() string {
	if p.first < 0 || p.done <= p.first {
		return "ETA -"
	}
	per := time.Since(p.start) / time.Duration(p.done-p.first)
	left := time.Duration(p.total-p.done) * per
	return "ETA " + left.Round(time.Second).String()
}

// clear erases the bar; the next draw shows it again.
func (p *progress) clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

// line prints a line of text above the bar.
func (p *progress) line(s string) {
	if p.quiet {
		return
	}
	p.clear()
	fmt.Fprintln(p.w, s)
}

// step prints the line of a completed unit, done counted; without a bar
// the line ends with the count and the ETA ("  [3/10, ETA 1m0s]").
func (p *progress) step(s string, done int) {
	p.done = done
	if p.bar == nil {
		s += fmt.Sprintf("  [%d/%d, %s]", done, p.total, p.eta())
	}
	p.line(s)
}

// note prints a line prefixed with the count and the time since start
// ("[2/18 runs, 5m3s] ..."), on a terminal or not.
func (p *progress) note(s string) {
	p.line(fmt.Sprintf("[%d/%d %s, %s] %s", p.done, p.total, p.unit, time.Since(p.start).Round(time.Second), s))
}

// status shows what is going on now, s: in the bar on a terminal, else as
// a note when its key changed.
func (p *progress) status(key, s string) {
	if p.quiet {
		return
	}
	if p.bar == nil {
		if key != p.last {
			p.last = key
			p.note(s)
		}
		return
	}
	p.bar.Describe(s)
}

// count records the count done and moves the bar to it.
func (p *progress) count(done int) {
	p.seen(done)
	if p.bar != nil {
		_ = p.bar.Set(done)
	}
}

// draw redraws the bar at the count done, with the ETA.
func (p *progress) draw(done int) {
	p.seen(done)
	if p.bar == nil {
		return
	}
	p.bar.Describe(p.eta())
	_ = p.bar.Set(done)
}
