package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

type oneSuite struct{ s *suite.Suite }

func (o oneSuite) Suite(_ context.Context, seed uint64) (*suite.Suite, error) {
	if seed != o.s.Options.Seed {
		return nil, fmt.Errorf("no suite %d", seed)
	}
	return o.s, nil
}

// Refresh regenerates the frozen model's training data once, keeps it in
// the cache directory for the next process (checked when read back, a
// damaged cache regenerated), and gives the same artefact each time.
func TestRefreshBaseDataCache(t *testing.T) {
	ctx := t.Context()
	s, err := suite.Generate(ctx, suite.Options{Seed: 5, Train: 5, HeldOut: 2, MinRows: 150, MaxRows: 200, MaxFeatures: 6, PanelSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	cfg := worldmodel.DefaultFitConfig()
	cfg.SamplesPerTask = 4
	m, _, err := worldmodel.Fit(ctx, s, cfg, worldmodel.ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Marshal()
	if m, err = worldmodel.Load(b); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	count := func(ctx context.Context, t *suite.Task, prog string, seed uint64) (float64, error) {
		runs.Add(1)
		return worldmodel.ExecutorRun(ctx, t, prog, seed)
	}
	dir := t.TempDir()
	task := s.Split(suite.Train)[0]
	items := []backend.TrainItem{
		{Task: backend.Task{ID: task.ID, Features: task.Card.Vector()}, Solution: "ridge alpha=1", Score: 0.9, Group: "0/0", Key: "k0"},
		{Task: backend.Task{ID: task.ID, Features: task.Card.Vector()}, Solution: "gbt trees=100 depth=2 lr=0.1", Score: 0.2, Group: "0/0", Key: "k1"},
	}
	refresh := func() []byte {
		t.Helper()
		w := &WorldModel{Model: m, Suites: oneSuite{s}, Run: count, CacheDir: dir}
		r, err := w.Refresh(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		if r.Base != m.Checksum || r.BaseExamples != 5*4 {
			t.Fatalf("refreshed %+v", r)
		}
		if _, err := w.Open(r.Artefact); err != nil {
			t.Fatal(err)
		}
		return r.Artefact
	}
	first := refresh()
	if n := runs.Load(); n != 5*4 {
		t.Fatalf("%d executions for the base data, want %d", n, 5*4)
	}
	if string(refresh()) != string(first) || runs.Load() != 5*4 {
		t.Fatalf("a second process re-executed the base data (%d executions) or refitted differently", runs.Load())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "worldmodel-base-*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	if err := os.WriteFile(files[0], []byte(`[{"task":"x","program":"ridge alpha=1","score":1}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if string(refresh()) != string(first) || runs.Load() != 2*5*4 {
		t.Fatalf("a damaged cache: %d executions", runs.Load())
	}
	if _, err := (&WorldModel{Model: m}).Open([]byte("{}")); !backend.IsPermanent(err) {
		t.Errorf("open of a bad artefact: %v", err)
	}
	bad := items[:1:1]
	bad[0].Score = 2
	if _, err := (&WorldModel{Model: m, Suites: oneSuite{s}, CacheDir: dir}).Refresh(ctx, bad); !backend.IsPermanent(err) {
		t.Errorf("score 2: %v", err)
	}
}
