package turns

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/tokenizer"
)

// Answer is an environment's answer to one turn.
type Answer struct {
	// Graded is false when the environment gave no verdict (an ungraded
	// grade, an unparsable world-model answer): Status is then
	// backend.StatusUngraded and Score means nothing.
	Graded bool
	// Status is the ladder's status (executor.Status).
	Status string
	// Score is the turn's reward in [0,1] on the ladder, when Graded.
	Score float64
	// Feedback is the environment's text for the policy: the ladder's
	// description of the status (built-in environments), a script's output
	// tail (the Python sandbox), a remote world model's env_feedback.
	Feedback string
}

// Buckets is the number of score buckets, 0 to Buckets-1.
const Buckets = 5

// Bucket quantises a score on the ladder: 0 below 0.5 (no valid output),
// then 1-4 for the quarters of the leaderboard position a valid output's
// score 0.5 + 0.5·position holds (position 1 is bucket 4).
func Bucket(score float64) int {
	if math.IsNaN(score) || score < 0.5 {
		return 0
	}
	position := math.Min(1, 2*(score-0.5))
	return 1 + min(Buckets-2, int(4*position))
}

// LadderStatus is the status of the ladder rung a predicted score falls on,
// halfway between the rungs: ok from 0.5 (the valid outputs), invalid_output
// from 0.15 (the rung 0.2), runtime_error from 0.05 (the rung 0.1), else
// invalid_program (0). The world model predicts a score, and its answer
// names the status that score stands for.
func LadderStatus(score float64) executor.Status {
	switch {
	case score >= 0.5:
		return executor.StatusOK
	case score >= 0.15:
		return executor.StatusInvalidOutput
	case score >= 0.05:
		return executor.StatusRuntimeError
	}
	return executor.StatusInvalidProgram
}

// Describe is the ladder's description of a status, the feedback of the
// built-in environments.
func Describe(status string) string {
	switch executor.Status(status) {
	case executor.StatusOK:
		return "The program ran and its predictions were scored against the leaderboard."
	case executor.StatusInvalidProgram:
		return "The program does not parse."
	case executor.StatusRuntimeError:
		return "The program parsed but failed while running."
	case executor.StatusTimeout:
		return "The program exceeded its time or cost budget."
	case executor.StatusMemory:
		return "The program exceeded its memory limit."
	case executor.StatusInvalidOutput:
		return "The program ran but wrote no valid predictions."
	case backend.StatusUngraded:
		return "The program could not be graded."
	}
	return "The result has an unknown status."
}

// GraderAnswer is a grader's verdict as an answer: its measured status and
// score; as feedback the grader's own text (g.Feedback) or, without one
// (the built-in grader), the ladder's description of the status.
//
// A request_info answer (status backend.StatusInfo) holds no reward: it is
// InfoAnswer of the grader's feedback.
func GraderAnswer(g backend.Grade) Answer {
	if g.Status == backend.StatusInfo {
		return InfoAnswer(g.Feedback)
	}
	if !g.Graded {
		return Answer{Status: backend.StatusUngraded, Feedback: orDescribe(g.Feedback, backend.StatusUngraded)}
	}
	return Answer{Graded: true, Status: g.Status, Score: g.Score, Feedback: orDescribe(g.Feedback, g.Status)}
}

func orDescribe(feedback, status string) string {
	if feedback != "" {
		return feedback
	}
	return Describe(status)
}

// WorldModelAnswer is the built-in world model's prediction as an answer:
// the status of the rung its score falls on (LadderStatus), the predicted
// score, the ladder's description of that status as feedback.
//
// A world model that predicts the outcome itself (p.Status, p.Feedback:
// the OpenAI-compatible one's status and env_feedback) answers with those.
func WorldModelAnswer(p backend.Prediction) Answer {
	if !p.Graded {
		return Answer{Status: backend.StatusUngraded, Feedback: orDescribe(p.Feedback, backend.StatusUngraded)}
	}
	s := p.Status
	if s == "" {
		s = string(LadderStatus(p.Score))
	}
	return Answer{Graded: true, Status: s, Score: p.Score, Feedback: orDescribe(p.Feedback, s)}
}

// InfoAnswer is the answer to a request_info action, whoever's group it
// is: status backend.StatusInfo, no reward (Graded false: the turn is no
// execute turn, and Reduce leaves it out), the data's structure as
// feedback. Nothing was executed.
func InfoAnswer(description string) Answer {
	return Answer{Status: backend.StatusInfo, Feedback: description}
}

// MalformedFeedback is the feedback of a completion with no action.
const MalformedFeedback = "No valid action found: write a short analysis, then one complete script in a ```python code block " +
	"(or <action>request_info</action> to see the data's structure). Nothing was executed."

// MalformedAnswer is the answer to a completion that holds no action
// (backend.ActionMalformed): the ladder's invalid_program rung and reward
// (0), graded, with MalformedFeedback. Nothing was executed.
func MalformedAnswer() Answer {
	s := executor.StatusInvalidProgram
	return Answer{Graded: true, Status: string(s), Score: executor.Reward(s, 0), Feedback: MalformedFeedback}
}

// Header opens every observation.
const Header = "=== Execution result ==="

// Render is the observation of an answer: the header, the status, the
// score bucket ("none" when ungraded) and the feedback capped at cap tokens
// of tok (Cap). Every environment's answer is rendered here.
func Render(a Answer, cap int, tok tokenizer.Tokenizer) (string, error) {
	feedback, err := Cap(a.Feedback, cap, tok)
	if err != nil {
		return "", err
	}
	bucket := "none"
	if a.Graded {
		bucket = fmt.Sprintf("%d/%d", Bucket(a.Score), Buckets-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nstatus: %s\nscore bucket: %s\n", Header, a.Status, bucket)
	if feedback != "" {
		b.WriteString(feedback)
		if !strings.HasSuffix(feedback, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String(), nil
}

// Cap returns text when it has at most n tokens of tok; otherwise its first
// n/2 and last n - n/2 tokens with a line between them saying how many were
// cut. A token split inside a character (a byte tokenizer's) loses the
// broken character. n must be at least 2.
func Cap(text string, n int, tok tokenizer.Tokenizer) (string, error) {
	if n < 2 {
		return "", fmt.Errorf("observation cap %d: want at least 2 tokens", n)
	}
	if tok == nil {
		return "", errors.New("observation cap: no tokenizer")
	}
	ids, err := tok.Encode(text)
	if err != nil {
		return "", fmt.Errorf("observation cap: %w", err)
	}
	if len(ids) <= n {
		return text, nil
	}
	head, tail := n/2, n-n/2
	h, err := tok.Decode(ids[:head])
	if err != nil {
		return "", fmt.Errorf("observation cap: %w", err)
	}
	t, err := tok.Decode(ids[len(ids)-tail:])
	if err != nil {
		return "", fmt.Errorf("observation cap: %w", err)
	}
	return trimBroken(h, false) + fmt.Sprintf("\n[... %d tokens cut ...]\n", len(ids)-n) + trimBroken(t, true), nil
}

// trimBroken drops a character broken by the cut: at the end of a head, at
// the start of a tail.
func trimBroken(s string, atStart bool) string {
	if atStart {
		for len(s) > 0 {
			r, size := utf8.DecodeRuneInString(s)
			if r != utf8.RuneError || size != 1 {
				break
			}
			s = s[1:]
		}
		return s
	}
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// The reductions of a trajectory's turn rewards (the run config's
// trajectory.reward).
const (
	// Max is the maximum over the answered turns (the reference's).
	Max = "max"
	// Last is the last answered turn's reward.
	Last = "last"
)

// Reduce is a trajectory's reward from its turns' rewards in turn order,
// nil for a turn without one (unanswered, ungraded, or a request_info
// turn, which is no execute turn: left out): by Max or Last. ok is false when no turn has a reward (the trajectory is
// ungraded). An unknown reduction is an error.
func Reduce(rewards []*float64, how string) (reward float64, ok bool, err error) {
	at, err := ReduceAt(rewards, how)
	if at < 0 || err != nil {
		return 0, false, err
	}
	return *rewards[at], true, nil
}

// NoExecuteTurn reports whether a trajectory's turns, by the statuses of
// their answers, were all request_info turns (backend.StatusInfo): the
// trajectory executed nothing, and its reward is 0 (the reference's
// maximum over its execute turns starts at 0), never ungraded; a policy
// that only asks for the data's structure is not left out of training.
func NoExecuteTurn(statuses []string) bool {
	for _, s := range statuses {
		if s != backend.StatusInfo {
			return false
		}
	}
	return len(statuses) > 0
}

// ReduceAt is the index of the turn whose reward Reduce gives (the first
// turn of the maximum under Max), or -1 when no turn has a reward.
func ReduceAt(rewards []*float64, how string) (int, error) {
	if how != Max && how != Last {
		return -1, fmt.Errorf("reduction %q: want %q or %q", how, Max, Last)
	}
	at := -1
	for i, r := range rewards {
		if r == nil {
			continue
		}
		if at < 0 || how == Last || *r > *rewards[at] {
			at = i
		}
	}
	return at, nil
}
