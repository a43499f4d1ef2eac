package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/migrations"
)

func TestMigrateCommand(t *testing.T) {
	dsn := testenv.EmptyDB(t)
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
