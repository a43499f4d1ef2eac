package runconfig

import (
	"errors"
	"fmt"
	"math"
	"regexp"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/fielderr"
	"github.com/wmrl/wmrl/internal/mode"
)

// validate checks the section's values (zeros mean the defaults) with
// backend.ModelSettings.Validate, the one check of their bounds, which the
// Tinker adapter applies to its own configuration too.
func (t Tinker) validate() error {
	return t.Settings().Validate("policy.tinker.")
}

// Settings are the section's values as the policy port takes them.
func (t Tinker) Settings() backend.ModelSettings {
	return backend.ModelSettings{BaseModel: t.BaseModel, LoRARank: t.LoRARank, Loss: t.Loss, Beta1: t.Beta1, Beta2: t.Beta2,
		Eps: t.Eps, MaxTokens: t.MaxTokens, Temperature: t.Temperature}
}

// validate checks the section against the run's mode and world-model
// backend.
func (r Refresh) validate(m mode.Mode, wmBackend string) error {
	if err := intIn("world_model.refresh.every", r.Every, 0, maxSteps); err != nil {
		return err
	}
	if err := intIn("world_model.refresh.min_pairs", r.MinPairs, 0, maxRefreshPairs); err != nil {
		return err
	}
	if !finite(r.HalfLife) || r.HalfLife < 0 || r.HalfLife > maxSteps {
		return bad("world_model.refresh.half_life", "must be a number of steps in [0, %d] (0: every anchor execution weighs the same), got %v",
			maxSteps, r.HalfLife)
	}
	if !r.On() {
		if r.MinPairs != 0 {
			return bad("world_model.refresh.min_pairs", "is set (%d) but world_model.refresh.every is 0 (off)", r.MinPairs)
		}
		if r.HalfLife != 0 {
			return bad("world_model.refresh.half_life", "is set (%v) but world_model.refresh.every is 0 (off)", r.HalfLife)
		}
		return nil
	}
	if pc := m.Pieces(); !pc.WorldModel || !pc.Anchors {
		return bad("world_model.refresh.every", "mode %s has no anchor pairs to retrain the world model on "+
			"(refresh needs a mode with world-model scores and anchors: wmrl, mix, debias, denoise)", m)
	}
	if wmBackend != "" && wmBackend != backend.Builtin {
		return bad("world_model.refresh.every", "world_model.backend %q cannot be retrained here: only the built-in "+
			"world model is refreshed (a remote model's fine-tuning would go behind backend.Refresher)", wmBackend)
	}
	return nil
}

// validateFeatures checks world_model.features against the mode and the
// backend: a feature set is the built-in world model's.
func (w WorldModel) validateFeatures(m mode.Mode) error {
	switch w.Features {
	case "":
		return nil
	case FeaturesV1, FeaturesV2:
	default:
		return bad("world_model.features", "must be %q (the stored world model's features, the default) or %q, got %q",
			FeaturesV1, FeaturesV2, w.Features)
	}
	if !m.Pieces().WorldModel {
		return bad("world_model.features", "is %q but mode %s uses no world model", w.Features, m)
	}
	if w.Backend != "" && w.Backend != backend.Builtin {
		return bad("world_model.features", "is %q but world_model.backend is %q: feature sets are the built-in world model's",
			w.Features, w.Backend)
	}
	return nil
}

// backendName is the form of a backend's name. Which backends exist is
// the workers' to say (each has its registrations): a run naming one no
// worker has is refused by the preflight, naming the field.
var backendName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// checkBackend checks a backend name field: empty (the built-in backend)
// or a well-formed name.
func checkBackend(path, name string) error {
	if name == "" || backendName.MatchString(name) {
		return nil
	}
	return bad(path, "must be a backend's name (a lower-case letter, then up to 31 lower-case letters, digits, '-' "+
		"or '_'; empty means %q), got %q", backend.Builtin, name)
}

// Limits of the fields, generous but finite so that a typo cannot ask for a
// run that never ends or a step that never fits in memory.
const (
	maxSteps = 1_000_000
	// maxRefreshPairs bounds world_model.refresh.min_pairs.
	maxRefreshPairs = 10_000_000
	maxGroups       = 4096
	maxSamples      = 1024
	maxHidden       = 4096
	maxParallelism  = 4096
	maxNameLen      = 64
	// maxTurns bounds trajectory.turns (the reference trains 5);
	// maxObservationTokens trajectory.observation_tokens.
	maxTurns             = 64
	maxObservationTokens = 1 << 16
	// maxBestOf bounds eval.best_of (activities.maxEvalAttempts is the
	// activity's own bound).
	maxBestOf = 64
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// CheckName reports whether name is a valid run name: the rule of the
// field name, which is also the run's workflow id and database key.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > maxNameLen:
		return fmt.Errorf("at most %d characters, got %d", maxNameLen, len(name))
	case !namePattern.MatchString(name):
		return fmt.Errorf("letters, digits, '.', '_' and '-' only, starting with a letter or digit, got %q", name)
	}
	return nil
}

// bad is the error of the field at path.
func bad(path, format string, args ...any) error { return fielderr.New(path, format, args...) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func intIn(path string, v, lo, hi int) error {
	if v < lo || v > hi {
		return bad(path, "must be in [%d,%d], got %d", lo, hi, v)
	}
	return nil
}

// checkActive checks anchors.active: its fields are read only when it is
// enabled, and then only in a mode that pairs world-model scores with real
// ones (its uncertainty comes from those pairs).
func (c Config) checkActive() error {
	a := c.Anchors.Active
	if !a.Enabled {
		if a.Mix != 0 || a.Floor != 0 {
			return bad("anchors.active.enabled", "must be true when mix or floor is set")
		}
		return nil
	}
	if pc := c.Mode.Pieces(); !pc.Anchors || !pc.WorldModel || pc.AnchorsOnly {
		return bad("anchors.active.enabled", "mode %s has no anchor pairs to weigh (want wmrl, mix, debias or denoise)", c.Mode)
	}
	if !finite(a.Mix) || a.Mix <= 0 || a.Mix > 1 {
		return bad("anchors.active.mix", "must be in (0,1], got %v", a.Mix)
	}
	if err := a.Selection().Validate(); err != nil {
		return fielderr.Under("anchors.active.", err)
	}
	return nil
}

// checkDenoiseSet refuses a denoise.estimator or denoise.memory that a
// document set (set reports whether it did) where the run would not read
// it (DenoiseConfig): a default that does not apply is left out quietly,
// a setting the user wrote is not.
func (c Config) checkDenoiseSet(set func(path string) bool) []error {
	var errs []error
	pc := c.Mode.Validate() == nil && c.Mode.Pieces().Denoise
	if set("denoise.estimator") && c.Denoise.Estimator == denoise.EstimatorDifference {
		switch {
		case !pc:
			errs = append(errs, bad("denoise.estimator", "%q combines anchor and world-model streams; mode %s does not fuse them (want wmrl or denoise)",
				c.Denoise.Estimator, c.Mode))
		case c.Denoise.SignalWindow == 0:
			errs = append(errs, bad("denoise.estimator", "%q reads λ from the signal gate: set denoise.signal_window (e.g. %d)",
				c.Denoise.Estimator, denoise.DefaultSignalWindow))
		case c.Denoise.WMShareMax != 0:
			errs = append(errs, bad("denoise.estimator", "%q sets the world model's share itself: leave denoise.wm_share_max at 0", c.Denoise.Estimator))
		}
	}
	if set("denoise.memory") && c.Denoise.Memory {
		switch {
		case !pc || c.Mode.Pieces().ExecuteAll:
			errs = append(errs, bad("denoise.memory", "replaces world-model scores by earlier executions; mode %s does not fuse the two (want wmrl or denoise)", c.Mode))
		case c.Trajectory.Turns > 1:
			errs = append(errs, bad("denoise.memory", "keys an execution by its task and program; with trajectory.turns %d a trajectory's score depends on its turns too",
				c.Trajectory.Turns))
		}
	}
	return errs
}

// checkSelective checks anchors.selective: read only when it is enabled,
// and then only in a mode that trains on calibrated world-model scores next
// to anchor pairs (the uncertainty comes from those pairs, and the decision
// is about world-model groups).
func (c Config) checkSelective() error {
	s := c.Anchors.Selective
	if !s.Enabled {
		if s.Ratio != 0 {
			return bad("anchors.selective.enabled", "must be true when ratio is set")
		}
		return nil
	}
	if pc := c.Mode.Pieces(); !pc.Anchors || !pc.WorldModel || pc.AnchorsOnly || pc.ExecuteAll {
		return bad("anchors.selective.enabled", "mode %s has no world-model groups next to anchor pairs "+
			"(want wmrl, mix, debias or denoise)", c.Mode)
	}
	if err := s.Rule().Validate(); err != nil {
		return fielderr.Under("anchors.selective.", err)
	}
	return nil
}

// checkTrajectory checks the trajectory section. Zeros are the defaults.
// More than one turn is built for the built-in and the Tinker policy
// (docs/design.md, "Multi-turn trajectories").
func (c Config) checkTrajectory() []func() error {
	t := c.Trajectory
	return []func() error{
		func() error {
			if err := intIn("trajectory.turns", t.Turns, 0, maxTurns); err != nil {
				return err
			}
			if b := c.Policy.Backend; t.MultiTurn() && b != "" && b != backend.Builtin && b != backend.Tinker {
				return bad("trajectory.turns", "%d turns with policy.backend %q: multi-turn sampling is built for the "+
					"built-in policy and the Tinker policy only", t.Turns, b)
			}
			return nil
		},
		func() error {
			switch t.Reward {
			case "", RewardMax, RewardLast:
				return nil
			}
			return bad("trajectory.reward", "must be %q or %q (empty: %q), got %q", RewardMax, RewardLast, RewardMax, t.Reward)
		},
		func() error {
			return intIn("trajectory.observation_tokens", t.ObservationTokens, 0, maxObservationTokens)
		},
	}
}

// checkPipeline checks the pipeline section. Zeros are the defaults. The
// workflows run any d in range (docs/design.md, "Asynchronous pipeline"):
// single-shot and multi-turn trajectories (every turn of step t sampled
// from checkpoint max(0, t−d)), with or without active anchor selection
// (whose uncertainties at step t read steps 0..t−d−1).
func (c Config) checkPipeline() []func() error {
	p := c.Pipeline
	return []func() error{
		func() error {
			if err := intIn("pipeline.max_off_policy", p.MaxOffPolicy, 0, MaxOffPolicy); err != nil {
				return err
			}
			if p.MaxOffPolicy > 0 && c.Anchors.Selective.Enabled {
				return bad("pipeline.max_off_policy", "%d with anchors.selective: selective scoring is not built for the "+
					"asynchronous pipeline; use 0 (the sequential step)", p.MaxOffPolicy)
			}
			return nil
		},
		func() error {
			if e := p.Clip; !finite(e) || e < 0 || e >= 1 {
				return bad("pipeline.clip", "must be in [0,1) (0: the default %v), got %v", DefaultClip, e)
			}
			return nil
		},
	}
}

// checkAdaptive checks anchors.adaptive when target_rho is set: the
// controller reads ρ, so the mode must denoise.
func (c Config) checkAdaptive() error {
	a := c.Anchors.Adaptive
	if !a.Enabled() {
		if a != (AdaptiveAnchors{}) {
			return bad("anchors.adaptive.target_rho", "must be set (at least 1) when floor, ceiling or gain is")
		}
		return nil
	}
	if !c.Mode.Pieces().Denoise {
		return bad("anchors.adaptive.target_rho", "mode %s has no ρ to hold (want wmrl or denoise)", c.Mode)
	}
	if err := a.Controller().Validate(); err != nil {
		return fielderr.Under("anchors.adaptive.", err)
	}
	if a.Ceiling == 0 {
		return bad("anchors.adaptive.ceiling", "must be above 0")
	}
	return nil
}

// Validate reports the first invalid field, by its path.
func (c Config) Validate() error {
	for _, check := range c.checks() {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// Problems reports every invalid field, by its path, in the order of
// Validate's checks; nil when the configuration is valid.
func (c Config) Problems() []error {
	var errs []error
	for _, check := range c.checks() {
		if err := check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checks returns one check per field.
func (c Config) checks() []func() error {
	checks := []func() error{
		func() error {
			if err := CheckName(c.Name); err != nil {
				return bad("name", "%v", err)
			}
			return nil
		},
		func() error {
			if err := c.Mode.Validate(); err != nil {
				return bad("mode", "%v", err)
			}
			return nil
		},
		func() error { return intIn("steps", c.Steps, 1, maxSteps) },
		func() error { return intIn("groups", c.Groups, 1, maxGroups) },
		func() error { return intIn("samples", c.Samples, 2, maxSamples) },
		func() error {
			if !finite(c.Anchors.Fraction) || c.Anchors.Fraction < 0 || c.Anchors.Fraction > 1 {
				return bad("anchors.fraction", "must be in [0,1], got %v", c.Anchors.Fraction)
			}
			return nil
		},
		func() error {
			// The anchor mode trains on its anchor groups alone: a step
			// without one would have nothing to train on.
			if c.Mode == mode.Anchor && c.Anchors.Min < 1 {
				return bad("anchors.min", "must be at least 1 in mode %s (it trains on the anchor groups only), got %d",
					c.Mode, c.Anchors.Min)
			}
			return intIn("anchors.min", c.Anchors.Min, 0, c.Groups)
		},
		func() error { return intIn("anchors.capacity", c.Anchors.Capacity, 0, maxGroups) },
		c.checkActive,
		c.checkAdaptive,
		c.checkSelective,
	}
	checks = append(checks, section("debias.", c.Debias, debias.Default(), debias.Config.Validate, []field[debias.Config]{
		{"method", func(d *debias.Config, s debias.Config) { d.Method = s.Method }, nil},
		{"bins", func(d *debias.Config, s debias.Config) { d.Bins = s.Bins }, nil},
		{"min_pairs", func(d *debias.Config, s debias.Config) { d.MinPairs = s.MinPairs }, nil},
		{"window", func(d *debias.Config, s debias.Config) { d.Window = s.Window }, nil},
	})...)
	checks = append(checks, section("denoise.", c.Denoise, Default().Denoise, func(d Denoise) error { return d.config().Validate() },
		[]field[Denoise]{
			{"half_life", func(d *Denoise, s Denoise) { d.HalfLife = s.HalfLife }, func(s Denoise) float64 { return s.HalfLife }},
			{"warmup", func(d *Denoise, s Denoise) { d.Warmup = s.Warmup }, nil},
			{"rho_max", func(d *Denoise, s Denoise) { d.RhoMax = s.RhoMax }, func(s Denoise) float64 { return s.RhoMax }},
			{"eta2_floor", func(d *Denoise, s Denoise) { d.Eta2Floor = s.Eta2Floor }, func(s Denoise) float64 { return s.Eta2Floor }},
			{"signal_window", func(d *Denoise, s Denoise) { d.SignalWindow = s.SignalWindow }, nil},
			{"wm_share_max", func(d *Denoise, s Denoise) { d.WMShareMax = s.WMShareMax }, func(s Denoise) float64 { return s.WMShareMax }},
			{"estimator", func(d *Denoise, s Denoise) { d.Estimator = s.Estimator }, nil},
			{"memory", func(d *Denoise, s Denoise) { d.Memory = s.Memory }, nil},
		})...)
	checks = append(checks, section("advantage.", c.Advantage, Default().Advantage, func(a Advantage) error { return a.config().Validate() },
		[]field[Advantage]{
			{"standardize", func(d *Advantage, s Advantage) { d.Standardize = s.Standardize }, nil},
			{"eps", func(d *Advantage, s Advantage) { d.Eps = s.Eps }, func(s Advantage) float64 { return s.Eps }},
		})...)
	checks = append(checks, []func() error{
		func() error {
			if !finite(c.Policy.LearningRate) || c.Policy.LearningRate <= 0 || c.Policy.LearningRate > 1 {
				return bad("policy.learning_rate", "must be in (0,1], got %v", c.Policy.LearningRate)
			}
			return nil
		},
		func() error {
			if !finite(c.Policy.KLCoef) || c.Policy.KLCoef < 0 {
				return bad("policy.kl_coef", "must be a finite number >= 0, got %v", c.Policy.KLCoef)
			}
			return nil
		},
		func() error { return intIn("policy.hidden", c.Policy.Hidden, 1, maxHidden) },
		func() error { return checkBackend("policy.backend", c.Policy.Backend) },
		c.Policy.Tinker.validate,
		func() error {
			s := c.WorldModel.Simulated
			if s == (Simulated{}) {
				return nil
			}
			if c.WorldModel.Backend != backend.Simulated {
				return bad("world_model.simulated", "is set but world_model.backend is %q, not %q", c.WorldModel.Backend, backend.Simulated)
			}
			return backend.Simulation{Noise: s.Noise, Bias: s.Bias}.Check()
		},
		func() error { return checkBackend("world_model.backend", c.WorldModel.Backend) },
		func() error { return c.WorldModel.Refresh.validate(c.Mode, c.WorldModel.Backend) },
		func() error { return c.WorldModel.validateFeatures(c.Mode) },
		func() error {
			if err := checkBackend("tasks", c.Tasks); err != nil {
				return err
			}
			if c.Tasks == backend.TaskStore && c.Sandbox.Kind != SandboxPython {
				return bad("tasks", "%q needs sandbox.kind %q (the store's tasks are graded in the Python sandbox), got sandbox.kind %q",
					c.Tasks, SandboxPython, c.Sandbox.Kind)
			}
			return nil
		},
	}...)
	checks = append(checks, c.checkTrajectory()...)
	checks = append(checks, c.checkPipeline()...)
	return append(checks, []func() error{
		func() error { return intIn("eval.every", c.Eval.Every, 0, maxSteps) },
		func() error { return intIn("eval.samples", c.Eval.Samples, 1, maxSamples) },
		func() error { return intIn("eval.tasks", c.Eval.Tasks, 0, 1000) },
		func() error {
			if err := intIn("eval.best_of", c.Eval.BestOf, 0, maxBestOf); err != nil {
				return err
			}
			if c.Eval.BestOf > 1 && c.Trajectory.MultiTurn() {
				return bad("eval.best_of", "%d with trajectory.turns %d: a multi-turn policy is evaluated over its %d turns "+
					"(the same executions per sample); best_of is for a single-shot policy", c.Eval.BestOf,
					c.Trajectory.Turns, c.Trajectory.Turns)
			}
			return nil
		},
		func() error { return intIn("continue_as_new_every", c.ContinueAsNewEvery, 1, 10_000) },
		func() error {
			// The worker's own sandboxes (auto, docker, process) or a
			// grader's name.
			if c.Sandbox.Kind == "" {
				return bad("sandbox.kind", "must be set (%q, %q, %q or a grader's name)", SandboxAuto, SandboxDocker, SandboxProcess)
			}
			return checkBackend("sandbox.kind", c.Sandbox.Kind)
		},
		// The limits' bounds are the executions' own (backend.Limits.Check).
		func() error {
			return intIn(backend.FieldMemory, c.Sandbox.MemoryMB, backend.MinMemoryBytes>>20, backend.MaxMemoryBytes>>20)
		},
		func() error {
			if d, hi := c.Sandbox.DeadlineSeconds, backend.MaxDeadline.Seconds(); !finite(d) || d <= 0 || d > hi {
				return bad(backend.FieldDeadline, "must be in (0,%v], got %v", hi, d)
			}
			return nil
		},
		func() error {
			if n := c.Sandbox.CPUs; !finite(n) || n < backend.MinCPUs || n > backend.MaxCPUs {
				return bad(backend.FieldCPUs, "must be in [%v,%v], got %v", backend.MinCPUs, backend.MaxCPUs, n)
			}
			return nil
		},
		func() error {
			if !finite(c.Sandbox.Budget) || c.Sandbox.Budget < 0 {
				return bad("sandbox.budget", "must be a finite number >= 0, got %v", c.Sandbox.Budget)
			}
			return nil
		},
		func() error { return intIn("parallelism", c.Parallelism, 1, maxParallelism) },
		func() error {
			if h := c.Sandbox.RetryHours; !finite(h) || h < 0 || h > 24*30 {
				return bad("sandbox.retry_hours", "must be in [0,720] (0: the default %v), got %v", DefaultRetryHours, h)
			}
			return nil
		},
		func() error {
			if u := c.MaxUngraded; u != nil && (!finite(*u) || *u < 0 || *u > 1) {
				return bad("max_ungraded", "must be in [0,1], got %v", *u)
			}
			return nil
		},
	}...)
}

// field is one field of a section: its YAML name, how to copy it from one
// section value to another, and, for a float, how to read it.
type field[S any] struct {
	name  string
	copy  func(dst *S, src S)
	float func(S) float64 // nil: not a float
}

// section returns one check per field of a section of the configuration
// that its domain package validates (validate, the domain's Validate, which
// reports the first invalid field as a *fielderr.Error). Each check copies
// one field of s onto def, a valid section, and validates that, so every
// invalid field is reported, by its owner's rule, under its YAML path
// (prefix and its yaml name) in place of the domain's name. A number that
// is not finite is reported without asking the domain: a Config is carried
// as JSON, which has no NaN or infinity. (No reflection: workflows call
// Validate, and workflowcheck refuses reflect.Value.Set.)
func section[S any](prefix string, s, def S, validate func(S) error, fields []field[S]) []func() error {
	checks := make([]func() error, len(fields))
	for i, f := range fields {
		path := prefix + f.name
		checks[i] = func() error {
			if f.float != nil && !finite(f.float(s)) {
				return bad(path, "must be a finite number, got %v", f.float(s))
			}
			one := def
			f.copy(&one, s)
			if err := validate(one); err != nil {
				msg := err.Error()
				if fe, ok := fielderr.As(err); ok {
					msg = fe.Msg
				}
				return bad(path, "%s", msg)
			}
			return nil
		}
	}
	return checks
}

// FitDenoise clears the denoise.estimator and denoise.memory that the run
// would not read (DenoiseConfig), in the fields a document did not set
// (set reports whether it did; nil: none set), so that the configuration
// a run records says what it does, and a configuration written out and
// read back is the same. Load calls it; a caller that changes the mode or
// the turns of a loaded configuration calls it again.
func (c *Config) FitDenoise(set func(path string) bool) {
	if set == nil {
		set = func(string) bool { return false }
	}
	eff := c.DenoiseConfig()
	if !set("denoise.estimator") && c.Denoise.Estimator == denoise.EstimatorDifference && eff.Estimator != c.Denoise.Estimator {
		c.Denoise.Estimator = eff.Estimator
	}
	if !set("denoise.memory") && c.Denoise.Memory && !eff.Memory {
		c.Denoise.Memory = false
	}
}
