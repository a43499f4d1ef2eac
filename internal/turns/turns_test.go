package turns

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/tokenizer"
)

func TestBucket(t *testing.T) {
	tests := []struct {
		give float64
		want int
	}{
		{0, 0}, {0.1, 0}, {0.2, 0}, {0.4999, 0},
		{0.5, 1}, {0.62, 1}, {0.625, 2}, {0.75, 3}, {0.874, 3}, {0.875, 4}, {1, 4},
	}
	for _, tt := range tests {
		if got := Bucket(tt.give); got != tt.want {
			t.Errorf("Bucket(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

// TestLadderStatus: every rung of the ladder is read back as its own
// status (the ladder's failure statuses that share 0.1 as runtime_error).
func TestLadderStatus(t *testing.T) {
	for _, s := range executor.Statuses() {
		want := s
		if s == executor.StatusTimeout || s == executor.StatusMemory {
			want = executor.StatusRuntimeError
		}
		for _, pos := range []float64{0, 0.5, 1} {
			if got := LadderStatus(executor.Reward(s, pos)); got != want {
				t.Errorf("LadderStatus(Reward(%s, %v)) = %s, want %s", s, pos, got, want)
			}
		}
	}
}

// observationForm is the form of every observation: header, status,
// bucket, feedback.
var observationForm = regexp.MustCompile(`^=== Execution result ===\nstatus: [a-z_]+\nscore bucket: (none|[0-4]/4)\n[^\n].*\n$`)

// TestGraderAndWorldModelSameFormat: the built-in grader's verdict and the
// built-in world model's prediction of the same outcome render to the same
// observation, byte for byte; and every answer of either has one form.
func TestGraderAndWorldModelSameFormat(t *testing.T) {
	tests := []struct {
		name  string
		grade backend.Grade
		pred  backend.Prediction
	}{
		{"valid, top quarter", backend.Grade{Graded: true, Status: "ok", Score: 0.95, Position: 0.9, Detail: "metric 0.81"},
			backend.Prediction{Graded: true, Score: 0.95}},
		{"valid, low", backend.Grade{Graded: true, Status: "ok", Score: 0.55, Position: 0.1},
			backend.Prediction{Graded: true, Score: 0.55}},
		{"runtime error", backend.Grade{Graded: true, Status: "runtime_error", Score: 0.1, Detail: "singular matrix"},
			backend.Prediction{Graded: true, Score: 0.1}},
		{"invalid output", backend.Grade{Graded: true, Status: "invalid_output", Score: 0.2},
			backend.Prediction{Graded: true, Score: 0.2}},
		{"invalid program", backend.Grade{Graded: true, Status: "invalid_program", Score: 0, Detail: "parse error at 3"},
			backend.Prediction{Graded: true, Score: 0}},
		{"ungraded", backend.Grade{Status: backend.StatusUngraded}, backend.Prediction{}},
	}
	for _, tt := range tests {
		g, err := Render(GraderAnswer(tt.grade), 1200, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := Render(WorldModelAnswer(tt.pred), 1200, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		if g != w {
			t.Errorf("%s: grader %q, world model %q: want the same observation", tt.name, g, w)
		}
		if !observationForm.MatchString(g) {
			t.Errorf("%s: %q is not of the observation's form", tt.name, g)
		}
		if tt.grade.Detail != "" && strings.Contains(g, tt.grade.Detail) {
			t.Errorf("%s: the grader's detail %q shows in %q (the world model cannot predict it)", tt.name, tt.grade.Detail, g)
		}
	}
	// Predictions between the rungs still render in the form, with the
	// rung's status.
	for _, p := range []float64{0.03, 0.07, 0.13, 0.3, 0.49, 0.77} {
		w, err := Render(WorldModelAnswer(backend.Prediction{Graded: true, Score: p}), 1200, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		if !observationForm.MatchString(w) || !strings.Contains(w, "status: "+string(LadderStatus(p))+"\n") {
			t.Errorf("prediction %v: %q", p, w)
		}
	}
}

func TestRenderExact(t *testing.T) {
	got, err := Render(Answer{Graded: true, Status: "ok", Score: 0.8, Feedback: "metric 0.9, position 0.6"}, 100, tokenizer.Bytes{})
	if err != nil {
		t.Fatal(err)
	}
	want := "=== Execution result ===\nstatus: ok\nscore bucket: 3/4\nmetric 0.9, position 0.6\n"
	if got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

// TestCap: a text within the cap is unchanged; a longer one keeps its
// first and last halves of the cap with the count of what was cut, and a
// character split by the cut is dropped, never left broken.
func TestCap(t *testing.T) {
	short := "traceback: line 3"
	if got, err := Cap(short, len(short), tokenizer.Bytes{}); err != nil || got != short {
		t.Errorf("Cap(short) = %q, %v", got, err)
	}
	long := "HEAD" + strings.Repeat("x", 100) + "TAIL"
	got, err := Cap(long, 8, tokenizer.Bytes{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "HEAD\n[... 100 tokens cut ...]\nTAIL"; got != want {
		t.Errorf("Cap(long, 8) = %q, want %q", got, want)
	}
	got, err = Cap(long, 9, tokenizer.Bytes{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "HEAD\n[... 99 tokens cut ...]\nxTAIL"; got != want {
		t.Errorf("Cap(long, 9) = %q, want %q", got, want)
	}
	// "é" is two bytes: a cut inside it drops it (cap 4: 2 bytes each
	// side), a cut next to it keeps it (cap 6: 3 bytes each side).
	text := "aé" + strings.Repeat("-", 20) + "éb"
	for _, tt := range []struct {
		cap  int
		want string
	}{{4, "a\n[... 22 tokens cut ...]\nb"}, {6, "aé\n[... 20 tokens cut ...]\néb"}} {
		got, err = Cap(text, tt.cap, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(got) || got != tt.want {
			t.Errorf("Cap(%d) across characters = %q, want %q", tt.cap, got, tt.want)
		}
	}
	if _, err := Cap(long, 1, tokenizer.Bytes{}); err == nil {
		t.Error("Cap(1) gave no error")
	}
	// Render caps the feedback, not the header.
	obs, err := Render(Answer{Graded: true, Status: "runtime_error", Score: 0.1, Feedback: long}, 8, tokenizer.Bytes{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "=== Execution result ===\nstatus: runtime_error\nscore bucket: 0/4\nHEAD\n[... 100 tokens cut ...]\nTAIL\n"; obs != want {
		t.Errorf("Render capped = %q, want %q", obs, want)
	}
}

func ptr(v float64) *float64 { return &v }

func TestReduce(t *testing.T) {
	tests := []struct {
		name    string
		give    []*float64
		how     string
		want    float64
		graded  bool
		wantErr bool
	}{
		{"max", []*float64{ptr(0.1), ptr(0.8), ptr(0.5)}, Max, 0.8, true, false},
		{"last", []*float64{ptr(0.1), ptr(0.8), ptr(0.5)}, Last, 0.5, true, false},
		{"max skips ungraded", []*float64{ptr(0.2), nil, nil}, Max, 0.2, true, false},
		{"last skips ungraded", []*float64{ptr(0.2), ptr(0.6), nil}, Last, 0.6, true, false},
		{"max of zeros", []*float64{ptr(0), ptr(0)}, Max, 0, true, false},
		{"one turn", []*float64{ptr(0.75)}, Max, 0.75, true, false},
		{"none graded", []*float64{nil, nil}, Max, 0, false, false},
		{"no turns", nil, Last, 0, false, false},
		{"unknown", []*float64{ptr(0.5)}, "mean", 0, false, true},
	}
	for _, tt := range tests {
		got, ok, err := Reduce(tt.give, tt.how)
		if (err != nil) != tt.wantErr || ok != tt.graded || got != tt.want {
			t.Errorf("%s: Reduce = %v, %v, %v; want %v, %v, error %v", tt.name, got, ok, err, tt.want, tt.graded, tt.wantErr)
		}
	}
}

func TestReduceAt(t *testing.T) {
	rs := []*float64{ptr(0.5), ptr(0.9), nil, ptr(0.9), ptr(0.2), nil}
	if at, err := ReduceAt(rs, Max); err != nil || at != 1 {
		t.Errorf("ReduceAt max = %d, %v; want 1 (the first turn of the maximum)", at, err)
	}
	if at, err := ReduceAt(rs, Last); err != nil || at != 4 {
		t.Errorf("ReduceAt last = %d, %v; want 4 (the last answered turn)", at, err)
	}
	if at, err := ReduceAt([]*float64{nil}, Max); err != nil || at != -1 {
		t.Errorf("ReduceAt of no reward = %d, %v; want -1", at, err)
	}
}

// An environment that brings its own text (a /grade reply's feedback, a
// remote world model's status and env_feedback) answers with it; without
// one the ladder describes the status.
func TestOwnFeedback(t *testing.T) {
	g := GraderAnswer(backend.Grade{Graded: true, Status: "runtime_error", Score: 0.1, Feedback: "Traceback: KeyError 'y'"})
	if g.Feedback != "Traceback: KeyError 'y'" || g.Status != "runtime_error" {
		t.Fatalf("grader answer %+v", g)
	}
	if g := GraderAnswer(backend.Grade{Graded: true, Status: "ok", Score: 0.9}); g.Feedback != Describe("ok") {
		t.Fatalf("grader without feedback: %q", g.Feedback)
	}
	p := WorldModelAnswer(backend.Prediction{Graded: true, Score: 0.1, Status: "timeout", Feedback: "Killed after 60 s"})
	if p.Status != "timeout" || p.Feedback != "Killed after 60 s" || p.Score != 0.1 {
		t.Fatalf("world-model answer %+v", p)
	}
	p = WorldModelAnswer(backend.Prediction{Graded: true, Score: 0.1})
	if p.Status != "runtime_error" || p.Feedback != Describe("runtime_error") {
		t.Fatalf("world-model answer without its own: %+v", p)
	}
	if u := WorldModelAnswer(backend.Prediction{Feedback: "unparsable"}); u.Graded || u.Status != backend.StatusUngraded || u.Feedback != "unparsable" {
		t.Fatalf("ungraded prediction %+v", u)
	}
}

// TestInfoAndMalformed: a request_info answer (from a grader or made here)
// holds no reward and renders with no bucket; a malformed completion is
// the invalid_program rung with reward 0 and says so; a trajectory of only
// request_info turns executed nothing.
func TestInfoAndMalformed(t *testing.T) {
	desc := "DATA STRUCTURE (read-only info):\nFiles in DATA_DIR: train.csv"
	for _, a := range []Answer{InfoAnswer(desc),
		GraderAnswer(backend.Grade{Graded: true, Status: backend.StatusInfo, Feedback: desc})} {
		if a.Graded || a.Status != backend.StatusInfo || a.Feedback != desc {
			t.Errorf("info answer %+v", a)
		}
		obs, err := Render(a, 1200, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		if want := Header + "\nstatus: info\nscore bucket: none\n" + desc + "\n"; obs != want {
			t.Errorf("info observation %q, want %q", obs, want)
		}
	}
	m := MalformedAnswer()
	if !m.Graded || m.Status != "invalid_program" || m.Score != 0 || !strings.Contains(m.Feedback, "No valid action") {
		t.Errorf("malformed answer %+v", m)
	}
	for _, c := range []struct {
		give []string
		want bool
	}{
		{[]string{"info", "info", "info"}, true},
		{[]string{"info", "ok", "info"}, false},
		{[]string{"info", "ungraded"}, false},
		{nil, false},
	} {
		if got := NoExecuteTurn(c.give); got != c.want {
			t.Errorf("NoExecuteTurn(%v) = %v", c.give, got)
		}
	}
	// An info turn has no reward: the maximum is over the execute turns.
	r := 0.3
	if got, ok, _ := Reduce([]*float64{nil, &r, nil}, Last); !ok || got != r {
		t.Errorf("last over [info, 0.3, info] = %v %v, want the execute turn's", got, ok)
	}
}
