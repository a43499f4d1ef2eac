package activities

import (
	"math"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/store"
)

// The simulated world model scores a trajectory with its real score (the
// oracle) or that score degraded by the run's noise and bias, the same on
// a retry; it is a world model run by name like any other.
func TestSimulatedWorldModel(t *testing.T) {
	a, _ := newTestActivities(t)
	// The worker's registration of world_model.backend "simulated".
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindWorldModel, Name: "simulated",
		Adapter: &builtin.SimulatedWorldModel{Tasks: a.Tasks.(*builtin.Tasks)}})
	ctx := t.Context()
	scores := func(run string, noise, bias float64) []float64 {
		t.Helper()
		cfg := tinyConfig(t)
		cfg.WorldModel.Backend = "simulated"
		cfg.WorldModel.Simulated.Noise, cfg.WorldModel.Simulated.Bias = noise, bias
		created, err := a.CreateRun(ctx, CreateRunRequest{RunID: run, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Generate(ctx, GenerateRequest{RunID: run, Step: 0, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed,
			SuiteSeed: cfg.SuiteSeed, Checkpoint: created.Checkpoint}); err != nil {
			t.Fatal(err)
		}
		for range 2 { // a retry stores the same scores
			if _, err := a.ScoreWorldModel(ctx, ScoreRequest{RunID: run, Step: 0, Group: 0, SuiteSeed: cfg.SuiteSeed}); err != nil {
				t.Fatal(err)
			}
		}
		var out []float64
		for i := range cfg.Samples {
			if _, err := a.Execute(ctx, ExecuteRequest{RunID: run, Step: 0, Group: 0, Sample: i, Seed: cfg.Seed,
				SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits()}); err != nil {
				t.Fatal(err)
			}
			tr, err := a.Store.Trajectory(ctx, store.Key{Run: run, Step: 0, Group: 0, Sample: i})
			if err != nil || tr.WMScore == nil || tr.Exec == nil {
				t.Fatalf("trajectory %d: %+v, %v", i, tr, err)
			}
			out = append(out, *tr.WMScore, tr.Exec.Score)
		}
		return out
	}
	oracle := scores("oracle", 0, 0)
	for i := 0; i < len(oracle); i += 2 {
		if math.Abs(oracle[i]-oracle[i+1]) > 1e-9 {
			t.Errorf("oracle: r_wm %v, r_env %v", oracle[i], oracle[i+1])
		}
	}
	biased := scores("biased", 0, -0.05)
	noisy := scores("noisy", 0.2, 0)
	differ := 0
	for i := 0; i < len(oracle); i += 2 {
		if want := math.Max(0, oracle[i+1]-0.05); math.Abs(biased[i]-want) > 1e-9 {
			t.Errorf("bias -0.05: r_wm %v, want %v", biased[i], want)
		}
		if noisy[i] != oracle[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Error("noise 0.2 changed no score")
	}
}
