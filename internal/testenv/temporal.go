package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/namespace"
)

// Temporal returns a client of the test Temporal server ($TEMPORAL_ADDRESS,
// else deployenv's default) in namespace ns, registered with the search
// attributes attrs (workflows.SearchAttributes(): testenv cannot import
// workflows, whose tests use it), and the server's address. A namespace of
// its own keeps a test's workflows and task queues apart from other tests'
// workers on the same server. The client is closed when the test ends.
// Without a server the test skips, except in CI (CI set), where it fails.
func Temporal(t testing.TB, ns string, attrs map[string]enums.IndexedValueType) (client.Client, string) {
	t.Helper()
	addr := deployenv.Read().Address
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Temporal server at %s in CI (.ci/run starts one): %v", addr, err)
		}
		t.Skipf("no Temporal server at %s (deploy/temporal.sh start, or set TEMPORAL_ADDRESS): %v", addr, err)
	}
	conn.Close()
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: QuietLogger(t)})
	if err != nil {
		t.Fatalf("dial Temporal at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := namespace.Ensure(ctx, c, ns, 24*time.Hour, attrs); err != nil {
		t.Fatal(err)
	}
	return c, addr
}

// QuietLogger is a Temporal SDK logger that drops the SDK's debug and info
// messages and logs the rest to t.
func QuietLogger(t testing.TB) log.Logger { return quietLog{t} }

type quietLog struct{ t testing.TB }

func (quietLog) Debug(string, ...any)          {}
func (quietLog) Info(string, ...any)           {}
func (l quietLog) Warn(msg string, kv ...any)  { l.t.Logf("temporal: %s %v", msg, kv) }
func (l quietLog) Error(msg string, kv ...any) { l.t.Logf("temporal: %s %v", msg, kv) }

// BuildExecutor builds the static executor (wmrl-executor, CGO_ENABLED=0)
// into a directory that the process sandbox's unprivileged user can reach,
// removed when the test ends, and returns the binary's path.
func BuildExecutor(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wmrl-executor-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := BuildExecutorIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildExecutorIn builds the static executor into dir (made readable by
// every user: the process sandbox runs it as an unprivileged one), for
// binaries that several tests share, and returns its path.
func BuildExecutorIn(dir string) (string, error) {
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "wmrl-executor")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/wmrl/wmrl/internal/executor/wmrl-executor")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build executor: %v\n%s", err, out)
	}
	return bin, nil
}
