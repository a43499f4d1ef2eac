package pysandbox

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tasks"
)

// Status is a Python solution's place on the paper's ladder.
type Status string

// The statuses, from worst to best.
const (
	StatusMalformed  Status = "malformed"
	StatusSyntaxErr  Status = "syntax_err"
	StatusRuntimeErr Status = "runtime_err"
	StatusRanNoSub   Status = "ran_no_sub"
	StatusValid      Status = "valid"
)

// Failure says why a runtime_err solution failed.
type Failure string

// The failures.
const (
	FailureExit    Failure = "exit"    // a nonzero exit code
	FailureSignal  Failure = "signal"  // killed by a signal (not for memory)
	FailureTimeout Failure = "timeout" // killed at the deadline
	FailureMemory  Failure = "memory"  // killed for exceeding its memory limit
)

// Reward is the ladder's reward of status s with leaderboard position
// (valid only; clamped to [0, 1]): 0, 0, 0.1, 0.2, 0.5 + 0.5·position.
func Reward(s Status, position float64) float64 {
	switch s {
	case StatusValid:
		if math.IsNaN(position) {
			return 0.5
		}
		return 0.5 + 0.5*math.Min(1, math.Max(0, position))
	case StatusRanNoSub:
		return 0.2
	case StatusRuntimeErr:
		return 0.1
	default:
		return 0
	}
}

// Position is metric's place on t's leaderboard in [0, 1], as the built-in
// suite computes it (suite.PositionIn), the scores negated when lower is
// better; 0 for an empty leaderboard.
func Position(t *tasks.Task, metric float64) float64 {
	sign := 1.0
	if t.Spec.Direction == tasks.Minimize {
		sign = -1
	}
	board := make([]float64, len(t.Leaderboard))
	for i, e := range t.Leaderboard {
		board[i] = sign * e.Score
	}
	return suite.PositionIn(board, sign*metric)
}

// Result is a graded execution.
type Result struct {
	Status Status
	// Score is Reward(Status, Position).
	Score float64
	// Metric is the task's metric of the submission and Position its
	// leaderboard position (valid only).
	Metric, Position float64
	// Failure says why, for runtime_err.
	Failure Failure
	// Detail says what happened, as feedback to the agent (the error
	// message, the tail of stderr, why the submission was refused).
	Detail string
	// Run is the execution (zero for malformed).
	Run Run
}

// detailBytes bounds Result.Detail.
const detailBytes = 2000

// Grade executes source as the solution of t under l and grades it. An
// error means the sandbox failed (or ctx ended); the solution's own
// failures are statuses.
func (s *Sandbox) Grade(ctx context.Context, t *tasks.Task, source string, l backend.Limits, seed uint64) (Result, error) {
	if why := malformed(source); why != "" {
		return Result{Status: StatusMalformed, Score: Reward(StatusMalformed, 0), Detail: why}, nil
	}
	run, err := s.Run(ctx, t, source, l, seed)
	if err != nil {
		return Result{}, err
	}
	return GradeRun(t, run, l), nil
}

// malformed says why source is no code at all, or "".
func malformed(source string) string {
	switch {
	case strings.TrimFunc(source, unicode.IsSpace) == "":
		return "no code: the solution is empty"
	case len(source) > MaxSourceBytes:
		return fmt.Sprintf("the solution has %d bytes, more than %d", len(source), MaxSourceBytes)
	}
	return ""
}

// GradeRun places a finished execution on the ladder, grading its
// submission with t.Grade.
func GradeRun(t *tasks.Task, run Run, l backend.Limits) Result {
	r := Result{Run: run}
	switch {
	case run.SyntaxError != "":
		r.Status, r.Detail = StatusSyntaxErr, run.SyntaxError
	case run.TimedOut:
		r.Status, r.Failure = StatusRuntimeErr, FailureTimeout
		r.Detail = fmt.Sprintf("killed at the deadline of %v", l.Deadline)
	case run.OOMKilled:
		r.Status, r.Failure = StatusRuntimeErr, FailureMemory
		r.Detail = fmt.Sprintf("killed for exceeding the memory limit of %d MiB", l.MemoryBytes>>20)
	case run.ExitCode > 128:
		r.Status, r.Failure = StatusRuntimeErr, FailureSignal
		r.Detail = fmt.Sprintf("killed by signal %d", run.ExitCode-128)
	case run.ExitCode != 0:
		r.Status, r.Failure = StatusRuntimeErr, FailureExit
		r.Detail = fmt.Sprintf("exit code %d", run.ExitCode)
		if strings.Contains(lastLine(run.Stderr), "MemoryError") {
			r.Failure = FailureMemory
		}
	case run.Submission == nil:
		r.Status, r.Detail = StatusRanNoSub, run.NoSubmission
	default:
		m, err := t.Grade(run.Submission)
		if err != nil {
			r.Status, r.Detail = StatusRanNoSub, "submission refused: "+err.Error()
			break
		}
		r.Status, r.Metric, r.Position = StatusValid, m, Position(t, m)
		r.Detail = fmt.Sprintf("%s %g", t.Spec.Metric, m)
	}
	if r.Status == StatusRuntimeErr {
		if tail := tailLines(run.Stderr, 5); tail != "" {
			r.Detail += ": " + tail
		}
	}
	r.Detail = clip(r.Detail, detailBytes)
	r.Score = Reward(r.Status, r.Position)
	return r
}

// lastLine is the last non-blank line of b.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// tailLines is the last n lines of b, joined by " | ".
func tailLines(b []byte, n int) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
