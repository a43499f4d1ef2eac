package openaiwm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
)

// The reference's statuses (the method's world-model server answers them)
// and the ladder's: each is a ladder status (executor.Status) and, but for
// valid, its fixed reward.
var ladder = map[string]struct {
	status executor.Status
	reward float64
}{
	"malformed":   {executor.StatusInvalidProgram, 0},
	"syntax_err":  {executor.StatusInvalidProgram, 0},
	"runtime_err": {executor.StatusRuntimeError, 0.1},
	"ran_no_sub":  {executor.StatusInvalidOutput, 0.2},
}

// The valid rung of the ladder: 0.5 + 0.5·quality.
const (
	StatusValid = "valid"
	ValidBase   = 0.5
	ValidSpan   = 0.5
)

// BucketPosition is the leaderboard position a valid answer's
// quality_bucket stands for: the positions the method's fidelity harness
// (ml_research/world_model/fidelity.py) gives its buckets when it compares
// a predicted reward with the real one, which it buckets at 0.1, 0.3 and
// 0.6. A valid answer scores ValidBase + ValidSpan·position: 0.525, 0.6,
// 0.725, 0.875.
var BucketPosition = map[string]float64{"low": 0.05, "fair": 0.20, "mid": 0.45, "high": 0.75}

// QualityBucket is the bucket of a leaderboard position, as the fidelity
// harness buckets real positions: low below 0.1, fair below 0.3, mid below
// 0.6, high from 0.6.
func QualityBucket(position float64) string {
	switch {
	case position < 0.1:
		return "low"
	case position < 0.3:
		return "fair"
	case position < 0.6:
		return "mid"
	}
	return "high"
}

// maxAnswer bounds the text Parse reads: a longer answer is cut (its last
// JSON object is then usually lost, and the prediction ungraded).
const maxAnswer = 1 << 20

// Parse is ParseAnswer without the reason an answer holds no prediction:
// the prediction, ungraded when there is none. It never fails and never
// turns a non-answer into 0.
func Parse(text string) backend.Prediction {
	p, _ := ParseAnswer(text)
	return p
}

// ParseAnswer reads a prediction from a model's answer text. It drops
// reasoning blocks (<think>…</think>, an unterminated <think> to the end,
// and everything before a lone </think>), takes the last balanced JSON
// object of what remains (a markdown fence around it is fine), and reads
// one of:
//
//   - the reference's answer, {"reason": ..., "predictions": [p1, p2]}, or
//     one prediction p1 alone, each {"status", "error_type", "error_line",
//     "quality_bucket", "env_feedback", "confidence"}: the first
//     prediction is the one graded, as the reference grades its top one
//     (WM_RWD_TOP 1); the others are the model's hedges and are not read;
//   - {"status": st, "quality": q} on the reward ladder ("position" is
//     accepted for "quality");
//   - {"score": s} with s in [0,1].
//
// A status is scored on the reward ladder: malformed and syntax_err 0
// (invalid_program), runtime_err 0.1 (runtime_error), ran_no_sub 0.2
// (invalid_output), valid 0.5 + 0.5·position (ok), the position being
// BucketPosition of its quality_bucket, else its quality in [0,1]. The
// prediction's Status is that ladder status and its Feedback the
// env_feedback, without a leading "=== … ===" line (the observation has
// its own header, as the reference's server strips it for its agent loop);
// with no env_feedback, the error type and line ("KeyError at line 12")
// when given, else "" (the ladder's description, turns.WorldModelAnswer).
//
// Anything else is an ungraded prediction and an error saying what was
// wrong: no JSON object, an unknown status, a valid status without a
// bucket or quality, a bucket or score out of range.
func ParseAnswer(text string) (backend.Prediction, error) {
	if len(text) > maxAnswer {
		text = text[:maxAnswer]
	}
	obj := lastObject(stripReasoning(text))
	if obj == nil {
		return backend.Prediction{}, errors.New("the answer holds no JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		return backend.Prediction{}, fmt.Errorf("the answer's last JSON object: %w", err)
	}
	where := ""
	if raw, ok := fields["predictions"]; ok {
		var preds []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &preds); err != nil {
			return backend.Prediction{}, fmt.Errorf("predictions: not a list of objects: %w", err)
		}
		if len(preds) == 0 || preds[0] == nil {
			return backend.Prediction{}, errors.New("predictions: empty, want at least one prediction")
		}
		fields, where = preds[0], "predictions[0]."
	}
	if raw, ok := fields["status"]; ok {
		return readOutcome(fields, raw, where)
	}
	if where != "" {
		return backend.Prediction{}, errors.New("predictions[0].status: missing")
	}
	if raw, ok := fields["score"]; ok {
		s, ok := unit(raw)
		if !ok {
			return backend.Prediction{}, fmt.Errorf("score: %s, want a number in [0,1]", clip(string(raw)))
		}
		return backend.Prediction{Graded: true, Score: s}, nil
	}
	return backend.Prediction{}, errors.New(`the answer's last JSON object has no "predictions", "status" or "score"`)
}

// readOutcome reads a status answer (one prediction); where prefixes the
// names of its fields in errors.
func readOutcome(fields map[string]json.RawMessage, raw json.RawMessage, where string) (backend.Prediction, error) {
	var status string
	if json.Unmarshal(raw, &status) != nil {
		return backend.Prediction{}, fmt.Errorf("%sstatus: %s, want a string", where, clip(string(raw)))
	}
	status = strings.ToLower(strings.TrimSpace(status))
	p := backend.Prediction{Graded: true, Feedback: feedbackOf(fields)}
	if rung, ok := ladder[status]; ok {
		p.Status, p.Score = string(rung.status), rung.reward
		return p, nil
	}
	if status != StatusValid {
		return backend.Prediction{}, fmt.Errorf("%sstatus: %q, want malformed, syntax_err, runtime_err, ran_no_sub or valid",
			where, clip(status))
	}
	q, err := position(fields, where)
	if err != nil {
		return backend.Prediction{}, err
	}
	p.Status, p.Score = string(executor.StatusOK), ValidBase+ValidSpan*q
	return p, nil
}

// position is a valid answer's leaderboard position: its quality_bucket
// when it has a non-empty one, else its quality, else its position.
func position(fields map[string]json.RawMessage, where string) (float64, error) {
	if raw, ok := fields["quality_bucket"]; ok {
		var b string
		if json.Unmarshal(raw, &b) != nil {
			return 0, fmt.Errorf("%squality_bucket: %s, want a string", where, clip(string(raw)))
		}
		if b = strings.ToLower(strings.TrimSpace(b)); b != "" {
			q, ok := BucketPosition[b]
			if !ok {
				return 0, fmt.Errorf("%squality_bucket: %q, want low, fair, mid or high", where, clip(b))
			}
			return q, nil
		}
	}
	for _, k := range []string{"quality", "position"} {
		raw, has := fields[k]
		if !has {
			continue
		}
		q, ok := unit(raw)
		if !ok {
			return 0, fmt.Errorf("%s%s: %s, want a number in [0,1]", where, k, clip(string(raw)))
		}
		return q, nil
	}
	return 0, fmt.Errorf("%sstatus valid without a quality_bucket (or quality)", where)
}

// header is a leading "=== … ===" line of an env_feedback.
var header = regexp.MustCompile(`^\s*===[^\n]*===[ \t]*(\n|$)`)

// feedbackOf is a prediction's observation text: its env_feedback without
// a leading header line, else its error type and line, else "".
func feedbackOf(fields map[string]json.RawMessage) string {
	var fb, errType string
	var line float64
	_ = json.Unmarshal(fields["env_feedback"], &fb)
	if fb = strings.TrimSpace(header.ReplaceAllString(fb, "")); fb != "" {
		return fb
	}
	_ = json.Unmarshal(fields["error_type"], &errType)
	if errType = strings.TrimSpace(errType); errType == "" {
		return ""
	}
	if json.Unmarshal(fields["error_line"], &line) == nil && line >= 1 && line == math.Trunc(line) && line < 1e9 {
		return fmt.Sprintf("%s at line %d", errType, int(line))
	}
	return errType
}

// clip shortens a value quoted in an error.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// unit reads a JSON number in [0,1].
func unit(raw json.RawMessage) (float64, bool) {
	if raw == nil {
		return 0, false
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil || math.IsNaN(v) || v < 0 || v > 1 {
		return 0, false
	}
	return v, true
}

// stripReasoning removes <think>…</think> blocks, an unterminated <think>
// and what follows it, and, when a </think> has no opening tag (a chat
// template that opened the block in the prompt), everything up to it.
func stripReasoning(s string) string {
	const open, close = "<think>", "</think>"
	var b strings.Builder
	for {
		i := strings.Index(s, open)
		j := strings.Index(s, close)
		switch {
		case j >= 0 && (i < 0 || j < i):
			// A closing tag before any opening one: what precedes it
			// was reasoning.
			b.Reset()
			s = s[j+len(close):]
		case i >= 0:
			b.WriteString(s[:i])
			rest := s[i+len(open):]
			k := strings.Index(rest, close)
			if k < 0 {
				return b.String()
			}
			s = rest[k+len(close):]
		default:
			b.WriteString(s)
			return b.String()
		}
	}
}

// scanBudget bounds the bytes lastObject reads in all (a text of many
// unbalanced braces would cost quadratic time): past it the scan stops
// with what it found.
const scanBudget = 1 << 24

// lastObject returns the last balanced JSON object in s: scanning left to
// right, each '{' that starts a balanced, valid object is taken whole (its
// inner objects are not candidates) and the scan resumes after it.
func lastObject(s string) []byte {
	var last []byte
	budget := scanBudget
	for i := 0; i < len(s) && budget > 0; i++ {
		if s[i] != '{' {
			continue
		}
		end := balanced(s, i, &budget)
		if end < 0 {
			continue
		}
		if obj := []byte(s[i:end]); json.Valid(obj) {
			last = obj
			i = end - 1
		}
	}
	return bytes.TrimSpace(last)
}

// balanced returns the end (exclusive) of the brace-balanced span starting
// at the '{' at s[i], minding braces inside JSON strings, or -1. It
// spends one unit of *budget per byte read.
func balanced(s string, i int, budget *int) int {
	depth, inString, escaped := 0, false, false
	for j := i; j < len(s); j++ {
		if *budget--; *budget < 0 {
			return -1
		}
		c := s[j]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}
