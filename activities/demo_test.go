package activities

import (
	"os"
	"strconv"
	"testing"

	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// TestDemoHashes runs the demo preset (wmrl, 10 steps of 8 groups of 8) on
// the default suite by calling the activities directly in step order
// (driveRun) and logs its checkpoint hashes; with WMRL_DEMO_WANT set, the
// final one must start with it; WMRL_DEMO_MODE runs another mode,
// WMRL_DEMO_BENCH a benchmark preset instead (e.g. small), WMRL_DEMO_SEED
// another run seed, WMRL_DEMO_FLOOR another denoise.eta2_floor. It checks that a change to the method
// leaves the demo's result unchanged. It takes minutes of CPU (the suite
// from the cache, 160 executions in this process), so it runs only with
// WMRL_DEMO_HASH=1.
func TestDemoHashes(t *testing.T) {
	if os.Getenv("WMRL_DEMO_HASH") != "1" {
		t.Skip("set WMRL_DEMO_HASH=1 to run the demo preset in process")
	}
	cfg, err := runconfig.Preset("demo")
	if b := os.Getenv("WMRL_DEMO_BENCH"); b != "" {
		cfg, err = runconfig.BenchPreset(b)
	}
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("WMRL_DEMO_SEED"); v != "" {
		if cfg.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	if f := os.Getenv("WMRL_DEMO_FLOOR"); f != "" {
		if cfg.Denoise.Eta2Floor, err = strconv.ParseFloat(f, 64); err != nil {
			t.Fatal(err)
		}
	}
	if m := os.Getenv("WMRL_DEMO_MODE"); m != "" {
		if cfg.Mode, err = mode.Parse(m); err != nil {
			t.Fatal(err)
		}
	}
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Store: testenv.FreshStore(t), DataDir: t.TempDir(), RunsKey: deployenv.RunsKey("test", "db", "0123456789ab")}
	setBuiltin(a, &builtin.SuiteCache{Load: suite.Load}, wm, &testenv.InProcess{})
	t.Logf("mode %s, denoise %+v", cfg.Mode, cfg.DenoiseConfig())
	hashes := driveRun(t, a, "demo", cfg)
	for v, h := range hashes {
		t.Logf("checkpoint %d: %s", v, h)
	}
	for s := range cfg.Steps {
		f, err := a.Store.FusionState(t.Context(), "demo", s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("step %d: denoise %+v, rho %g", s, f.State, f.Rho)
	}
	c, err := a.Store.Count(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counts %+v", c)
	final := hashes[len(hashes)-1]
	if want := os.Getenv("WMRL_DEMO_WANT"); want != "" && (len(final) < len(want) || final[:len(want)] != want) {
		t.Errorf("final checkpoint %s, want %s...", final, want)
	}
}
