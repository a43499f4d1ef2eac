package pysandbox

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/dockerrun"
	"github.com/wmrl/wmrl/internal/tasks"
)

// TestFeedbackOf: the observation of each rung, from hand-made runs
// (no engine): the status line, the streams with their sizes, the
// traceback's tail of a long stderr, the metric and position of a valid
// submission, and a bounded size whatever the script printed.
func TestFeedbackOf(t *testing.T) {
	task := &tasks.Task{Spec: tasks.Spec{ID: "x", Metric: "rmse", Direction: tasks.Minimize}}
	// A stream as Run keeps it: a HeadTail of DefaultOutputBytes.
	kept := func(s string) ([]byte, int64) {
		h := dockerrun.NewHeadTail(DefaultOutputBytes/2, DefaultOutputBytes/2)
		h.Write([]byte(s))
		return h.Bytes(), h.Total()
	}
	flood := strings.Repeat("noise line é\n", 300000) // 4.2 MB, two-byte characters
	trace := "Traceback (most recent call last):\n  File \"solution.py\", line 3, in <module>\nZeroDivisionError: division by zero\n"
	errOut, errN := kept(flood + trace)
	out, outN := kept("epoch 1 loss 0.5\n")
	cases := []struct {
		name string
		r    Result
		want []string
		not  []string
	}{
		{name: "valid", r: Result{Status: StatusValid, Metric: 1.25, Position: 0.75,
			Run: Run{Stdout: out, StdoutBytes: outN}},
			want: []string{"valid: the submission was scored\n", "--- stdout (17 bytes) ---\nepoch 1 loss 0.5\n",
				"Valid submission: rmse 1.25 (lower is better), leaderboard position 0.750"},
			not: []string{"stderr"}},
		{name: "runtime", r: Result{Status: StatusRuntimeErr, Failure: FailureExit, Run: Run{ExitCode: 1, Stderr: errOut, StderrBytes: errN}},
			want: []string{"runtime_err: exit code 1\n", "--- stderr (", "bytes cut ...]", "noise line", trace},
			not:  []string{"Valid submission"}},
		{name: "timeout", r: Result{Status: StatusRuntimeErr, Failure: FailureTimeout, Run: Run{TimedOut: true}},
			want: []string{"runtime_err: killed at the deadline\n"}},
		{name: "no submission", r: Result{Status: StatusRanNoSub, Detail: "no submission.csv in /work"},
			want: []string{"ran_no_sub: no submission.csv in /work\n"}},
		{name: "syntax", r: Result{Status: StatusSyntaxErr, Run: Run{Stderr: []byte("SyntaxError: invalid syntax\n"), StderrBytes: 28}},
			want: []string{"syntax_err: the script does not compile\n", "SyntaxError: invalid syntax"}},
		{name: "malformed", r: Result{Status: StatusMalformed, Detail: "no code: the solution is empty"},
			want: []string{"malformed: no code: the solution is empty\n"}},
	}
	for _, c := range cases {
		got := FeedbackOf(task, c.r)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: feedback lacks %q:\n%s", c.name, w, got)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: feedback has %q:\n%s", c.name, w, got)
			}
		}
		if len(got) > 2*(feedbackHeadBytes+feedbackTailBytes)+512 || !utf8.ValidString(got) {
			t.Errorf("%s: feedback of %d bytes (valid UTF-8 %v)", c.name, len(got), utf8.ValidString(got))
		}
	}
	// The cut count is of the stream as written: head + cut + tail = total.
	got := FeedbackOf(task, cases[1].r)
	if !strings.Contains(got, dockerrun.CutLine(errN-feedbackHeadBytes-feedbackTailBytes)) {
		t.Errorf("the cut line does not count the %d bytes written:\n%.2000s", errN, got)
	}
}

// TestRequestInfo: a request_info item runs nothing (no container) and is
// answered from the task's public files; an unknown action is refused.
func TestRequestInfo(t *testing.T) {
	e := newTestEnv(t, Options{})
	g := &Grader{Sandbox: e.sb, Tasks: e.store}
	ctx := context.Background()
	got, err := g.Grade(ctx, backend.GradeRequest{Limits: testLimits(finishDeadline), Items: []backend.GradeItem{
		{Task: backend.Task{ID: "synth-a"}, Action: backend.ActionRequestInfo, Solution: "raise SystemExit(1)"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.checkClean(t, "")
	r := got[0]
	if !r.Graded || r.Status != backend.StatusInfo || r.Score != 0 || r.CPUSeconds != 0 || r.WallSeconds != 0 {
		t.Errorf("request_info: %+v", r)
	}
	for _, w := range []string{"DATA STRUCTURE", "train.csv", "test.csv", "sample_submission.csv", "rows, columns:"} {
		if !strings.Contains(r.Feedback, w) {
			t.Errorf("request_info feedback lacks %q:\n%s", w, r.Feedback)
		}
	}
	if strings.Contains(r.Feedback, "private") || strings.Contains(r.Feedback, "answers") {
		t.Errorf("request_info names private files:\n%s", r.Feedback)
	}
	_, err = g.Grade(ctx, backend.GradeRequest{Limits: testLimits(finishDeadline), Items: []backend.GradeItem{
		{Task: backend.Task{ID: "synth-a"}, Action: "dance", Solution: logistic}}})
	if !backend.IsPermanent(err) || !strings.Contains(err.Error(), `action "dance"`) {
		t.Errorf("unknown action: %v", err)
	}
}

// TestGraderFeedback: a real execution's Feedback has the script's output
// and, valid, its metric and position; a crash has the traceback.
func TestGraderFeedback(t *testing.T) {
	e := newTestEnv(t, Options{})
	g := &Grader{Sandbox: e.sb, Tasks: e.store}
	got, err := g.Grade(context.Background(), backend.GradeRequest{Limits: testLimits(finishDeadline), Items: []backend.GradeItem{
		{Task: backend.Task{ID: "synth-a"}, Solution: logistic, Seed: 1},
		{Task: backend.Task{ID: "synth-a"}, Solution: "print('before')\nx = 1 / 0\n", Seed: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range [][]string{
		{"valid: the submission was scored", "--- stdout (", "fitted", "Valid submission: ", "leaderboard position"},
		{"runtime_err: exit code 1", "before", "--- stderr (", "Traceback", "ZeroDivisionError: division by zero"},
	} {
		for _, s := range w {
			if !strings.Contains(got[i].Feedback, s) {
				t.Errorf("item %d (%s): feedback lacks %q:\n%s", i, got[i].Status, s, got[i].Feedback)
			}
		}
		t.Logf("item %d feedback:\n%s", i, got[i].Feedback)
	}
	if !strings.HasPrefix(got[0].Detail, "valid: ") || !strings.HasPrefix(got[1].Detail, "runtime_err: exit code 1: ") {
		t.Errorf("details %q, %q", got[0].Detail, got[1].Detail)
	}
}
