package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/mode"
)

// With anchors.from_grader the anchor groups are capped by the grader's
// capacity (in executions, over the samples per group), asked at the
// step's start; a grader that says nothing, or a run that does not ask,
// leaves the config's cap.
func TestAnchorsCappedByGrader(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	for _, tt := range []struct {
		name       string
		fromGrader bool
		capacity   int // the grader's; -1: says nothing
		want       int // anchor groups
		asked      int
	}{
		{"not asked", false, 8, 4, 0},
		{"8 executions = 2 groups of 4", true, 8, 2, 1},
		{"less than a group still takes one", true, 3, 1, 1},
		{"silent grader", true, -1, 4, 1},
		{"more than needed", true, 100, 4, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tiny(t, mode.WMRL)
			cfg.Anchors.Fraction, cfg.Anchors.FromGrader = 1, tt.fromGrader
			env := newEnv(t, &s)
			f := &fake{}
			f.register(env, 0)
			asked := 0
			var a *activities.Activities
			env.OnActivity(a.GraderCapacity, mock.Anything, mock.Anything).Return(
				func(_ context.Context, r activities.GraderCapacityRequest) (int, error) {
					asked++
					return tt.capacity, nil
				}).Maybe()
			env.ExecuteWorkflow(TrainingStep, StepInput{RunID: "r", Step: 0, Config: cfg, AnchorFraction: 1,
				Checkpoint: activities.CheckpointRef{Version: 0, Hash: hashOf(0)}})
			res := workflowResult[StepResult](t, env)
			if len(res.Anchors) != tt.want || asked != tt.asked {
				t.Errorf("anchors %v (want %d groups), grader asked %d times (want %d)", res.Anchors, tt.want, asked, tt.asked)
			}
		})
	}
}
