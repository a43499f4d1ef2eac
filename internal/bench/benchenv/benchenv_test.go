package benchenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/workflows"
)

// TestOpenStore opens a fresh database twice: migrated, the same deployment.
func TestOpenStore(t *testing.T) {
	dsn := testenv.EmptyDB(t)
	ctx := t.Context()
	st, dep, err := OpenStore(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if dep.ID == "" || !strings.HasPrefix(dep.Database, "wmrl_test_") {
		t.Fatalf("deployment %+v: want an id and the test database", dep)
	}
	if _, err := st.Steps(ctx, "no-such-run"); err != nil {
		t.Fatalf("store not migrated: %v", err)
	}
	// A second open migrates nothing and reads the same deployment.
	st2, dep2, err := OpenStore(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	st2.Close()
	if dep2 != dep {
		t.Fatalf("second open: deployment %+v, first %+v", dep2, dep)
	}
	if _, _, err := OpenStore(ctx, dsn+" port=1"); err == nil {
		t.Fatal("open of a closed port: no error")
	}
}

// TestDialAndStartWorkers dials the test server: the namespace is registered
// and every queue has an activity poller of the workers started.
func TestDialAndStartWorkers(t *testing.T) {
	const ns = "wmrl-test-benchenv"
	addr := deployenv.Read().Address
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Temporal server at %s in CI: %v", addr, err)
		}
		t.Skipf("no Temporal server at %s (deploy/temporal.sh start, or set TEMPORAL_ADDRESS): %v", addr, err)
	} else {
		conn.Close()
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := Dial(ctx, "127.0.0.1:1", ns, nil); err == nil || !strings.Contains(err.Error(), "connect to temporal at 127.0.0.1:1") {
		t.Fatalf("dial of a closed port: %v", err)
	}
	c, err := Dial(ctx, addr, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	if err != nil {
		t.Fatalf("namespace not registered: %v", err)
	}
	if got := d.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got != 24*time.Hour {
		t.Errorf("retention %v, want 24h", got)
	}

	// The pollers of this test's workers carry its identity (a poller
	// stays listed for minutes after it stopped).
	id := fmt.Sprintf("benchenv-test-%d", time.Now().UnixNano())
	stop, err := StartWorkers(c, &activities.Activities{}, worker.Options{Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, name := range workflows.QueueNames() {
		q, _ := workflows.Queue(name)
		for {
			r, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{Namespace: ns,
				TaskQueue: &taskqueuepb.TaskQueue{Name: q}, TaskQueueType: enums.TASK_QUEUE_TYPE_ACTIVITY})
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(r.GetPollers(), func(p *taskqueuepb.PollerInfo) bool { return p.GetIdentity() == id }) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no activity poller %s on %s", id, q)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
