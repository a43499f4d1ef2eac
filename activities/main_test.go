package activities

import (
	"context"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// newTestActivities returns Activities on a fresh database, the small test
// suite, the default world model and an in-process sandbox.
func newTestActivities(t testing.TB) (*Activities, *testenv.InProcess) {
	t.Helper()
	a, sb, _ := newTestActivitiesDB(t)
	return a, sb
}

// newTestActivitiesDB is newTestActivities that also returns the database's
// DSN, for tests that write rows the store no longer writes.
func newTestActivitiesDB(t testing.TB) (*Activities, *testenv.InProcess, string) {
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
	a := &Activities{Store: s, DataDir: t.TempDir(), RunsKey: deployenv.RunsKey("test", "db", "0123456789ab")}
	setBuiltin(a, testenv.Suites{}, wm, sb)
	return a, sb, dsn
}

// setBuiltin gives a the built-in backend over suites, wm and sb, with
// fresh caches.
func setBuiltin(a *Activities, suites builtin.Suites, wm builtin.Predictor, sb sandbox.Sandbox) {
	b := builtin.New(suites, wm, sb)
	a.Tasks, a.Policy, a.WorldModel, a.Grader = b.Tasks, b.Policy, b.WorldModel, b.Grader
}

// fresh returns Activities like a's (same store, world model and sandbox)
// on dataDir and runsKey, with fresh caches: a new worker process.
func fresh(a *Activities, dataDir, runsKey string) *Activities {
	x := &Activities{Store: a.Store, DataDir: dataDir, RunsKey: runsKey}
	g := a.Grader.(*builtin.Grader)
	setBuiltin(x, g.Tasks.Suites, a.WorldModel.(*builtin.WorldModel).Model, g.Sandbox)
	return x
}

// loadPolicy checks that x can use checkpoint ref of run: recorded, and
// loaded and sampled by the policy port.
func loadPolicy(ctx context.Context, x *Activities, run string, ref CheckpointRef) error {
	ck, err := x.checkpoint(ctx, run, ref)
	if err != nil {
		return err
	}
	train, err := x.tasks(ctx, run, testenv.SuiteSeed, backend.Train)
	if err != nil {
		return err
	}
	_, err = x.Policy.Sample(ctx, backend.SampleRequest{Run: run, Checkpoint: ck, Task: train[0], Seeds: []uint64{1}})
	return err
}
