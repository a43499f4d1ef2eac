package workflows

import (
	"testing"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

// pipelineConfig is the tiny preset with pipeline.max_off_policy d.
func pipelineConfig(t *testing.T, d int) runconfig.Config {
	t.Helper()
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Pipeline.MaxOffPolicy = d
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stepMetrics reads the run's recorded step metrics, by step.
func stepMetrics(t *testing.T, st *store.Store, run string, steps int) []store.Step {
	t.Helper()
	rows, err := st.Steps(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != steps {
		t.Fatalf("%s: %d step rows, want %d", run, len(rows), steps)
	}
	return rows
}

// TestRealRunPipeline runs the tiny preset with d = 1 through the test
// environment with the real activities: twice with continue-as-new every 2
// steps and once every 10 (so the steps in flight drain at different
// places), each ending at the same checkpoint, which is not the sequential
// run's; every step after the first reports an importance ratio and
// step 0, sampled from its own checkpoint, none.
func TestRealRunPipeline(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := pipelineConfig(t, 1)
	cfg.Steps = 5
	run := func(id string, c runconfig.Config) RunResult {
		res, segs := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: id, Config: c})
		t.Logf("%s: %d steps, checkpoint %d %s, %d segments", id, res.Steps, res.Checkpoint.Version, short(res.Checkpoint.Hash), segs)
		if res.Steps != c.Steps || res.Checkpoint.Version != c.Steps {
			t.Fatalf("%s: result %+v", id, res)
		}
		return res
	}
	a := run("pipe-a", cfg)
	b := run("pipe-b", cfg)
	wide := cfg
	wide.ContinueAsNewEvery = 10
	c := run("pipe-wide", wide)
	if a.Checkpoint != b.Checkpoint || a.Checkpoint != c.Checkpoint {
		t.Fatalf("same config and seed, different checkpoints: %+v, %+v, %+v", a.Checkpoint, b.Checkpoint, c.Checkpoint)
	}
	if *a.HeldOut != *c.HeldOut {
		t.Fatalf("held-out scores differ: %+v and %+v", a.HeldOut, c.HeldOut)
	}
	seq := cfg
	seq.Pipeline = runconfig.Pipeline{}
	s := run("pipe-seq", seq)
	if s.Checkpoint == a.Checkpoint {
		t.Fatal("d = 1 ended at the sequential run's checkpoint: the pipeline changed nothing")
	}
	// In the wide run, some step started before the one before it was
	// done: two steps were in flight.
	overlap := 0
	rows := stepMetrics(t, st, "pipe-wide", cfg.Steps)
	for i := 1; i < len(rows); i++ {
		if f := rows[i-1].FinishedAt; f != nil && rows[i].StartedAt.Before(*f) {
			overlap++
		}
	}
	t.Logf("pipe-wide: %d of %d steps started before the step before them was done", overlap, len(rows)-1)
	if overlap == 0 {
		t.Error("no step started before the one before it was done: nothing ran in flight")
	}
	for _, id := range []string{"pipe-a", "pipe-wide"} {
		for _, r := range stepMetrics(t, st, id, cfg.Steps) {
			m := r.Metrics
			t.Logf("%s step %d: ratio mean %.4f max %.4f", id, r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
			if r.Step == 0 && m.ImportanceRatioMean != 0 {
				t.Errorf("%s step 0: ratio %v, want none (sampled from its own checkpoint)", id, m.ImportanceRatioMean)
			}
			if r.Step > 0 && (m.ImportanceRatioMean <= 0 || m.ImportanceRatioMax < m.ImportanceRatioMean) {
				t.Errorf("%s step %d: ratio mean %v max %v, want a ratio", id, r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
			}
		}
	}
}
