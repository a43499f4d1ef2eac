package runconfig

import (
	"fmt"
	"strings"

	"github.com/wmrl/wmrl/internal/denoise"
)

// benchPresetNames lists the benchmark presets in a fixed order.
var benchPresetNames = []string{"tiny", "small", "full"}

// BenchPresetNames returns the valid presets of `wmrl bench reproduce`.
func BenchPresetNames() []string { return append([]string(nil), benchPresetNames...) }

// BenchPreset returns the base configuration of every run of a benchmark
// (`wmrl bench reproduce`); the benchmark sets each run's name, mode and
// seed. All modes of a benchmark share every other field.
//
//   - tiny (tests): 2 steps of 4 groups of 4, one anchor group, held-out
//     avg@2 on 2 tasks at the end.
//   - small: 30 steps of 8 groups of 8, two anchor groups per step (1/4),
//     held-out avg@8 on all 16 held-out tasks every 15 steps. Two anchor
//     groups, not one (1/8, the nearest to the default preset's
//     fraction 0.1 at G = 8): with one, the only real signal of a step came from one task,
//     and the world model ranks the policy's own programs poorly once it
//     has concentrated on one family (within-group Spearman 0.64 over
//     steps 0-9, 0.17 over 10-19), so wmrl trailed grpo; see
//     docs/results/README.md. It took 32 minutes for 6 modes × 3 seeds
//     on the 2-core machine with the process sandbox. Earlier versions
//     evaluated 6 tasks every 10 steps (45 minutes; too noisy to rank a
//     collapsed policy, see docs/results/grpo-diagnosis.md) and then all
//     16 tasks with one anchor group (38 minutes, Docker sandbox).
//   - full: Default (200 steps of 32 groups of 8, a tenth of the groups
//     anchors, held-out avg@8 on every held-out task every 20 steps), for
//     bigger machines.
func BenchPreset(name string) (Config, error) {
	c := Default()
	c.Name = "bench-" + name
	switch name {
	case "tiny":
		c.Steps, c.Groups, c.Samples = 2, 4, 4
		c.Anchors = Anchors{Fraction: 0.25, Min: 1}
		c.Debias.MinPairs = 4
		c.Denoise.HalfLife, c.Denoise.Warmup = 2, 1
		c.Policy.Hidden = 16
		c.Eval = Eval{Every: 0, Samples: 2, Tasks: 2}
		c.ContinueAsNewEvery = 1
		c.Parallelism = 4
	case "small":
		c.Steps, c.Groups, c.Samples = 30, 8, 8
		c.Anchors = Anchors{Fraction: 0.25, Min: 1}
		c.Debias.MinPairs = 16
		c.Denoise.HalfLife, c.Denoise.Warmup = 8, 4
		c.Eval = Eval{Every: 15, Samples: 8, Tasks: 0}
		c.ContinueAsNewEvery = 10
		c.Parallelism = 4
	case "full":
	default:
		return Config{}, fmt.Errorf("unknown benchmark preset %q: valid presets are %s", name, strings.Join(benchPresetNames, ", "))
	}
	return c, nil
}

// Defaults is the version of the presets' default values, recorded with a
// benchmark's results (reproduce.Header) so that a --config text is read
// over the defaults its runs had. Version 1 made the difference estimator
// and execution memory the denoiser's defaults where they apply
// (DenoiseConfig); before it (version 0, results that record none) the
// default was the fused estimator without memory.
const Defaults = 1

// BenchPresetOf returns BenchPreset(name) with the default values of
// version v of the defaults (Defaults).
func BenchPresetOf(name string, v int) (Config, error) {
	c, err := BenchPreset(name)
	if err != nil {
		return c, err
	}
	switch {
	case v < 1:
		c.Denoise.Estimator, c.Denoise.Memory = denoise.EstimatorFused, false
	case v > Defaults:
		return Config{}, fmt.Errorf("defaults version %d is newer than this build's (%d)", v, Defaults)
	}
	return c, nil
}
