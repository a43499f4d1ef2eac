package workflows

import (
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/mode"
)

// TestStepRecordsStageTimes: under changeStageTimes a step's metrics hold
// its stages' spans, in the test environment's clock: an Update that takes
// 30 s (mocked) spans 30 s; the rollout's stages, calibrate+fuse and the
// update come in order inside the step's span.
func TestStepRecordsStageTimes(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	f := &fake{}
	const update = 30 * time.Second
	f.register(env, update)
	cfg := tiny(t, mode.WMRL)
	env.ExecuteWorkflow(TrainingStep, StepInput{RunID: "r", Step: 3, Config: cfg, AnchorFraction: cfg.Anchors.Fraction,
		Checkpoint: activities.CheckpointRef{Version: 3, Hash: hashOf(3)}})
	res := workflowResult[StepResult](t, env)
	st := res.Metrics.Stages
	for name, sp := range map[string]struct{ start, end time.Time }{
		"step": {st.Step.Start, st.Step.End}, "generate": {st.Generate.Start, st.Generate.End},
		"score": {st.Score.Start, st.Score.End}, "execute": {st.Execute.Start, st.Execute.End},
		"calibrate_fuse": {st.CalibrateFuse.Start, st.CalibrateFuse.End}, "update": {st.Update.Start, st.Update.End},
	} {
		if sp.start.IsZero() || sp.end.Before(sp.start) {
			t.Errorf("stage %s: span %v .. %v", name, sp.start, sp.end)
		}
		if sp.start.Before(st.Step.Start) || sp.end.After(st.Step.End) {
			t.Errorf("stage %s: span %v .. %v outside the step's %v .. %v", name, sp.start, sp.end, st.Step.Start, st.Step.End)
		}
	}
	if !st.Turns.IsZero() {
		t.Errorf("a single-shot step has a turn loop: %+v", st.Turns)
	}
	if got := st.Update.Seconds(); got < update.Seconds() {
		t.Errorf("update spans %v s, want at least %v", got, update.Seconds())
	}
	if st.Generate.Start.After(st.Execute.Start) || st.Execute.End.After(st.CalibrateFuse.Start) ||
		st.CalibrateFuse.End.After(st.Update.Start) {
		t.Errorf("stages out of order: %+v", st)
	}
}
