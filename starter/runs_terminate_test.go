package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/workflows"
)

func TestTerminateRefusesEmptyReason(t *testing.T) {
	for _, give := range [][]string{{"terminate", "r1"}, {"terminate", "r1", "--reason", "  "}} {
		out, _, err := runCmd(t.Context(), append(give, nowhere...)...)
		if err == nil || !strings.Contains(err.Error(), "--reason is required") {
			t.Errorf("%q: %v, want a required reason", give, err)
		}
		if out != "" || (err != nil && strings.Contains(err.Error(), "connect")) {
			t.Errorf("%q got past the reason check: %v, stdout %q", give, err, out)
		}
	}
}

func TestTerminateUnknownRun(t *testing.T) {
	_, dsn := testenv.FreshDB(t)
	_, _, err := runCmd(t.Context(), "terminate", "ghost", "--reason", "stuck", "--database-url", dsn, "--address", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), `no run "ghost"`) {
		t.Errorf("terminate an unknown run: %v, want no run \"ghost\"", err)
	}
}

// fakeTemporal answers the calls terminate and continue make: status
// is the state of workflow run (unknown when unspecified), children its
// pending children; a workflow id ending in "step-gone" has ended already.
type fakeTemporal struct {
	client.Client
	run        string
	status     enums.WorkflowExecutionStatus
	children   []string
	terminated []string
	// started records ExecuteWorkflow's inputs; startErr fails it.
	started  []workflows.RunInput
	startErr error
	// others are the states of other workflows (steps) by id.
	others map[string]enums.WorkflowExecutionStatus
}

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if s, ok := f.others[id]; ok {
		return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: s}}, nil
	}
	if id != f.run || f.status == enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	d := &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: f.status}}
	for _, c := range f.children {
		d.PendingChildren = append(d.PendingChildren, &workflowpb.PendingChildExecutionInfo{WorkflowId: c})
	}
	return d, nil
}

func (f *fakeTemporal) TerminateWorkflow(_ context.Context, id, _, _ string, _ ...any) error {
	if strings.HasSuffix(id, "step-gone") {
		return serviceerror.NewNotFound("workflow execution already completed")
	}
	f.terminated = append(f.terminated, id)
	if id == f.run {
		f.status = enums.WORKFLOW_EXECUTION_STATUS_TERMINATED
	}
	return nil
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	if f.startErr != nil {
		return nil, f.startErr
	}
	f.started = append(f.started, args[0].(workflows.RunInput))
	return nil, nil
}

func TestTerminateRun(t *testing.T) {
	st := testenv.FreshStore(t)
	ctx := t.Context()
	add := func(id string, state store.RunState) {
		t.Helper()
		err := st.UpsertRun(ctx, store.Run{ID: id, Name: id, Mode: mode.WMRL, Config: json.RawMessage(`{}`), Steps: 4, State: state})
		if err != nil {
			t.Fatal(err)
		}
	}

	// A running run (stuck at a corrupt checkpoint, say): its workflow and
	// step are terminated, then the termination is recorded.
	add("stuck", store.RunStopping)
	tc := &fakeTemporal{run: "stuck", status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING, children: []string{"stuck/step-0", "stuck/step-gone"}}
	rep, err := terminateRun(ctx, tc, st, "stuck", "checkpoint 0 is corrupt")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Already || rep.Workflow != wfRunning || strings.Join(rep.Terminated, " ") != "stuck stuck/step-0" ||
		rep.Reason != "checkpoint 0 is corrupt" || rep.At.IsZero() {
		t.Errorf("report %+v", rep)
	}
	r, err := st.Run(ctx, "stuck")
	if err != nil || r.State != store.RunTerminated || r.Termination == nil || r.Termination.Reason != rep.Reason {
		t.Errorf("recorded run %+v %v", r, err)
	}
	// Again: nothing changes.
	again, err := terminateRun(ctx, tc, st, "stuck", "other")
	if err != nil || !again.Already || again.Reason != rep.Reason || !again.At.Equal(rep.At) || len(tc.terminated) != 2 {
		t.Errorf("terminate again: %+v %v (terminated %v)", again, err, tc.terminated)
	}

	// A row that says running for a workflow that already ended (or that
	// Temporal forgot) is recorded as terminated.
	add("stale", store.RunRunning)
	tc = &fakeTemporal{run: "stale"}
	rep, err = terminateRun(ctx, tc, st, "stale", "worker gone")
	if err != nil || len(rep.Terminated) != 0 || rep.Workflow != "" {
		t.Errorf("stale run: %+v %v", rep, err)
	}
	if r, err := st.Run(ctx, "stale"); err != nil || r.State != store.RunTerminated {
		t.Errorf("stale run recorded as %v %v", r.State, err)
	}

	// A completed run is refused and keeps its state.
	add("done", store.RunCompleted)
	tc = &fakeTemporal{run: "done", status: enums.WORKFLOW_EXECUTION_STATUS_COMPLETED}
	if _, err := terminateRun(ctx, tc, st, "done", "x"); err == nil || !strings.Contains(err.Error(), "nothing to terminate") {
		t.Errorf("terminate a completed run: %v", err)
	}
	if r, err := st.Run(ctx, "done"); err != nil || r.State != store.RunCompleted || r.Termination != nil {
		t.Errorf("completed run after a refused terminate: %+v %v", r, err)
	}
}

// TestTerminateRunCarriedSteps: a pipelined run whose running steps were
// started by an earlier execution (carried across continue-as-new, parent
// close policy abandon) are not its pending children: terminate ends every
// step the store has as running that Temporal still runs, and leaves the
// completed ones.
func TestTerminateRunCarriedSteps(t *testing.T) {
	st := testenv.FreshStore(t)
	ctx := t.Context()
	err := st.UpsertRun(ctx, store.Run{ID: "carry", Name: "carry", Mode: mode.WMRL, Config: json.RawMessage(`{}`), Steps: 6,
		State: store.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	for s := range 4 {
		if err := st.StartStep(ctx, "carry", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.FinishStep(ctx, "carry", 0, store.StepCompleted, store.Step{}.Metrics); err != nil {
		t.Fatal(err)
	}
	tc := &fakeTemporal{run: "carry", status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING, children: []string{"carry/step-3"},
		others: map[string]enums.WorkflowExecutionStatus{
			"carry/step-1": enums.WORKFLOW_EXECUTION_STATUS_RUNNING,   // carried
			"carry/step-2": enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, // ended, its row not written yet
		}}
	rep, err := terminateRun(ctx, tc, st, "carry", "stuck")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"carry", "carry/step-3", "carry/step-1"}
	if strings.Join(rep.Terminated, ",") != strings.Join(want, ",") || strings.Join(tc.terminated, ",") != strings.Join(want, ",") {
		t.Errorf("terminated %v (report %v), want %v", tc.terminated, rep.Terminated, want)
	}
}
