package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
)

// freeCapacity is the anchor scheduler's free capacity, in groups: the run
// config's anchors.capacity (-1: none) and, when anchors.from_grader is set
// (behind changeGraderCapacity), what the run's grader says it takes at
// once at the step's start (a /grade service's /health capacity), divided
// by the samples per group, at least one group. A grader that says nothing
// leaves the config's.
func (s *stepRun) freeCapacity(ctx workflow.Context) (int, error) {
	c := s.cfg.FreeCapacity()
	if !s.cfg.Anchors.FromGrader || workflow.GetVersion(ctx, changeGraderCapacity, workflow.DefaultVersion, 1) < 1 {
		return c, nil
	}
	ctx = options(ctx, activityOptions{queue: QueueSandbox, startToClose: time.Minute, retryFor: s.cfg.Sandbox.RetryBudget()})
	ctx = summarized(ctx, s.ui, "step %d", s.in.Step)
	n, err := activities.GraderCapacity.Execute(ctx, activities.GraderCapacityRequest{RunID: s.in.RunID}).Result(ctx)
	if err != nil {
		return 0, fmt.Errorf("grader capacity: %w", err)
	}
	if n < 0 {
		return c, nil
	}
	g := max(1, n/s.cfg.Samples)
	if c < 0 || g < c {
		c = g
	}
	s.res.Metrics.GraderCapacity = n
	return c, nil
}
