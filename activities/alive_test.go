package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/internal/testenv"
)

// An attempt with a heartbeat timeout shorter than the activity's run
// completes when the activity is registered alive (it heartbeats while it
// runs) and times out on heartbeats when it is not: what lets a killed
// worker's attempt be retried after the heartbeat timeout
// (workflows' changeShortHeartbeats). The timeout is 1 s and the activity
// runs 3 s, so a heartbeat every third of a second can be late by more than
// half a second on a loaded machine and still pass.
func TestAliveHeartbeats(t *testing.T) {
	slow := func(ctx context.Context, n int) (int, error) {
		select {
		case <-time.After(3 * time.Second):
			return n + 1, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	run := func(ctx workflow.Context) (int, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute, HeartbeatTimeout: time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out int
		err := workflow.ExecuteActivity(ctx, "Slow", 41).Get(ctx, &out)
		return out, err
	}
	for _, tt := range []struct {
		name  string
		alive bool
	}{{"alive", true}, {"plain", false}} {
		t.Run(tt.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			s.SetLogger(testenv.QuietLogger(t))
			env := s.NewTestWorkflowEnvironment()
			env.SetTestTimeout(time.Minute)
			beats := 0
			env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats++ })
			fn := slow
			if tt.alive {
				fn = alive(slow)
			}
			env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: "Slow"})
			env.RegisterWorkflow(run)
			env.ExecuteWorkflow(run)
			err := env.GetWorkflowError()
			if tt.alive {
				var out int
				if err != nil || env.GetWorkflowResult(&out) != nil || out != 42 {
					t.Fatalf("alive: %v, result %d", err, out)
				}
				if beats < 3 {
					t.Fatalf("alive: %d heartbeats in 3 s with a 1 s timeout", beats)
				}
				return
			}
			var te *temporal.TimeoutError
			if !errors.As(err, &te) || te.TimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT {
				t.Fatalf("plain: want a heartbeat timeout, got %v", err)
			}
			if beats != 0 {
				t.Fatalf("plain: %d heartbeats", beats)
			}
		})
	}
}

// Called directly (not as an activity) an alive function is the function.
func TestAliveOutsideActivity(t *testing.T) {
	if got := beatEvery(t.Context()); got != 0 {
		t.Fatalf("beatEvery outside an activity: %v", got)
	}
	n, err := alive(func(_ context.Context, n int) (int, error) { return n * 2, nil })(t.Context(), 21)
	if err != nil || n != 42 {
		t.Fatalf("%d %v", n, err)
	}
}
