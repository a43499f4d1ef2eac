package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/workflows"
)

// TestPreflightWaitsAndGivesUp runs wmrl run's preflight against task
// queues nobody serves, with a short bound: it says every few seconds which
// queue it waits for a worker on, and at the bound gives up with the
// command that starts that worker, the preflight workflow timed out by its
// execution timeout. Each case has a namespace of its own, where no other
// worker polls.
func TestPreflightWaitsAndGivesUp(t *testing.T) {
	tests := []struct {
		name    string
		control bool     // a worker serves the control queue (the workflow runs)
		want    []string // in the waiting lines
		command string   // in the error: the queues, the bound, the command
	}{
		{name: "no worker", want: []string{"waiting for a worker on task queue wmrl-control ("},
			command: "no worker on task queue wmrl-control within 6s; start one: wmrl-worker --queues control"},
		{name: "no sandbox worker", control: true,
			want:    []string{"waiting for workers on task queues wmrl-gpu, wmrl-rollout, wmrl-sandbox, wmrl-worldmodel ("},
			command: "no worker on task queues wmrl-gpu, wmrl-rollout, wmrl-sandbox, wmrl-worldmodel within 6s; start one: wmrl-worker --queues gpu,rollout,sandbox,worldmodel"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := testNamespace + "-preflight-" + string(rune('a'+i))
			tc, _ := testenv.Temporal(t, ns, workflows.SearchAttributes())
			if tt.control {
				w := worker.New(tc, workflows.QueueControl, worker.Options{})
				w.RegisterWorkflowWithOptions(workflows.Preflight, workflow.RegisterOptions{Name: "Preflight"})
				if err := w.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Stop)
			}
			cfg, _ := runconfig.Preset("tiny")
			cfg.Name = uniqueName("preflight")
			var mu sync.Mutex
			var lines []string
			note := func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() }
			wait := preflightWait{bound: 6 * time.Second, every: 2 * time.Second}
			start := time.Now()
			err := preflight(t.Context(), tc, cfg, wait, note)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			for _, l := range lines {
				t.Log(l)
			}
			if err == nil || !strings.Contains(err.Error(), tt.command) {
				t.Errorf("error %v, want one containing %q", err, tt.command)
			}
			if took < wait.bound || took > wait.bound+10*time.Second {
				t.Errorf("gave up after %v, want at the bound %v", took, wait.bound)
			}
			if len(lines) < 2 {
				t.Fatalf("%d waiting lines, want one every %v", len(lines), wait.every)
			}
			for _, l := range lines {
				for _, w := range append(tt.want, cfg.Name, "s)…") {
					if !strings.Contains(l, w) {
						t.Errorf("line %q lacks %q", l, w)
					}
				}
			}
			d, err := tc.DescribeWorkflowExecution(t.Context(), workflows.PreflightWorkflowID(cfg.Name), "")
			if err != nil {
				t.Fatal(err)
			}
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT {
				t.Errorf("preflight workflow %v, want timed out", st)
			}
		})
	}
}
