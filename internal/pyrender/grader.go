package pyrender

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/program"
)

// Grader is the grader port for built-in programs over a grader of Python
// solutions (pysandbox.Grader): each item's Solution is a program of the
// built-in pipeline language, rendered (Render) before Python runs it. A
// text that does not parse as a valid program is graded invalid_program
// with reward 0, as the built-in executor grades it, and never reaches
// Python; the other items go to Python in one request, in order. A
// request_info item (GradeItem.Action) goes to Python as it is, nothing
// rendered.
type Grader struct {
	Python backend.Grader
}

var _ backend.Grader = (*Grader)(nil)

// Grade renders and grades each item.
func (g *Grader) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	out := make([]backend.Grade, len(req.Items))
	var run []int
	var items []backend.GradeItem
	for i, it := range req.Items {
		if it.Action == backend.ActionRequestInfo {
			// Nothing to render: the Python grader answers it from the
			// task's files.
			run = append(run, i)
			items = append(items, it)
			continue
		}
		script, err := renderText(it.Solution)
		if err != nil {
			out[i] = backend.Grade{Graded: true, Status: string(executor.StatusInvalidProgram),
				Score: executor.Reward(executor.StatusInvalidProgram, 0), Detail: "parse: " + err.Error(),
				Feedback: "invalid_program: the program does not parse, nothing ran: " + err.Error() + "\n"}
			continue
		}
		it.Solution = script
		run = append(run, i)
		items = append(items, it)
	}
	if len(items) == 0 {
		return out, nil
	}
	sub := req
	sub.Items = items
	gs, err := g.Python.Grade(ctx, sub)
	if err != nil {
		return nil, err
	}
	if len(gs) != len(items) {
		return nil, fmt.Errorf("pyrender: python grader gave %d grades for %d items", len(gs), len(items))
	}
	for k, i := range run {
		out[i] = gs[k]
	}
	return out, nil
}

// Preflight asks the Python grader.
func (g *Grader) Preflight(ctx context.Context, l backend.Limits) error {
	return g.Python.Preflight(ctx, l)
}

// renderText parses, validates and renders a program's text.
func renderText(text string) (string, error) {
	p, err := program.Parse(text)
	if err != nil {
		return "", err
	}
	if err := p.Validate(); err != nil {
		return "", err
	}
	return Render(p)
}
