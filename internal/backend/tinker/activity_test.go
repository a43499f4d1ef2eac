package tinker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
)

// In an activity, waiting for a future heartbeats with the request id.
func TestWaitHeartbeatsInActivity(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if polls.Add(1) <= 3 {
			_ = json.NewEncoder(w).Encode(TryAgainResponse{Type: TypeTryAgain, RequestID: "9", QueueState: "active"})
			return
		}
		_ = json.NewEncoder(w).Encode(OptimStepResponse{Type: "optim_step"})
	}))
	defer srv.Close()
	p, err := New(Config{BaseURL: srv.URL, BaseModel: "m", PollMax: 5 * time.Millisecond}, fixedTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	var beats atomic.Int32
	var detail atomic.Value
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var id string
		if d.Get(&id) == nil {
			detail.Store(id)
		}
		beats.Add(1)
	})
	wait := func(ctx context.Context) error { return p.wait(ctx, "9", new(OptimStepResponse)) }
	env.RegisterActivity(wait)
	if _, err := env.ExecuteActivity(wait); err != nil {
		t.Fatal(err)
	}
	if beats.Load() == 0 || detail.Load() != "9" {
		t.Fatalf("%d heartbeats, detail %v", beats.Load(), detail.Load())
	}
	// Outside an activity, wait does not heartbeat (nor panic).
	polls.Store(0)
	if err := p.wait(t.Context(), "9", new(OptimStepResponse)); err != nil {
		t.Fatal(err)
	}
}
