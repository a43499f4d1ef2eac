package workflows

import (
	"math"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/mode"
)

// TestStepCountsUnexecutedTurns: in a 3-turn grpo step whose Execute
// answers, in every group, sample 1's turn 1 as a request_info turn and
// sample 2's turn 2 as a malformed one (ExecuteResponse.Unexecuted, no
// cost), the step's metrics count exactly the other turns as executions,
// with their CPU and wall seconds, and those two per group as Unexecuted,
// and its line says so (changeUnexecutedTurns). The same step with the
// change's GetVersion answering DefaultVersion (a step recorded before it)
// counts every real turn as an execution, as it did.
func TestStepCountsUnexecutedTurns(t *testing.T) {
	const K = 3
	for _, tt := range []struct {
		name  string
		apart bool
	}{{"unexecuted-turns", true}, {"before the change", false}} {
		t.Run(tt.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := newEnv(t, &s)
			if !tt.apart {
				env.OnGetVersion(changeUnexecutedTurns, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			f := &fake{unexecuted: func(r activities.ExecuteRequest) (bool, bool) {
				return r.Sample == 1 && r.Turn == 1 || r.Sample == 2 && r.Turn == 2, r.Sample == 2 && r.Turn == 2
			}}
			f.register(env, 0)
			cfg := tiny(t, mode.GRPO)
			cfg.Trajectory.Turns = K
			G, n := cfg.Groups, cfg.Samples
			if n < 3 {
				t.Fatalf("the tiny preset has %d samples, the test needs 3", n)
			}
			env.ExecuteWorkflow(TrainingStep, stepInput0(cfg))
			res := workflowResult[StepResult](t, env)
			if got := f.n("Execute"); got != G*n*K {
				t.Fatalf("%d Execute calls, want %d (every real turn)", got, G*n*K)
			}
			if got := f.n("ReduceTurns"); got != G {
				t.Fatalf("%d ReduceTurns, want one per group (%d)", got, G)
			}
			m := res.Metrics
			executed, unexecuted := G*n*K-2*G, 2*G
			if !tt.apart {
				executed, unexecuted = G*n*K, 0
			}
			// Only the executed turns cost: 0.5 CPU and 0.6 wall seconds
			// each (the fake's); the two unexecuted ones per group none.
			cost := float64(G*n*K - 2*G)
			if m.Executed != executed || m.Unexecuted != unexecuted || math.Abs(m.CPUSeconds-0.5*cost) > 1e-9 ||
				math.Abs(m.WallSeconds-0.6*cost) > 1e-9 {
				t.Errorf("metrics: %d executed, %d unexecuted, %v CPU s, %v wall s; want %d, %d, %v, %v", m.Executed,
					m.Unexecuted, m.CPUSeconds, m.WallSeconds, executed, unexecuted, 0.5*cost, 0.6*cost)
			}
			line := stepLine(0, res)
			if want := "turns unexecuted"; tt.apart != strings.Contains(line, want) {
				t.Errorf("step line %q: contains %q is %v, want %v", line, want, !tt.apart, tt.apart)
			}
		})
	}
}
