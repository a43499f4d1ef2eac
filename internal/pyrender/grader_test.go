package pyrender

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
)

// fakePython records what it is asked to run and grades every item ok.
type fakePython struct {
	got []backend.GradeItem
	err error
}

func (f *fakePython) Grade(_ context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.got = append(f.got, req.Items...)
	out := make([]backend.Grade, len(req.Items))
	for i, it := range req.Items {
		out[i] = backend.Grade{Graded: true, Status: "ok", Score: 0.75, Detail: it.Task.ID}
	}
	return out, nil
}

func (f *fakePython) Preflight(context.Context, backend.Limits) error { return nil }

// TestGrader: programs reach Python rendered, in order; a text that does
// not parse (or is not a valid program) is invalid_program with reward 0
// and never reaches Python; the Python grader's error is the grader's.
func TestGrader(t *testing.T) {
	py := &fakePython{}
	g := &Grader{Python: py}
	items := []backend.GradeItem{
		{Task: backend.Task{ID: "a"}, Solution: "standardize | ridge alpha=1"},
		{Task: backend.Task{ID: "b"}, Solution: "this is not a program"},
		{Task: backend.Task{ID: "c"}, Solution: "knn k=5"},
		{Task: backend.Task{ID: "d"}, Solution: ""},
	}
	gs, err := g.Grade(context.Background(), backend.GradeRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 4 {
		t.Fatalf("%d grades, want 4", len(gs))
	}
	for _, i := range []int{0, 2} {
		if gs[i].Status != "ok" || gs[i].Detail != items[i].Task.ID {
			t.Errorf("item %d: %+v, want Python's grade of it", i, gs[i])
		}
	}
	for _, i := range []int{1, 3} {
		if !gs[i].Graded || gs[i].Status != "invalid_program" || gs[i].Score != 0 || !strings.HasPrefix(gs[i].Detail, "parse: ") ||
			!strings.HasPrefix(gs[i].Feedback, "invalid_program: the program does not parse") {
			t.Errorf("item %d: %+v, want invalid_program with reward 0", i, gs[i])
		}
	}
	if len(py.got) != 2 || py.got[0].Task.ID != "a" || py.got[1].Task.ID != "c" {
		t.Fatalf("python ran %v, want a and c", py.got)
	}
	for _, it := range py.got {
		if !strings.Contains(it.Solution, "import") || !strings.Contains(it.Solution, "model = ") {
			t.Errorf("task %s: python got %q, want a rendered script", it.Task.ID, it.Solution)
		}
	}
	// Nothing to run: Python is not asked.
	py.got = nil
	if _, err := g.Grade(context.Background(), backend.GradeRequest{Items: items[1:2]}); err != nil || py.got != nil {
		t.Errorf("only malformed items: err %v, python ran %v", err, py.got)
	}
	py.err = errors.New("engine down")
	if _, err := g.Grade(context.Background(), backend.GradeRequest{Items: items}); err == nil {
		t.Error("python grader failed, want the error")
	}
}

// TestGraderRequestInfo: a request_info item reaches Python as it is
// (nothing rendered, its text no program), in order with the others.
func TestGraderRequestInfo(t *testing.T) {
	py := &fakePython{}
	g := &Grader{Python: py}
	items := []backend.GradeItem{
		{Task: backend.Task{ID: "a"}, Action: backend.ActionRequestInfo, Solution: "not a program"},
		{Task: backend.Task{ID: "b"}, Action: backend.ActionExecuteCode, Solution: "knn k=5"},
	}
	gs, err := g.Grade(context.Background(), backend.GradeRequest{Items: items})
	if err != nil || len(gs) != 2 || gs[0].Detail != "a" || gs[1].Detail != "b" {
		t.Fatalf("grades %+v, %v", gs, err)
	}
	if len(py.got) != 2 || py.got[0].Action != backend.ActionRequestInfo || py.got[0].Solution != "not a program" || !strings.Contains(py.got[1].Solution, "model = ") {
		t.Errorf("python got %+v", py.got)
	}
}
