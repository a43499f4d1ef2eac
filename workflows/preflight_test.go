package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/mode"
)

type nopPolicy struct{ backend.Policy }
type nopWM struct{ backend.WorldModel }

// okGrader accepts any limits.
type okGrader struct{ backend.Grader }

func (okGrader) Preflight(context.Context, backend.Limits) error { return nil }

// refusingPolicy is a remote policy whose service answers and refuses.
type refusingPolicy struct{ backend.Policy }

func (refusingPolicy) Check(context.Context) error {
	return backend.Permanent(errors.New("401: the key in TINKER_API_KEY is not valid"))
}

// The preflight asks the sandbox, rollout and gpu queues, and the
// worldmodel queue when the mode uses the world model, with the real
// activities; a backend the workers lack, or one whose service refuses, is
// an error naming the field.
func TestPreflightAsksEveryQueue(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	for _, tt := range []struct {
		name   string
		mode   mode.Mode
		policy string
		remote *backend.Registry
		queues []string
		err    string
	}{
		{name: "grpo", mode: mode.GRPO, queues: []string{QueueGPU, QueueRollout, QueueSandbox}},
		{name: "wmrl", mode: mode.WMRL, queues: []string{QueueGPU, QueueRollout, QueueSandbox, QueueWorldModel}},
		{name: "missing", mode: mode.GRPO, policy: backend.Tinker, err: `policy.backend: "tinker", but this worker has no such backend`},
		{name: "refused", mode: mode.GRPO, policy: backend.Tinker,
			remote: backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: refusingPolicy{}}),
			err:    "policy.backend: tinker: 401: the key in TINKER_API_KEY is not valid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s.SetLogger(quietLogger())
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(Preflight)
			activities.Register(env, &activities.Activities{Policy: nopPolicy{}, WorldModel: nopWM{}, Grader: okGrader{},
				Backends: tt.remote})
			var mu sync.Mutex
			var queues []string
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				mu.Lock()
				defer mu.Unlock()
				if !slices.Contains(queues, info.TaskQueue) {
					queues = append(queues, info.TaskQueue)
				}
			})
			cfg := tiny(t, tt.mode)
			cfg.Policy.Backend = tt.policy
			env.ExecuteWorkflow(Preflight, cfg)
			err := env.GetWorkflowError()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("preflight = %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(queues)
			if !slices.Equal(queues, tt.queues) {
				t.Errorf("asked queues %v, want %v", queues, tt.queues)
			}
		})
	}
}
