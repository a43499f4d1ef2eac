package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/testenv"
)

// The integration test runs a 5-step wmrl run on a real Temporal server
// ($TEMPORAL_ADDRESS, default 127.0.0.1:7233: start one with
// deploy/temporal.sh start) and real Postgres, with in-process workers on
// all five queues. It skips when no server answers (and fails when CI is set). With
// WMRL_RECORD_HISTORIES=1 it writes the histories of the run's first
// segment and of its step 0 to testdata/, which TestReplay replays.

// testNamespace keeps these tests' workflows and task queues apart from any
// wmrl worker serving the default namespace on the same server.
const testNamespace = "wmrl-workflows-test"

// testNS is the namespace of these tests' workers and workflows:
// testNamespace, or WMRL_TEST_NAMESPACE when set (another namespace keeps
// this process's workers apart from those of other checkouts testing on
// the same server).
func testNS() string {
	if v := os.Getenv("WMRL_TEST_NAMESPACE"); v != "" {
		return v
	}
	return testNamespace
}

// dialTemporal returns a client of the test server in testNS(), registered
// with wmrl's search attributes (testenv.Temporal: it skips without a
// server, except in CI, where it fails).
func dialTemporal(t *testing.T) client.Client {
	t.Helper()
	c, _ := testenv.Temporal(t, testNS(), SearchAttributes())
	return c
}

// startWorkers serves every queue in this process with a.
func startWorkers(t *testing.T, c client.Client, a *activities.Activities) {
	t.Helper()
	for _, name := range QueueNames() {
		q, _ := Queue(name)
		w := worker.New(c, q, worker.Options{})
		Register(w, q, a)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
}

func TestIntegrationRun(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	sb := &testenv.InProcess{}
	a := realActivities(t, st, sb, t.TempDir())
	startWorkers(t, c, a)

	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps, cfg.ContinueAsNewEvery, cfg.Eval.Every = 5, 2, 0
	runID := fmt.Sprintf("it-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: runID, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	firstRun := we.GetRunID()
	var res RunResult
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Steps != 5 || res.Checkpoint.Version != 5 {
		t.Fatalf("result %+v", res)
	}
	for s := 0; s < cfg.Steps; s++ {
		ts, err := st.StepTrajectories(ctx, runID, s)
		if err != nil {
			t.Fatal(err)
		}
		executedAnchors := 0
		for _, tr := range ts {
			if tr.Anchor && tr.Exec != nil {
				executedAnchors++
			}
		}
		pairs, err := st.StepAnchorPairs(ctx, runID, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != cfg.Groups*cfg.Samples || len(pairs) != executedAnchors || executedAnchors == 0 {
			t.Fatalf("step %d: %d trajectories, %d anchor pairs, %d executed anchor trajectories", s, len(ts), len(pairs), executedAnchors)
		}
	}
	cps, err := st.Checkpoints(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	for v, cp := range cps {
		if cp.Version != v {
			t.Fatalf("checkpoint versions not contiguous: %+v", cps)
		}
	}
	if len(cps) != 6 {
		t.Fatalf("%d checkpoints, want 6", len(cps))
	}
	v, err := c.QueryWorkflow(ctx, runID, "", QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var status Status
	if err := v.Get(&status); err != nil {
		t.Fatal(err)
	}
	if status.State != StateCompleted || status.Step != 5 {
		t.Fatalf("status %+v", status)
	}

	if os.Getenv("WMRL_RECORD_HISTORIES") == "1" {
		record(t, c, runID, firstRun, "testdata/training_run.json")
		record(t, c, StepWorkflowID(runID, 0), "", "testdata/training_step.json")
	}
}

// record writes a workflow's history as JSON (the format of `temporal
// workflow show --output json`).
func record(t *testing.T, c client.Client, id, run, path string) {
	t.Helper()
	it := c.GetWorkflowHistory(t.Context(), id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatal("history is not JSON")
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events of %s in %s", len(h.Events), id, path)
}
