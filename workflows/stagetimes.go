package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/internal/stepsummary"
)

// begin and end record a stage's span in the step's metrics under
// changeStageTimes (docs/design.md, "Where the time goes"): begin the
// first time the stage starts an activity, end each time one is done (the
// last one wins). workflow.Now is the time of the workflow task (or of a
// local activity's completion, recorded in its marker), so a replay
// computes the same spans.
func (s *stepRun) begin(ctx workflow.Context, sp *stepsummary.Span) {
	if s.clock && sp.Start.IsZero() {
		sp.Start = workflow.Now(ctx).UTC()
	}
}

func (s *stepRun) end(ctx workflow.Context, sp *stepsummary.Span) {
	if !s.clock {
		return
	}
	if t := workflow.Now(ctx).UTC(); t.After(sp.End) {
		sp.End = t
	}
}
