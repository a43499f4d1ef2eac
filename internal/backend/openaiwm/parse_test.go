package openaiwm

import (
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
)

func graded(s float64) backend.Prediction { return backend.Prediction{Graded: true, Score: s} }

// rung is a graded prediction with its ladder status and feedback.
func rung(s float64, status, feedback string) backend.Prediction {
	return backend.Prediction{Graded: true, Score: s, Status: status, Feedback: feedback}
}

var ungraded = backend.Prediction{}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name string
		give string
		want backend.Prediction
	}{
		{"plain score", `{"score": 0.25}`, graded(0.25)},
		{"integer score", `{"score": 1}`, graded(1)},
		{"zero score", `{"score": 0}`, graded(0)},
		{"score out of range", `{"score": 1.5}`, ungraded},
		{"negative score", `{"score": -0.1}`, ungraded},
		{"score as a string", `{"score": "0.5"}`, ungraded},
		{"malformed", `{"status": "malformed"}`, rung(0, "invalid_program", "")},
		{"syntax_err", `{"status": "syntax_err", "quality": 0.9}`, rung(0, "invalid_program", "")},
		{"runtime_err", `{"status": "runtime_err"}`, rung(0.1, "runtime_error", "")},
		{"ran_no_sub", `{"status": "ran_no_sub", "quality": 0.3}`, rung(0.2, "invalid_output", "")},
		{"valid", `{"status": "valid", "quality": 0.5}`, rung(0.75, "ok", "")},
		{"valid top", `{"status": "valid", "quality": 1}`, rung(1, "ok", "")},
		{"valid status in capitals", `{"status": " Valid ", "quality": 0}`, rung(0.5, "ok", "")},
		{"valid with position", `{"status": "valid", "position": 0.2}`, rung(0.6, "ok", "")},
		{"valid without quality", `{"status": "valid"}`, ungraded},
		{"valid quality out of range", `{"status": "valid", "quality": 2}`, ungraded},
		{"valid bad quality, good position", `{"status": "valid", "quality": 2, "position": 0.5}`, ungraded},
		{"unknown status", `{"status": "fine", "quality": 0.5}`, ungraded},
		{"status not a string", `{"status": 3}`, ungraded},
		{"no score key", `{"prediction": 0.5}`, ungraded},
		{"empty", ``, ungraded},
		{"prose", `I think it scores about 0.7.`, ungraded},
		{"broken json", `{"score": 0.7`, ungraded},
		{"trailing comma", `{"score": 0.7,}`, ungraded},
		{"last object wins", `{"score": 0.1} then {"score": 0.9}`, graded(0.9)},
		{"last valid object wins over a broken one", `{"score": 0.4} and finally {"score": 0.9`, graded(0.4)},
		{"nested object is not a candidate", `{"answer": {"score": 0.9}}`, ungraded},
		{"braces inside strings", `{"score": 0.3, "note": "a } and a { and \"}\""}`, graded(0.3)},
		{"markdown fence", "Sure.\n```json\n{\"score\": 0.66}\n```\n", graded(0.66)},
		{"think block", "<think>{\"score\": 0.9}</think>{\"score\": 0.2}", graded(0.2)},
		{"two think blocks", "<think>a</think>{\"score\": 0.3}<think>{\"score\": 0.8}</think>", graded(0.3)},
		{"unterminated think", "{\"score\": 0.2}<think>maybe {\"score\": 0.9}", graded(0.2)},
		{"only unterminated think", "<think>maybe {\"score\": 0.9}", ungraded},
		{"lone closing think", "reasoning {\"score\": 0.9}</think>\n{\"score\": 0.4}", graded(0.4)},
		{"lone closing think, no answer", "reasoning {\"score\": 0.9}</think>", ungraded},
		// The reference's answer (ml_research/world_model/prompts.py,
		// HOLISTIC; server.py's guided-JSON schema).
		{"reference runtime_err", `{"reason": "r", "predictions": [{"status": "runtime_err", "error_type": "KeyError", ` +
			`"error_line": 12, "quality_bucket": "", "env_feedback": "Traceback (most recent call last):\n  File \"solution.py\", ` +
			`line 12\nKeyError: 'y'", "confidence": 0.7}, {"status": "valid", "error_type": "", "error_line": 0, ` +
			`"quality_bucket": "mid", "env_feedback": "", "confidence": 0.3}]}`,
			rung(0.1, "runtime_error", "Traceback (most recent call last):\n  File \"solution.py\", line 12\nKeyError: 'y'")},
		{"reference valid low", `{"predictions": [{"status": "valid", "quality_bucket": "low", "env_feedback": "ok"}]}`,
			rung(0.525, "ok", "ok")},
		{"reference valid fair", `{"predictions": [{"status": "valid", "quality_bucket": "fair"}]}`, rung(0.6, "ok", "")},
		{"reference valid mid", `{"predictions": [{"status": "valid", "quality_bucket": "Mid"}]}`, rung(0.725, "ok", "")},
		{"reference valid high", `{"predictions": [{"status": "valid", "quality_bucket": "high"}]}`, rung(0.875, "ok", "")},
		{"reference one prediction alone", `{"status": "ran_no_sub", "quality_bucket": "", "env_feedback": ` +
			`"SubmissionNotFoundError: No submission file found"}`,
			rung(0.2, "invalid_output", "SubmissionNotFoundError: No submission file found")},
		{"reference header stripped", `{"predictions": [{"status": "runtime_err", "env_feedback": ` +
			`"=== Code Execution Results ===\nExecution failed: MemoryError"}]}`,
			rung(0.1, "runtime_error", "Execution failed: MemoryError")},
		{"reference error type and line, no feedback", `{"predictions": [{"status": "runtime_err", ` +
			`"error_type": "NameError", "error_line": 3, "env_feedback": ""}]}`, rung(0.1, "runtime_error", "NameError at line 3")},
		{"reference error type, no line", `{"predictions": [{"status": "runtime_err", "error_type": "NameError", ` +
			`"error_line": 0}]}`, rung(0.1, "runtime_error", "NameError")},
		{"reference valid without a bucket", `{"predictions": [{"status": "valid", "quality_bucket": ""}]}`, ungraded},
		{"reference unknown bucket", `{"predictions": [{"status": "valid", "quality_bucket": "great"}]}`, ungraded},
		{"reference empty predictions", `{"reason": "r", "predictions": []}`, ungraded},
		{"reference predictions not a list", `{"predictions": {"status": "valid"}}`, ungraded},
		{"reference prediction without status", `{"predictions": [{"quality_bucket": "high"}]}`, ungraded},
		{"reference unknown status", `{"predictions": [{"status": "crashed"}]}`, ungraded},
		{"reference only the first is read", `{"predictions": [{"status": "bogus"}, {"status": "valid", ` +
			`"quality_bucket": "high"}]}`, ungraded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.give); got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.give, got, tt.want)
			}
		})
	}
}

// ParseAnswer says why an answer holds no prediction, naming the field.
func TestParseAnswerReasons(t *testing.T) {
	for _, tt := range []struct{ give, want string }{
		{`no json here`, "no JSON object"},
		{`{"predictions": []}`, "predictions: empty"},
		{`{"predictions": 3}`, "predictions: not a list"},
		{`{"predictions": [{"quality_bucket": "low"}]}`, "predictions[0].status: missing"},
		{`{"predictions": [{"status": "crashed"}]}`, `predictions[0].status: "crashed", want malformed`},
		{`{"predictions": [{"status": "valid", "quality_bucket": "great"}]}`, `predictions[0].quality_bucket: "great"`},
		{`{"predictions": [{"status": "valid", "quality_bucket": ""}]}`, "predictions[0].status valid without a quality_bucket"},
		{`{"status": "valid", "quality": 2}`, "quality: 2, want a number in [0,1]"},
		{`{"score": 1.5}`, "score: 1.5"},
		{`{"answer": 1}`, `no "predictions", "status" or "score"`},
	} {
		p, err := ParseAnswer(tt.give)
		if p != ungraded || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAnswer(%q) = %+v, %v; want ungraded and an error containing %q", tt.give, p, err, tt.want)
		}
	}
	if _, err := ParseAnswer(`{"score": 0.5}`); err != nil {
		t.Errorf("ParseAnswer of a score: %v", err)
	}
}

// A text of many unbalanced braces is read in bounded time (and holds no
// answer).
func TestParseManyBraces(t *testing.T) {
	text := strings.Repeat(`{"a": `, 200_000)
	if got := Parse(text); got != ungraded {
		t.Errorf("Parse of unbalanced braces = %+v, want ungraded", got)
	}
	if got := Parse(text + `}`); got != ungraded {
		t.Errorf("Parse = %+v, want ungraded", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"score": 0.5}`, `<think>x</think>{"status":"valid","quality":0.1}`, `{"a":"}"}`, "```json\n{}\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := Parse(s)
		if p.Graded && !(p.Score >= 0 && p.Score <= 1) || !p.Graded && p.Score != 0 {
			t.Errorf("Parse(%q) = %+v", s, p)
		}
	})
}
