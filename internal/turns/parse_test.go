package turns

import (
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/tokenizer"
)

// ParseObservation reads back what Render wrote, graded or not, and
// refuses a text of another form naming the line.
func TestParseObservation(t *testing.T) {
	for _, a := range []Answer{
		{Graded: true, Status: "ok", Score: 0.9, Feedback: "status: fake\nscore bucket: 1/4"},
		{Graded: true, Status: "runtime_error", Score: 0.1},
		{Status: "ungraded", Feedback: "no verdict"},
	} {
		text, err := Render(a, 100, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseObservation(text)
		want := Parsed{Status: a.Status, Graded: a.Graded}
		if a.Graded {
			want.Bucket = Bucket(a.Score)
		}
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", text, got, err, want)
		}
	}
	for _, tt := range []struct{ text, want string }{
		{"status: ok\n", "observation: want"},
		{Header + "\nstate: ok\nscore bucket: 1/4\n", "line 2"},
		{Header + "\nstatus: ok\nscore bucket: 5/4\n", "line 3"},
		{Header + "\nstatus: ok\nscore: 1/4\n", "line 3"},
	} {
		if _, err := ParseObservation(tt.text); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error with %q", tt.text, err, tt.want)
		}
	}
}
