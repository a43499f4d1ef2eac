// Package testenv gives tests of the orchestration a real environment on
// one machine: a fresh migrated Postgres database per test, a client of the
// Temporal server in a namespace of the test's own, a small built-in suite
// that generates in about a second and a world model fitted on it, an
// in-process sandbox that really
// executes programs (without isolation), the static executor built for the
// process sandbox, and a real Prometheus server.
//
// Postgres is WMRL_TEST_DATABASE_URL or the local cluster's socket; when it
// does not answer, tests skip, except in CI (CI or WMRL_TEST_DATABASE_URL
// set), where they fail.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
)

// DefaultAdminDSN is the maintenance database of the local cluster.
const DefaultAdminDSN = "host=/var/run/postgresql user=postgres dbname=postgres"

// AdminDSN returns WMRL_TEST_DATABASE_URL or DefaultAdminDSN.
func AdminDSN() string {
	if d := os.Getenv("WMRL_TEST_DATABASE_URL"); d != "" {
		return d
	}
	return DefaultAdminDSN
}

// FreshStore returns a store on a new migrated database, dropped when the
// test ends.
func FreshStore(t testing.TB) *store.Store {
	t.Helper()
	s, _ := FreshDB(t)
	return s
}

// FreshDB is FreshStore that also returns the database's DSN, for processes
// the test starts.
func FreshDB(t testing.TB) (*store.Store, string) {
	t.Helper()
	ctx := t.Context()
	dsn := EmptyDB(t)
	s, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s, dsn
}

// EmptyDB creates a new, unmigrated database on the test Postgres
// (WMRL_TEST_DATABASE_URL, else the local socket), drops it when the test
// ends, and returns its DSN. Without Postgres the test fails in CI (or when
// WMRL_TEST_DATABASE_URL is set) and is skipped elsewhere.
func EmptyDB(t testing.TB) string {
	t.Helper()
	ctx := t.Context()
	admin := AdminDSN()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("WMRL_TEST_DATABASE_URL") != "" {
			t.Fatalf("postgres unusable at %q: %v", admin, err)
		}
		t.Skipf("postgres unusable at %q (%v): start it with deploy/postgres.sh", admin, err)
	}
	name := fmt.Sprintf("wmrl_test_%d_%08x", os.Getpid(), rand.Uint32())
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

func withDatabase(dsn, db string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		head, query, _ := strings.Cut(dsn, "?")
		i := strings.LastIndex(head, "/")
		if i > len("postgresql://") {
			head = head[:i]
		}
		if query != "" {
			return head + "/" + db + "?" + query
		}
		return head + "/" + db
	}
	return dsn + " dbname=" + db // a later keyword wins
}

// SuiteSeed names the small test suite.
const SuiteSeed = 7

// smallSuite is built once per test binary.
var smallSuite = sync.OnceValues(func() (*suite.Suite, error) {
	o := suite.DefaultOptions(SuiteSeed)
	o.Train, o.HeldOut = 4, 2
	o.MinRows, o.MaxRows = 150, 250
	o.MaxFeatures = 6
	o.PanelSize = 6
	return suite.Generate(context.Background(), o)
})

// SmallSuite returns the small test suite: 4 training and 2 held-out tasks
// of 150 to 250 rows and at most 6 features, leaderboards of 6 programs.
func SmallSuite() (*suite.Suite, error) { return smallSuite() }

// Suites serves SmallSuite for SuiteSeed (it satisfies builtin.Suites).
type Suites struct{}

// Suite returns the small suite, or an error for any other seed.
func (Suites) Suite(ctx context.Context, seed uint64) (*suite.Suite, error) {
	if seed != SuiteSeed {
		return nil, fmt.Errorf("no suite %d in tests (want %d)", seed, SuiteSeed)
	}
	return smallSuite()
}

// InProcess is a sandbox that runs the executor in this process: real
// executions without isolation. It counts its executions and can be told to
// fail like a broken sandbox daemon (FailNext).
type InProcess struct {
	// MaxCPUs, when > 0, is the most CPUs Preflight accepts.
	MaxCPUs float64

	faults
}

var _ sandbox.Sandbox = (*InProcess)(nil)

// Preflight checks the limits' static bounds (Limits.Check): the executions
// run in this process, under none of them. With MaxCPUs set it refuses more
// CPUs, as an engine with that many would.
func (p *InProcess) Preflight(ctx context.Context, l sandbox.Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	if p.MaxCPUs > 0 && l.CPUs > p.MaxCPUs {
		return &sandbox.LimitError{Field: "sandbox.cpus", Value: fmt.Sprint(l.CPUs),
			Reason: fmt.Sprintf("exceeds the %v CPUs of the test sandbox", p.MaxCPUs)}
	}
	return nil
}

// Execute decodes the job and runs executor.Run on it.
func (p *InProcess) Execute(ctx context.Context, req sandbox.Request) (executor.Result, error) {
	if err := p.next(); err != nil {
		return executor.Result{}, err
	}
	job, err := executor.DecodeJob(bytes.NewReader(req.Job))
	if err != nil {
		return executor.Result{}, err
	}
	return executor.Run(ctx, job)
}

// Failing is a real sandbox whose executions fail, as those of a sandbox
// whose engine is down do, while FailNext's count lasts; it counts the
// executions it passes on (Runs).
type Failing struct {
	sandbox.Sandbox
	faults
}

var _ sandbox.Sandbox = (*Failing)(nil)

// NewFailing returns sb whose next n executions fail.
func NewFailing(sb sandbox.Sandbox, n int) *Failing {
	f := &Failing{Sandbox: sb}
	f.FailNext(n)
	return f
}

// Execute fails or passes req on to the wrapped sandbox.
func (f *Failing) Execute(ctx context.Context, req sandbox.Request) (executor.Result, error) {
	if err := f.next(); err != nil {
		return executor.Result{}, err
	}
	return f.Sandbox.Execute(ctx, req)
}

// faults is what InProcess and Failing share: failures on demand and a
// count of the executions run.
type faults struct {
	mu    sync.Mutex
	runs  int
	fails int
}

// FailNext makes the next n executions fail with a sandbox error.
func (f *faults) FailNext(n int) {
	f.mu.Lock()
	f.fails = n
	f.mu.Unlock()
}

// Runs returns the number of executions run so far (failed ones aside).
func (f *faults) Runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs
}

// next is called before an execution: it returns the sandbox error of a
// failure still due, or else counts the execution.
func (f *faults) next() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return errors.New("sandbox down")
	}
	f.runs++
	return nil
}

// Tmpfs mounts a tmpfs of the given size (mount's size option, e.g. "1m")
// on a fresh directory and unmounts it when the test ends; it skips the
// test when it cannot mount (not root, or no mount command).
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}
