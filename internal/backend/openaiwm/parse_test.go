package openaiwm

import (
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
)

func graded(s float64) backend.Prediction { return backend.Prediction{Graded: true, Score: s} }

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
		{"malformed", `{"status": "malformed"}`, graded(0)},
		{"syntax_err", `{"status": "syntax_err", "quality": 0.9}`, graded(0)},
		{"runtime_err", `{"status": "runtime_err"}`, graded(0.1)},
		{"ran_no_sub", `{"status": "ran_no_sub", "quality": 0.3}`, graded(0.2)},
		{"valid", `{"status": "valid", "quality": 0.5}`, graded(0.75)},
		{"valid top", `{"status": "valid", "quality": 1}`, graded(1)},
		{"valid status in capitals", `{"status": " Valid ", "quality": 0}`, graded(0.5)},
		{"valid with position", `{"status": "valid", "position": 0.2}`, graded(0.6)},
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
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.give); got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.give, got, tt.want)
			}
		})
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
