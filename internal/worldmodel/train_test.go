package worldmodel

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/wmrl/wmrl/internal/suite"
)

// tinySuite is a fast suite: every (kind, family) among the training tasks,
// small data, a short reference panel.
func tinySuite(t *testing.T) *suite.Suite {
	t.Helper()
	s, err := suite.Generate(context.Background(), suite.Options{
		Seed: 5, Train: 13, HeldOut: 8, MinRows: 150, MaxRows: 240, MaxFeatures: 8, PanelSize: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFitEndToEnd fits on real executions of a tiny suite's training tasks,
// checks that the fit is reproducible byte for byte whatever the number of
// workers, and that on held-out tasks the model orders programs within a
// task better than chance.
func TestFitEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("real executions")
	}
	ctx := context.Background()
	s := tinySuite(t)
	cfg := DefaultFitConfig()
	cfg.SamplesPerTask = 12
	cfg.Workers = 1
	m1, recs, err := Fit(ctx, s, cfg, ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 13*12 {
		t.Fatalf("%d records, want %d", len(recs), 13*12)
	}
	for _, r := range recs {
		task, err := s.Task(r.Task)
		if err != nil {
			t.Fatal(err)
		}
		if task.Split != suite.Train {
			t.Fatalf("fit executed held-out task %s", r.Task)
		}
	}
	cfg.Workers = 3
	m2, _, err := Fit(ctx, s, cfg, ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	a1, err := m1.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := m2.Marshal()
	if !bytes.Equal(a1, a2) {
		t.Fatal("refitting with the same seed gives a different artefact")
	}
	if _, err := Load(a1); err != nil {
		t.Fatalf("fitted artefact does not load: %v", err)
	}

	ec := DefaultEvalConfig()
	ec.SamplesPerTask = 12
	rep, _, err := Evaluate(ctx, m1, s, ec, ExecutorRun)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tiny suite held-out: spearman_within_group %.3f over %d tasks, mean_bias %+.4f", rep.SpearmanWithinGroup, rep.SpearmanGroups, rep.MeanBias)
	if rep.SpearmanGroups < 6 || rep.SpearmanWithinGroup < 0.3 {
		t.Fatalf("held-out within-group Spearman %.3f over %d tasks, want >= 0.3 over >= 6", rep.SpearmanWithinGroup, rep.SpearmanGroups)
	}
}

// TestCollectStopsOnError checks that an execution error (not a solution
// failure) ends the collection with that error.
func TestCollectStopsOnError(t *testing.T) {
	tasks := []*suite.Task{{ID: "a", Index: 0}, {ID: "b", Index: 1}}
	boom := errors.New("sandbox down")
	run := func(_ context.Context, task *suite.Task, _ string, _ uint64) (float64, error) {
		if task.ID == "b" {
			return 0, boom
		}
		return 0.5, nil
	}
	_, err := Collect(context.Background(), tasks, 5, 1, run, 2)
	if !errors.Is(err, boom) {
		t.Fatalf("Collect error = %v, want %v", err, boom)
	}
}

// TestCollectDeterministic checks that records do not depend on the number
// of workers and that programs differ across samples.
func TestCollectDeterministic(t *testing.T) {
	tasks := []*suite.Task{{ID: "a", Index: 0}, {ID: "b", Index: 7}}
	run := func(_ context.Context, task *suite.Task, prog string, s uint64) (float64, error) {
		return float64(len(prog)%7)/7 + float64(s%3)/100, nil
	}
	r1, err := Collect(context.Background(), tasks, 20, 9, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Collect(context.Background(), tasks, 20, 9, run, 4)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for i := range r1 {
		if r1[i] != r2[i] {
			t.Fatalf("record %d: %+v with 1 worker, %+v with 4", i, r1[i], r2[i])
		}
		distinct[r1[i].Program] = true
	}
	if len(distinct) < 20 {
		t.Fatalf("only %d distinct programs in 40 samples", len(distinct))
	}
	if _, err := Collect(context.Background(), tasks, 0, 9, run, 1); err == nil {
		t.Fatal("Collect accepted 0 samples per task")
	}
}
