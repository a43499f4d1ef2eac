package workflows

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestRecordHistories writes the histories that TestReplay replays: for
// every mode, the first segment of a 3-step run (two steps, a held-out
// evaluation, continue-as-new), its second segment and its step 0; a run
// that is paused, has its anchor fraction set, is resumed and stopped; and
// a run resumed from that one. It runs only with WMRL_RECORD_HISTORIES=1
// against a real server, and is how testdata/ is refreshed after a
// workflow change has been put behind workflow.GetVersion: record with
// the old code first, so the new code is checked against old histories.
// WMRL_RECORD_PREFIX names the files (testdata/<prefix>run_wmrl.json, ...):
// the histories of each workflow version are kept side by side.
func TestRecordHistories(t *testing.T) {
	if os.Getenv("WMRL_RECORD_HISTORIES") != "1" {
		t.Skip("set WMRL_RECORD_HISTORIES=1 to record testdata/ histories")
	}
	prefix := os.Getenv("WMRL_RECORD_PREFIX")
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	for _, m := range mode.All() {
		cfg := tiny(t, m)
		cfg.SuiteSeed = testenv.SuiteSeed
		cfg.Steps, cfg.ContinueAsNewEvery, cfg.Eval.Every, cfg.Eval.Tasks = 3, 2, 2, 1
		id := fmt.Sprintf("rec-%s-%d", m, stamp)
		we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
			TrainingRun, RunInput{RunID: id, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		var res RunResult
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		record(t, c, id, we.GetRunID(), fmt.Sprintf("testdata/"+prefix+"run_%s.json", m))
		record(t, c, id, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), fmt.Sprintf("testdata/"+prefix+"run_%s_continued.json", m))
		record(t, c, StepWorkflowID(id, 0), "", fmt.Sprintf("testdata/"+prefix+"step_%s.json", m))
	}

	// Signals and the update: pause after the first step, set the anchor
	// fraction while paused, resume, stop after the next step.
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps, cfg.ContinueAsNewEvery, cfg.Eval.Every, cfg.Eval.Tasks = 6, 10, 0, 1
	id := fmt.Sprintf("rec-signals-%d", stamp)
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: id, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, func(s Status) bool { return s.Step >= 1 })
	if err := c.SignalWorkflow(ctx, id, "", SignalPause, nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, func(s Status) bool { return s.State == StatePaused })
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: UpdateSetAnchorFraction,
		Args: []any{0.5}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.SignalWorkflow(ctx, id, "", SignalResume, nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, func(s Status) bool { return s.Step >= 2 })
	if err := c.SignalWorkflow(ctx, id, "", SignalStop, nil); err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := we.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Stopped {
		t.Fatalf("signals run not stopped: %+v", res)
	}
	record(t, c, id, we.GetRunID(), "testdata/"+prefix+"run_signals.json")

	// Resume from the stopped run.
	cfg.Steps = res.Steps + 1
	rid := fmt.Sprintf("rec-resumed-%d", stamp)
	we, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: rid, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: rid, Config: cfg, ResumeFrom: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := we.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	record(t, c, rid, we.GetRunID(), "testdata/"+prefix+"run_resumed.json")
}

// waitStatus polls the run's status query until ok holds.
func waitStatus(t *testing.T, c client.Client, id string, ok func(Status) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		v, err := c.QueryWorkflow(t.Context(), id, "", QueryStatus)
		if err == nil {
			var s Status
			if err := v.Get(&s); err == nil && ok(s) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s: status condition not reached in 3 minutes", id)
}

// TestRecordActiveAnchorHistories writes the histories of a wmrl run with
// active anchor selection and the adaptive anchor fraction on (its two
// segments and its step 0: testdata/<prefix>run_wmrl_active.json, ...), so
// that TestReplay guards those paths too. Like TestRecordHistories it runs
// only with WMRL_RECORD_HISTORIES=1 against a real server.
func TestRecordActiveAnchorHistories(t *testing.T) {
	if os.Getenv("WMRL_RECORD_HISTORIES") != "1" {
		t.Skip("set WMRL_RECORD_HISTORIES=1 to record testdata/ histories")
	}
	prefix := os.Getenv("WMRL_RECORD_PREFIX")
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Groups = 8 // two anchor groups a step: the denoiser is calibrated after step 0
	cfg.Steps, cfg.ContinueAsNewEvery, cfg.Eval.Every, cfg.Eval.Tasks = 3, 2, 2, 1
	cfg.Anchors.Active = runconfig.ActiveAnchors{Enabled: true, Mix: 0.5, Floor: 0.25}
	cfg.Anchors.Adaptive = runconfig.AdaptiveAnchors{TargetRho: 1.2, Floor: 0.125, Ceiling: 0.5, Gain: 0.2}
	id := fmt.Sprintf("rec-active-%d", time.Now().UnixNano())
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: id, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := st.AnchorPairs(ctx, id, cfg.Steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	weighted := 0
	for _, p := range pairs {
		if p.Weight != 0 {
			weighted++
		}
	}
	t.Logf("%d steps, %d anchor pairs, %d of them weighted (weight ≠ 1)", res.Steps, len(pairs), weighted)
	if weighted == 0 {
		t.Error("no anchor pair has a weight other than 1: active selection left no trace")
	}
	record(t, c, id, we.GetRunID(), "testdata/"+prefix+"run_wmrl_active.json")
	record(t, c, id, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "testdata/"+prefix+"run_wmrl_active_continued.json")
	record(t, c, StepWorkflowID(id, 0), "", "testdata/"+prefix+"step_wmrl_active.json")
}

// TestRecordRefreshHistories writes the histories of a wmrl run with
// world_model.refresh (changeWorldModelRefresh): its two segments (a
// refresh after every step but the last, the version carried across
// continue-as-new),
// step 1 (scored by the version made after step 0, calibrated on the pairs
// it scored) and a run resumed from it (the old run's latest version made
// again before its first step). Like TestRecordHistories it runs only with
// WMRL_RECORD_HISTORIES=1 against a real server, in a namespace of its own,
// with a frozen model fitted on the small test suite (testenv.SmallBase).
func TestRecordRefreshHistories(t *testing.T) {
	if os.Getenv("WMRL_RECORD_HISTORIES") != "1" {
		t.Skip("set WMRL_RECORD_HISTORIES=1 to record testdata/ histories")
	}
	prefix := os.Getenv("WMRL_RECORD_PREFIX")
	c, _ := testenv.Temporal(t, "wmrl-refresh-record", SearchAttributes())
	st := testenv.FreshStore(t)
	a := refreshActivities(t, st, testenv.SmallBase(t))
	startWorkers(t, c, a)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	cfg := refreshConfig(t)
	cfg.Steps, cfg.ContinueAsNewEvery, cfg.Eval.Every = 4, 2, 2
	cfg.WorldModel.Refresh.Every = 1
	id := fmt.Sprintf("rec-refresh-%d", stamp)
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: id, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	vs, err := st.WorldModelVersions(ctx, id)
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions %+v, %v; want after steps 0, 1 and 2", vs, err)
	}
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	record(t, c, id, we.GetRunID(), "testdata/"+prefix+"refresh_run_wmrl.json")
	record(t, c, id, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "testdata/"+prefix+"refresh_run_wmrl_continued.json")
	record(t, c, StepWorkflowID(id, 1), "", "testdata/"+prefix+"refresh_step_wmrl.json")

	cfg.Steps = 5
	rid := fmt.Sprintf("rec-refresh-resumed-%d", stamp)
	we, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: rid, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: rid, Config: cfg, ResumeFrom: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := we.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	record(t, c, rid, we.GetRunID(), "testdata/"+prefix+"refresh_run_resumed.json")
}
