package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wmrl/wmrl/migrations"
)

// migrateTestDB creates an empty database on the test Postgres
// (WMRL_TEST_DATABASE_URL, else the local socket), drops it after the test,
// and returns its DSN. Without Postgres the test fails in CI and is skipped
// elsewhere.
func migrateTestDB(t *testing.T) string {
	t.Helper()
	admin := os.Getenv("WMRL_TEST_DATABASE_URL")
	if admin == "" {
		admin = "host=/var/run/postgresql user=postgres dbname=postgres"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("WMRL_TEST_DATABASE_URL") != "" {
			t.Fatalf("postgres unreachable at %q: %v", admin, err)
		}
		t.Skipf("postgres unreachable at %q (%v): start it with deploy/postgres.sh or set WMRL_TEST_DATABASE_URL", admin, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("wmrl_test_%d_%08x", os.Getpid(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
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
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		if u, err := url.Parse(admin); err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	return admin + " dbname=" + name
}

func TestMigrateCommand(t *testing.T) {
	dsn := migrateTestDB(t)
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].Version

	out, _, err := runWMRL(t, "migrate", "--database-url", dsn)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, m := range all {
		fmt.Fprintf(&want, "applied %s\n", m.Name)
	}
	fmt.Fprintf(&want, "schema is at version %d\n", last)
	if out != want.String() {
		t.Errorf("first migrate printed %q, want %q", out, want.String())
	}

	// Again, through the environment and with --json: nothing to do.
	t.Setenv("WMRL_DATABASE_URL", dsn)
	out, _, err = runWMRL(t, "migrate", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Applied []migrations.Migration `json:"applied"`
		Version int                    `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if r.Applied == nil || len(r.Applied) != 0 || r.Version != last {
		t.Errorf("second migrate --json = %s, want applied [] and version %d", out, last)
	}
	out, _, err = runWMRL(t, "migrate")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("schema already at version %d\n", last); out != want {
		t.Errorf("third migrate printed %q, want %q", out, want)
	}
}

func TestMigrateCommandBadDSN(t *testing.T) {
	_, _, err := runWMRL(t, "migrate", "--database-url", "host=/nonexistent/wmrl user=postgres dbname=wmrl connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "connect to database wmrl on socket /nonexistent/wmrl/.s.PGSQL.5432") {
		t.Errorf("err = %v, want one naming the database and the socket", err)
	}
}
