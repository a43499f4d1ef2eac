package runconfig

import (
	"fmt"
	"strings"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/budget"
	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/suite"
)

// Default is the configuration of a full run on the built-in suite: 200
// steps of 32 groups of 8, a tenth of the groups anchors, the default
// debiaser and denoiser, held-out avg@8 every 20 steps. The denoiser's
// defaults are the no-harm ones (docs/design.md, "The default update"):
// the difference estimator with the signal gate, and execution memory,
// each where it applies (DenoiseConfig).
func Default() Config {
	return Config{
		Name:      "default",
		Mode:      mode.WMRL,
		Seed:      1,
		SuiteSeed: suite.DefaultSeed,
		Steps:     200,
		Groups:    32,
		Samples:   8,
		Anchors:   Anchors{Fraction: 0.1, Min: 1, Capacity: 0},
		Debias: debias.Config{
			Method: debias.MethodPAVA, Bins: 10, MinPairs: 32, Window: 0,
		},
		Denoise: Denoise{HalfLife: 32, Warmup: 16, RhoMax: 10, Eta2Floor: denoise.DefaultEta2Floor,
			SignalWindow: denoise.DefaultSignalWindow, Estimator: denoise.EstimatorDifference, Memory: true},
		Advantage: Advantage{Standardize: true, Eps: 1e-4},
		Policy:    Policy{LearningRate: 0.01, KLCoef: 0, Hidden: 32},
		Eval:      Eval{Every: 20, Samples: 8, Tasks: 0},

		ContinueAsNewEvery: 50,
		// A deadline kill depends on the machine's speed and load and would
		// make a step's outcome depend on timing, so programs are refused
		// up front by a static cost budget (the same on every machine) and
		// the deadline is a generous safety net for programs that are
		// truly stuck.
		Sandbox: Sandbox{Kind: SandboxAuto, MemoryMB: 512, DeadlineSeconds: budget.DefaultDeadlineSeconds, CPUs: 1,
			Budget: budget.DefaultBudget},
		Parallelism: 16,
	}
}

// presetNames lists the presets in a fixed order.
var presetNames = []string{"tiny", "demo", "small", "default", "python-demo"}

// PresetNames returns the valid preset names.
func PresetNames() []string { return append([]string(nil), presetNames...) }

// Preset returns a named configuration: tiny (for tests: 3 steps of 4
// groups of 4, 2 held-out tasks), demo (10 steps of 8 groups of 8, finishes
// in minutes on two cores), small (50 steps of 16 groups of 8) or default
// (Default). The error lists the valid names.
func Preset(name string) (Config, error) {
	c := Default()
	switch name {
	case "tiny":
		c.Name = "tiny"
		c.Steps, c.Groups, c.Samples = 3, 4, 4
		c.Anchors = Anchors{Fraction: 0.25, Min: 1}
		c.Debias.MinPairs = 8
		c.Denoise.HalfLife, c.Denoise.Warmup = 4, 2
		c.Policy.Hidden = 16
		c.Eval = Eval{Every: 0, Samples: 2, Tasks: 2}
		c.ContinueAsNewEvery = 2
		c.Parallelism = 4
	case "demo":
		c.Name = "demo"
		c.Steps, c.Groups, c.Samples = 10, 8, 8
		c.Anchors = Anchors{Fraction: 0.25, Min: 1}
		c.Debias.MinPairs = 16
		c.Denoise.HalfLife, c.Denoise.Warmup = 8, 4
		c.Eval = Eval{Every: 5, Samples: 8, Tasks: 4}
		c.ContinueAsNewEvery = 5
		c.Parallelism = 4
	case "small":
		c.Name = "small"
		c.Steps, c.Groups, c.Samples = 50, 16, 8
		c.Anchors = Anchors{Fraction: 0.125, Min: 1}
		c.Eval = Eval{Every: 10, Samples: 8, Tasks: 8}
		c.ContinueAsNewEvery = 25
		c.Parallelism = 8
	case "python-demo":
		// The built-in policy on the real tasks of the task store
		// (tasks: store), its programs rendered as scikit-learn scripts
		// and run in the Python sandbox, where one execution costs
		// seconds (a container and the sklearn import): 6 steps of 6
		// groups of 4, two of them anchors (the executions of a step),
		// held-out avg@4 on every held-out task at the end. Each
		// trajectory is 3 turns (issue #19): the policy acts, reads the
		// script's outcome (its status and score bucket; the output tail is
		// in the observation), and acts again; its reward is the best turn's.
		c.Name = "python-demo"
		c.Tasks = backend.TaskStore
		c.Steps, c.Groups, c.Samples = 6, 6, 4
		c.Anchors = Anchors{Fraction: 0.34, Min: 1}
		c.Debias.MinPairs = 8
		// Execution memory keys a score by task and program, which is
		// not a trajectory's whole action at 3 turns.
		c.Denoise.HalfLife, c.Denoise.Warmup, c.Denoise.Memory = 4, 2, false
		c.Policy.LearningRate = 0.05
		c.Eval = Eval{Every: 0, Samples: 4, Tasks: 0}
		c.ContinueAsNewEvery = 3
		c.Sandbox.Kind = SandboxPython
		c.Parallelism = 2
		c.Trajectory.Turns = 3
	case "default":
	default:
		return Config{}, fmt.Errorf("unknown preset %q: valid presets are %s", name, strings.Join(presetNames, ", "))
	}
	return c, nil
}
