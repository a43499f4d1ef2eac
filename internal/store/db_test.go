package store

import (
	"context"

	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tests run against a real Postgres: WMRL_TEST_DATABASE_URL, or the
// local Debian cluster's socket. Each test that checks migrations gets a
// fresh database; the others share one migrated database per test binary
// and keep apart by run id. Every database made here is dropped at the end.

const defaultTestDSN = "host=/var/run/postgresql user=postgres dbname=postgres"

// testEnv is set up once by TestMain.
type testEnv struct {
	admin  string // DSN of the maintenance database
	shared string // DSN of the shared migrated database
	err    error  // why Postgres is unusable, if it is
}

var env testEnv

func TestMain(m *testing.M) {
	env = setUp()
	code := m.Run()
	if env.err == nil {
		if err := dropDB(context.Background(), env.admin, dbName(env.shared)); err != nil {
			fmt.Fprintln(os.Stderr, "drop shared test database:", err)
		}
	}
	os.Exit(code)
}

func setUp() testEnv {
	e := testEnv{admin: os.Getenv("WMRL_TEST_DATABASE_URL")}
	if e.admin == "" {
		e.admin = defaultTestDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dropStale(ctx, e.admin)
	name, err := createDB(ctx, e.admin)
	if err != nil {
		e.err = err
		return e
	}
	e.shared = withDatabase(e.admin, name)
	s, err := Open(ctx, e.shared)
	if err != nil {
		e.err = err
		return e
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		e.err = fmt.Errorf("migrate shared test database: %w", err)
	}
	return e
}

// needDB fails the test when Postgres is unusable in CI (CI or
// WMRL_TEST_DATABASE_URL set) and skips it elsewhere.
func needDB(t *testing.T) {
	t.Helper()
	if env.err == nil {
		return
	}
	if os.Getenv("CI") != "" || os.Getenv("WMRL_TEST_DATABASE_URL") != "" {
		t.Fatalf("postgres unusable at %q: %v", env.admin, env.err)
	}
	t.Skipf("postgres unusable at %q (%v): start it with deploy/postgres.sh or set WMRL_TEST_DATABASE_URL", env.admin, env.err)
}

// sharedStore opens the shared migrated database.
func sharedStore(t *testing.T) *Store {
	t.Helper()
	needDB(t)
	s, err := Open(t.Context(), env.shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// freshDB creates an empty database for this test, dropped at its end, and
// returns its DSN.
func freshDB(t *testing.T) string {
	t.Helper()
	needDB(t)
	name, err := createDB(t.Context(), env.admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dropDB(context.Background(), env.admin, name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return withDatabase(env.admin, name)
}

func openDSN(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func createDB(ctx context.Context, admin string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("wmrl_test_%d_%08x", os.Getpid(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create test database: %w", err)
	}
	return name, nil
}

func dropDB(ctx context.Context, admin, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// dropStale drops test databases left by test processes of this machine
// that died without cleaning up (a panic skips TestMain's drop). It acts only
// on a Unix-socket server, where the pid in a name is a pid of this machine.
func dropStale(ctx context.Context, admin string) {
	cfg, err := pgx.ParseConfig(admin)
	if err != nil || !strings.HasPrefix(cfg.Host, "/") {
		return
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'wmrl\_test\_%'`)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		var pid int
		if _, err := fmt.Sscanf(n, "wmrl_test_%d_", &pid); err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // still running (or the pid was reused: leave it)
		}
		_ = dropDB(ctx, admin, n) // best effort
	}
}

// withDatabase returns dsn (keyword/value or URL) naming database db.
func withDatabase(dsn, db string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			u.Path = "/" + db
			return u.String()
		}
	}
	return dsn + " dbname=" + db // a later keyword wins
}

// withOptions returns dsn with the server options (the libpq "options"
// keyword: "-c name=value ...") set.
func withOptions(dsn, options string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("options", options)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " options='" + options + "'"
}

func dbName(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	return cfg.Database
}

func TestOpenBadDSN(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "postgres://u@localhost:notaport/x", want: "parse database url"},
		{give: "host=/nonexistent/wmrl-socket-dir user=postgres dbname=nope connect_timeout=2", want: "connect to database nope on socket /nonexistent/wmrl-socket-dir/.s.PGSQL.5432"},
		{give: "host=127.0.0.1 port=1 user=postgres dbname=nope connect_timeout=2", want: "connect to database nope on 127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			s, err := Open(t.Context(), tt.give)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestOpenUnknownDatabase(t *testing.T) {
	needDB(t)
	_, err := Open(t.Context(), withDatabase(env.admin, "wmrl_test_does_not_exist"))
	if err == nil || !strings.Contains(err.Error(), `database "wmrl_test_does_not_exist" does not exist`) {
		t.Fatalf("err = %v, want one naming the missing database", err)
	}
}
