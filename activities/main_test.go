package activities

import (
	"testing"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// newTestActivities returns Activities on a fresh database, the small test
// suite, the default world model and an in-process sandbox.
func newTestActivities(t *testing.T) (*Activities, *testenv.InProcess) {
	t.Helper()
	a, sb, _ := newTestActivitiesDB(t)
	return a, sb
}

// newTestActivitiesDB is newTestActivities that also returns the database's
// DSN, for tests that write rows the store no longer writes.
func newTestActivitiesDB(t *testing.T) (*Activities, *testenv.InProcess, string) {
	t.Helper()
	s, dsn := testenv.FreshDB(t)
	if _, err := testenv.SmallSuite(); err != nil {
		t.Fatal(err)
	}
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	sb := &testenv.InProcess{}
	return &Activities{Store: s, Suites: testenv.Suites{}, WorldModel: wm, Sandbox: sb, DataDir: t.TempDir(),
		RunsKey: deployenv.RunsKey("test", "db", "0123456789ab")}, sb, dsn
}
