package openaiwm

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"

	"github.com/wmrl/wmrl/internal/backend"
)

// Ladder maps the statuses of the reference answer shape to r_env; a valid
// solution scores ValidBase + ValidSpan·quality.
var ladder = map[string]float64{
	"malformed":   0,
	"syntax_err":  0,
	"runtime_err": 0.1,
	"ran_no_sub":  0.2,
}

// The valid rung of the ladder: 0.5 + 0.5·quality.
const (
	StatusValid = "valid"
	ValidBase   = 0.5
	ValidSpan   = 0.5
)

// maxAnswer bounds the text Parse reads: a longer answer is cut (its last
// JSON object is then usually lost, and the prediction ungraded).
const maxAnswer = 1 << 20

// Parse reads a prediction from a model's answer text. It drops reasoning
// blocks (<think>…</think>, an unterminated <think> to the end, and
// everything before a lone </think>), takes the last balanced JSON object
// of what remains (a markdown fence around it is fine), and reads either
// {"score": s} with s in [0,1], or {"status": st, "quality": q} on the
// reward ladder (malformed and syntax_err 0, runtime_err 0.1, ran_no_sub
// 0.2, valid 0.5 + 0.5·q with q in [0,1]; "position" is accepted for
// "quality"). Anything else is ungraded: Parse never fails and never turns
// a non-answer into 0.
func Parse(text string) backend.Prediction {
	if len(text) > maxAnswer {
		text = text[:maxAnswer]
	}
	obj := lastObject(stripReasoning(text))
	if obj == nil {
		return backend.Prediction{}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		return backend.Prediction{}
	}
	if raw, ok := fields["status"]; ok {
		var status string
		if json.Unmarshal(raw, &status) != nil {
			return backend.Prediction{}
		}
		status = strings.ToLower(strings.TrimSpace(status))
		if v, ok := ladder[status]; ok {
			return backend.Prediction{Graded: true, Score: v}
		}
		if status != StatusValid {
			return backend.Prediction{}
		}
		q, ok := unit(fields["quality"])
		if !ok {
			if _, has := fields["quality"]; has {
				return backend.Prediction{}
			}
			q, ok = unit(fields["position"])
		}
		if !ok {
			return backend.Prediction{}
		}
		return backend.Prediction{Graded: true, Score: ValidBase + ValidSpan*q}
	}
	if s, ok := unit(fields["score"]); ok {
		return backend.Prediction{Graded: true, Score: s}
	}
	return backend.Prediction{}
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
