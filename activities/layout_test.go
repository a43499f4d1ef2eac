package activities

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/deployenv"
)

// Two deployments sharing a data directory, each with a run of the same
// name: neither overwrites the other's checkpoints. A run written before
// the layout was keyed is still found through its recorded locations.
func TestDeploymentsShareADataDir(t *testing.T) {
	ctx := t.Context()
	shared := t.TempDir()
	a, _ := newTestActivities(t)
	b, _ := newTestActivities(t)
	for _, x := range []*Activities{a, b} {
		d, err := x.Store.Deployment(ctx)
		if err != nil {
			t.Fatal(err)
		}
		x.DataDir, x.RunsKey = shared, deployenv.RunsKey("default", d.Database, d.ID)
	}
	if a.RunsKey == b.RunsKey {
		t.Fatalf("two databases give the same runs key %s", a.RunsKey)
	}
	cfgA, cfgB := tinyConfig(t), tinyConfig(t)
	cfgB.Seed++
	ra, err := a.CreateRun(ctx, CreateRunRequest{RunID: "same", Config: cfgA})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.CreateRun(ctx, CreateRunRequest{RunID: "same", Config: cfgB})
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := a.Store.Checkpoint(ctx, "same", 0)
	cb, _ := b.Store.Checkpoint(ctx, "same", 0)
	if ca.Location == cb.Location || !strings.HasPrefix(ca.Location, filepath.Join(shared, "runs", a.RunsKey, "same")+string(filepath.Separator)) {
		t.Errorf("checkpoint 0 of the two runs at %s and %s", ca.Location, cb.Location)
	}
	for _, c := range []struct {
		x   *Activities
		ref CheckpointRef
	}{{a, ra.Checkpoint}, {b, rb.Checkpoint}} {
		if err := loadPolicy(ctx, c.x, "same", c.ref); err != nil {
			t.Errorf("load %+v: %v", c.ref, err)
		}
	}

	// A run created with the unkeyed layout, then served by a keyed worker.
	legacy := fresh(a, shared, "")
	old, err := legacy.CreateRun(ctx, CreateRunRequest{RunID: "old", Config: cfgA})
	if err != nil {
		t.Fatal(err)
	}
	co, _ := a.Store.Checkpoint(ctx, "old", 0)
	if filepath.Dir(co.Location) != filepath.Join(shared, "runs", "old", "checkpoints") {
		t.Errorf("unkeyed checkpoint at %s", co.Location)
	}
	fresh := fresh(a, shared, a.RunsKey)
	if err := loadPolicy(ctx, fresh, "old", old.Checkpoint); err != nil {
		t.Errorf("a keyed worker loads the unkeyed run's checkpoint: %v", err)
	}
}
