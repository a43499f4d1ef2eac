package runconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/sandbox"
)

// Config is a training run's configuration.
type Config struct {
	// Name labels the run (search attribute WmrlRunName).
	Name string `yaml:"name" json:"name"`
	// Mode is one of the six training modes.
	Mode mode.Mode `yaml:"mode" json:"mode"`
	// Seed drives every random choice of the run: initial policy, samples,
	// anchor groups, task choice.
	Seed uint64 `yaml:"seed" json:"seed"`
	// SuiteSeed selects the built-in suite.
	SuiteSeed uint64 `yaml:"suite_seed" json:"suite_seed"`
	// Steps is the number of training steps.
	Steps int `yaml:"steps" json:"steps"`
	// Groups is G, the number of groups (one task each) per step.
	Groups int `yaml:"groups" json:"groups"`
	// Samples is n, the number of trajectories per group.
	Samples int `yaml:"samples" json:"samples"`

	Anchors   Anchors   `yaml:"anchors" json:"anchors"`
	Debias    Debias    `yaml:"debias" json:"debias"`
	Denoise   Denoise   `yaml:"denoise" json:"denoise"`
	Advantage Advantage `yaml:"advantage" json:"advantage"`
	Policy    Policy    `yaml:"policy" json:"policy"`
	Eval      Eval      `yaml:"eval" json:"eval"`

	// ContinueAsNewEvery is K: the run workflow continues as new after K
	// steps, so its history stays short.
	ContinueAsNewEvery int `yaml:"continue_as_new_every" json:"continue_as_new_every"`

	Sandbox Sandbox `yaml:"sandbox" json:"sandbox"`

	// Parallelism bounds the fan-out of a step: at most this many
	// activities of one kind (executions, generations) run at once.
	Parallelism int `yaml:"parallelism" json:"parallelism"`

	// MaxUngraded is the largest share, in [0,1], of a step's executed
	// trajectories that the grader may leave without a verdict (excluded
	// from the advantages) before the step fails loudly; nil means
	// DefaultMaxUngraded.
	MaxUngraded *float64 `yaml:"max_ungraded" json:"max_ungraded,omitempty"`
}

// Anchors configures the anchor stream.
type Anchors struct {
	// Fraction f of the groups that are anchors: k = max(min, round(f·G)).
	Fraction float64 `yaml:"fraction" json:"fraction"`
	// Min is the floor on the number of anchor groups.
	Min int `yaml:"min" json:"min"`
	// Capacity caps the anchor groups per step by the free sandbox
	// capacity, in groups; 0 means no cap.
	Capacity int `yaml:"capacity" json:"capacity"`
}

// Debias configures Online Debiasing (package debias).
type Debias struct {
	Method   string `yaml:"method" json:"method"`
	Bins     int    `yaml:"bins" json:"bins"`
	MinPairs int    `yaml:"min_pairs" json:"min_pairs"`
	Window   int    `yaml:"window" json:"window"`
}

// Denoise configures Inverse-Variance Denoising (package denoise).
type Denoise struct {
	HalfLife float64 `yaml:"half_life" json:"half_life"`
	Warmup   int     `yaml:"warmup" json:"warmup"`
	RhoMax   float64 `yaml:"rho_max" json:"rho_max"`
}

// Advantage configures the GRPO advantages (package advantage).
type Advantage struct {
	Standardize bool    `yaml:"standardize" json:"standardize"`
	Eps         float64 `yaml:"eps" json:"eps"`
}

// Policy configures the built-in policy and its optimiser.
type Policy struct {
	LearningRate float64 `yaml:"learning_rate" json:"learning_rate"`
	KLCoef       float64 `yaml:"kl_coef" json:"kl_coef"`
	Hidden       int     `yaml:"hidden" json:"hidden"`
}

// Eval configures the held-out evaluation (avg@Samples by real execution).
type Eval struct {
	// Every E steps, and always after the last step; 0 means only at the end.
	Every int `yaml:"every" json:"every"`
	// Samples per held-out task (8 for avg@8).
	Samples int `yaml:"samples" json:"samples"`
	// Tasks limits the evaluation to the first Tasks held-out tasks; 0
	// means all of them.
	Tasks int `yaml:"tasks" json:"tasks"`
}

// Sandbox kinds.
const (
	SandboxAuto    = "auto"    // Docker when an engine answers, else process
	SandboxDocker  = "docker"  // one container per execution
	SandboxProcess = "process" // a limited child process
)

// Sandbox configures the real executions.
type Sandbox struct {
	Kind            string  `yaml:"kind" json:"kind"`
	MemoryMB        int     `yaml:"memory_mb" json:"memory_mb"`
	DeadlineSeconds float64 `yaml:"deadline_seconds" json:"deadline_seconds"`
	CPUs            float64 `yaml:"cpus" json:"cpus"`
	// Budget is the largest estimated cost (tabular.EstimateCost work
	// units) a program may have to be run; a dearer one is scored as a
	// timeout without running, the same way on every machine. 0 turns the
	// budget off.
	Budget float64 `yaml:"budget" json:"budget"`
	// RetryHours bounds how long one execution is retried while the
	// infrastructure fails (database, engine, network, refused limits)
	// before its step fails: the run waits out an outage rather than train
	// on fewer executions. 0 means DefaultRetryHours.
	RetryHours float64 `yaml:"retry_hours" json:"retry_hours,omitempty"`
}

// DefaultRetryHours is the default of sandbox.retry_hours.
const DefaultRetryHours = 6

// RetryBudget is how long one execution's infrastructure failures are
// retried (sandbox.retry_hours, or its default).
func (s Sandbox) RetryBudget() time.Duration {
	h := s.RetryHours
	if h == 0 {
		h = DefaultRetryHours
	}
	return time.Duration(h * float64(time.Hour))
}

// DefaultMaxUngraded is the default of max_ungraded.
const DefaultMaxUngraded = 0.25

// UngradedCeiling is the largest share of a step's executed trajectories
// that may be left ungraded by the grader's verdict (max_ungraded, or its
// default) before the step fails.
func (c Config) UngradedCeiling() float64 {
	if c.MaxUngraded == nil {
		return DefaultMaxUngraded
	}
	return *c.MaxUngraded
}

// Limits returns the sandbox limits of one execution.
func (s Sandbox) Limits() sandbox.Limits {
	l := sandbox.DefaultLimits()
	l.MemoryBytes = int64(s.MemoryMB) << 20
	l.CPUs = s.CPUs
	l.Deadline = time.Duration(s.DeadlineSeconds * float64(time.Second))
	return l
}

// DebiasConfig returns the debiaser's configuration.
func (c Config) DebiasConfig() debias.Config {
	return debias.Config{Method: c.Debias.Method, Bins: c.Debias.Bins, MinPairs: c.Debias.MinPairs, Window: c.Debias.Window}
}

// DenoiseConfig returns the denoiser's configuration.
func (c Config) DenoiseConfig() denoise.Config {
	return denoise.Config{HalfLife: c.Denoise.HalfLife, WarmUp: c.Denoise.Warmup, RhoMax: c.Denoise.RhoMax}
}

// AdvantageConfig returns the advantage configuration (at least 2 graded
// trajectories per group).
func (c Config) AdvantageConfig() advantage.Config {
	return advantage.Config{Standardize: c.Advantage.Standardize, Eps: c.Advantage.Eps, MinGraded: 2}
}

// FreeCapacity is the capacity argument of anchors.Select: -1 (no cap)
// when Anchors.Capacity is 0.
func (c Config) FreeCapacity() int {
	if c.Anchors.Capacity == 0 {
		return -1
	}
	return c.Anchors.Capacity
}

// Parse reads a YAML configuration over base: fields the document omits keep
// base's values. Unknown fields are rejected. The result is validated.
func Parse(base Config, data []byte) (Config, error) {
	cfg, err := Decode(base, data)
	if err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Decode reads a YAML configuration over base as Parse does, strictly, but
// does not validate the result, so that a caller can change fields (a name
// or seed from flags) and then report every problem at once (Problems).
func Decode(base Config, data []byte) (Config, error) {
	if err := checkMode(data); err != nil {
		return Config{}, err
	}
	cfg := base
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, errors.New("config: empty document")
		}
		return Config{}, fmt.Errorf("config: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, errors.New("config: more than one YAML document")
	}
	return cfg, nil
}

// checkMode reports an invalid top-level mode with its field path and line
// (the YAML decoder would report mode.Mode's error without either).
func checkMode(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil // the strict decode reports it
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "mode" || v.Kind != yaml.ScalarNode {
			continue
		}
		if _, err := mode.Parse(v.Value); err != nil {
			return bad("mode", "line %d: %v", v.Line, err)
		}
	}
	return nil
}

// Limits of the fields, generous but finite so that a typo cannot ask for a
// run that never ends or a step that never fits in memory.
const (
	maxSteps       = 1_000_000
	maxGroups      = 4096
	maxSamples     = 1024
	maxHidden      = 4096
	maxParallelism = 4096
	maxNameLen     = 64
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// fieldError is a validation error naming the field by its path.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

func bad(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func intIn(path string, v, lo, hi int) error {
	if v < lo || v > hi {
		return bad(path, "must be in [%d,%d], got %d", lo, hi, v)
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
	return []func() error{
		func() error {
			switch {
			case c.Name == "":
				return bad("name", "must not be empty")
			case len(c.Name) > maxNameLen:
				return bad("name", "at most %d characters, got %d", maxNameLen, len(c.Name))
			case !namePattern.MatchString(c.Name):
				return bad("name", "letters, digits, '.', '_' and '-' only, starting with a letter or digit, got %q", c.Name)
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
		func() error { return intIn("anchors.min", c.Anchors.Min, 0, c.Groups) },
		func() error { return intIn("anchors.capacity", c.Anchors.Capacity, 0, maxGroups) },
		func() error {
			if c.Debias.Method != debias.MethodPAVA && c.Debias.Method != debias.MethodBinned {
				return bad("debias.method", "must be %q or %q, got %q", debias.MethodPAVA, debias.MethodBinned, c.Debias.Method)
			}
			return nil
		},
		func() error { return intIn("debias.bins", c.Debias.Bins, 1, 1_000_000) },
		func() error { return intIn("debias.min_pairs", c.Debias.MinPairs, 0, math.MaxInt32) },
		func() error { return intIn("debias.window", c.Debias.Window, 0, math.MaxInt32) },
		func() error {
			if !finite(c.Denoise.HalfLife) || c.Denoise.HalfLife <= 0 {
				return bad("denoise.half_life", "must be a positive number of groups, got %v", c.Denoise.HalfLife)
			}
			return nil
		},
		func() error { return intIn("denoise.warmup", c.Denoise.Warmup, 1, math.MaxInt32) },
		func() error {
			if !finite(c.Denoise.RhoMax) || (c.Denoise.RhoMax != 0 && c.Denoise.RhoMax < 1) {
				return bad("denoise.rho_max", "must be 0 (no cap) or at least 1, got %v", c.Denoise.RhoMax)
			}
			return nil
		},
		func() error {
			if !finite(c.Advantage.Eps) || c.Advantage.Eps <= 0 || c.Advantage.Eps > 1 {
				return bad("advantage.eps", "must be in (0,1], got %v", c.Advantage.Eps)
			}
			return nil
		},
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
		func() error { return intIn("eval.every", c.Eval.Every, 0, maxSteps) },
		func() error { return intIn("eval.samples", c.Eval.Samples, 1, maxSamples) },
		func() error { return intIn("eval.tasks", c.Eval.Tasks, 0, 1000) },
		func() error { return intIn("continue_as_new_every", c.ContinueAsNewEvery, 1, 10_000) },
		func() error {
			switch c.Sandbox.Kind {
			case SandboxAuto, SandboxDocker, SandboxProcess:
				return nil
			}
			return bad("sandbox.kind", "must be %q, %q or %q, got %q", SandboxDocker, SandboxProcess, SandboxAuto, c.Sandbox.Kind)
		},
		func() error { return intIn("sandbox.memory_mb", c.Sandbox.MemoryMB, 32, 1<<20) },
		func() error {
			if !finite(c.Sandbox.DeadlineSeconds) || c.Sandbox.DeadlineSeconds <= 0 || c.Sandbox.DeadlineSeconds > 86400 {
				return bad("sandbox.deadline_seconds", "must be in (0,86400], got %v", c.Sandbox.DeadlineSeconds)
			}
			return nil
		},
		func() error {
			if !finite(c.Sandbox.CPUs) || c.Sandbox.CPUs <= 0 || c.Sandbox.CPUs > 1024 {
				return bad("sandbox.cpus", "must be in (0,1024], got %v", c.Sandbox.CPUs)
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
	}
}
