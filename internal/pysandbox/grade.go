package pysandbox

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/dockerrun"
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
	// Detail says what happened in one line (the error message, the last
	// lines of stderr, why the submission was refused), as the store's
	// execution detail.
	Detail string
	// Feedback is the environment's answer for the agent's next turn
	// (FeedbackOf): what happened, the script's stdout and stderr (head
	// and tail kept) and, for a valid submission, its metric and
	// leaderboard position.
	Feedback string
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
		r := Result{Status: StatusMalformed, Score: Reward(StatusMalformed, 0), Detail: why}
		r.Feedback = FeedbackOf(t, r)
		return r, nil
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
	r.Feedback = FeedbackOf(t, r)
	return r
}

// What Feedback shows of each output stream: its first feedbackHeadBytes
// and its last feedbackTailBytes (the end, where a traceback is, gets
// more), so a Feedback holds at most about 8 KiB of output whatever the
// script printed; the observation's own cap (turns.Render) cuts it further
// to the run's observation_tokens.
const (
	feedbackHeadBytes = 1 << 10
	feedbackTailBytes = 3 << 10
)

// FeedbackOf is the agent's observation of a graded execution of a
// solution of t, as the reference's sandbox answers: a first line with the
// paper's status and what happened (for a runtime_err the failure; the
// traceback is in stderr); the script's stdout and stderr, each with its
// size, its head and its tail (feedbackHeadBytes, feedbackTailBytes) and
// the number of bytes cut between them; for a valid submission its metric
// (the raw score) and its leaderboard position.
func FeedbackOf(t *tasks.Task, r Result) string {
	var b strings.Builder
	switch r.Status {
	case StatusMalformed:
		fmt.Fprintf(&b, "%s: %s\n", r.Status, r.Detail)
		return b.String()
	case StatusSyntaxErr:
		fmt.Fprintf(&b, "%s: the script does not compile\n", r.Status)
	case StatusRuntimeErr:
		fmt.Fprintf(&b, "%s: %s\n", r.Status, failureLine(r))
	case StatusRanNoSub:
		fmt.Fprintf(&b, "%s: %s\n", r.Status, r.Detail)
	case StatusValid:
		fmt.Fprintf(&b, "%s: the submission was scored\n", r.Status)
	}
	stream(&b, "stdout", r.Run.Stdout, r.Run.StdoutBytes)
	stream(&b, "stderr", r.Run.Stderr, r.Run.StderrBytes)
	if r.Status == StatusValid {
		dir := "higher is better"
		if t != nil && t.Spec.Direction == tasks.Minimize {
			dir = "lower is better"
		}
		metric := "metric"
		if t != nil {
			metric = string(t.Spec.Metric)
		}
		fmt.Fprintf(&b, "Valid submission: %s %.6g (%s), leaderboard position %.3f (0 is the bottom of the task's leaderboard, 1 its top)\n",
			metric, r.Metric, dir, r.Position)
	}
	return b.String()
}

// failureLine says how a runtime_err solution failed, without the stderr
// lines Detail adds.
func failureLine(r Result) string {
	switch r.Failure {
	case FailureTimeout:
		return "killed at the deadline"
	case FailureMemory:
		if r.Run.OOMKilled {
			return "killed for exceeding the memory limit"
		}
		return fmt.Sprintf("exit code %d (MemoryError)", r.Run.ExitCode)
	case FailureSignal:
		return fmt.Sprintf("killed by signal %d", r.Run.ExitCode-128)
	}
	return fmt.Sprintf("exit code %d", r.Run.ExitCode)
}

// stream writes one output stream's section: nothing for an empty one;
// else a header with its size and its text, its head and tail when it is
// longer than feedbackHeadBytes + feedbackTailBytes (kept is what Run kept
// of total bytes written: its head and tail hold at least as much, see
// MinOutputBytes).
func stream(b *strings.Builder, name string, kept []byte, total int64) {
	if total == 0 || len(kept) == 0 {
		return
	}
	fmt.Fprintf(b, "--- %s (%d bytes) ---\n", name, total)
	text := kept
	if int64(len(kept)) < total || len(kept) > feedbackHeadBytes+feedbackTailBytes {
		h, t := kept[:min(feedbackHeadBytes, len(kept))], kept[max(0, len(kept)-feedbackTailBytes):]
		cut := total - int64(len(h)) - int64(len(t))
		text = append(append(append([]byte(nil), trimRunes(h, false)...), dockerrun.CutLine(cut)...), trimRunes(t, true)...)
	}
	s := strings.ToValidUTF8(string(text), "?")
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

// trimRunes drops a UTF-8 character broken by a cut: at the end of a head,
// at the start of a tail.
func trimRunes(b []byte, atStart bool) []byte {
	if atStart {
		for k := 0; k < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); k++ {
			b = b[1:]
		}
		return b
	}
	for k := 1; k <= utf8.UTFMax && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				return b[:len(b)-k]
			}
			break
		}
	}
	return b
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
