package runconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/sandbox"
)

// Config is a training run's configuration.
type Config struct {
	// Name labels the run (search attribute WmrlRunName).
	Name string `yaml:"name" json:"name"`
	// Mode is one of the seven training modes.
	Mode mode.Mode `yaml:"mode" json:"mode"`
	// Seed drives every random choice of the run: initial policy, samples,
	// anchor groups, task choice.
	Seed uint64 `yaml:"seed" json:"seed"`
	// SuiteSeed selects the built-in suite.
	SuiteSeed uint64 `yaml:"suite_seed" json:"suite_seed"`
	// Tasks picks the task source: "" or "builtin" (the built-in suite of
	// SuiteSeed) or "store" (the real tasks imported into the data
	// directory's task store, wmrl tasks import; sandbox.kind must be
	// python). Left out of the JSON when empty, so configurations written
	// before it existed keep their recorded form.
	Tasks string `yaml:"tasks" json:"tasks,omitempty"`
	// Steps is the number of training steps.
	Steps int `yaml:"steps" json:"steps"`
	// Groups is G, the number of groups (one task each) per step.
	Groups int `yaml:"groups" json:"groups"`
	// Samples is n, the number of trajectories per group.
	Samples int `yaml:"samples" json:"samples"`

	Anchors Anchors `yaml:"anchors" json:"anchors"`
	// Debias is the debiaser's own configuration, validated by it.
	Debias    debias.Config `yaml:"debias" json:"debias"`
	Denoise   Denoise       `yaml:"denoise" json:"denoise"`
	Advantage Advantage     `yaml:"advantage" json:"advantage"`
	Policy    Policy        `yaml:"policy" json:"policy"`
	// WorldModel picks the world model's backend. Its JSON is left out
	// when it is empty, so configurations written before it existed keep
	// their recorded form.
	WorldModel WorldModel `yaml:"world_model" json:"world_model,omitzero"`
	Eval       Eval       `yaml:"eval" json:"eval"`

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
	// FromGrader caps them also by what the grader says it can take
	// (a /grade service's GET /health capacity, in executions, divided by
	// the samples per group), asked at each step's start.
	FromGrader bool `yaml:"from_grader" json:"from_grader,omitempty"`
	// Active chooses the anchor groups with probabilities that grow with
	// the world model's uncertainty about them and weights their pairs
	// (internal/anchors.SelectActive). Off when not enabled; left out of
	// the JSON then, so configurations written before it encode as they did.
	Active ActiveAnchors `yaml:"active" json:"active,omitzero"`
	// Adaptive moves the fraction between a floor and a ceiling to hold ρ
	// at a target (internal/anchors.Adapt). Off when target_rho is 0; left
	// out of the JSON then.
	Adaptive AdaptiveAnchors `yaml:"adaptive" json:"adaptive,omitzero"`
}

// ActiveAnchors is the anchors.active section.
type ActiveAnchors struct {
	Enabled bool `yaml:"enabled" json:"enabled,omitempty"`
	// Mix is λ in (0,1]: the share of the anchors spread in proportion to
	// the uncertainty, the rest uniformly.
	Mix float64 `yaml:"mix" json:"mix,omitempty"`
	// Floor in [0,1] bounds each group's inclusion probability below by
	// floor times the uniform one (k/G), so no weight exceeds 1/floor.
	Floor float64 `yaml:"floor" json:"floor,omitempty"`
}

// AdaptiveAnchors is the anchors.adaptive section.
type AdaptiveAnchors struct {
	// TargetRho is the ρ to hold (at least 1); 0 turns the controller off.
	TargetRho float64 `yaml:"target_rho" json:"target_rho,omitempty"`
	// Floor and Ceiling bound the fraction the controller sets.
	Floor   float64 `yaml:"floor" json:"floor,omitempty"`
	Ceiling float64 `yaml:"ceiling" json:"ceiling,omitempty"`
	// Gain is the change of the fraction per unit of ρ above the target.
	Gain float64 `yaml:"gain" json:"gain,omitempty"`
}

// Enabled reports whether the controller is on.
func (a AdaptiveAnchors) Enabled() bool { return a.TargetRho != 0 }

// Controller returns the controller's settings.
func (a AdaptiveAnchors) Controller() anchors.Adaptive {
	return anchors.Adaptive{TargetRho: a.TargetRho, Floor: a.Floor, Ceiling: a.Ceiling, Gain: a.Gain}
}

// Selection returns the active selection's settings.
func (a ActiveAnchors) Selection() anchors.Active {
	return anchors.Active{Mix: a.Mix, Floor: a.Floor}
}

// Denoise configures Inverse-Variance Denoising: the fields of
// denoise.Config that a run sets, under the names runs have always used
// (denoise.Config's JSON says warm_up, in other workflow inputs), and
// validated by denoise.Config.Validate (see DenoiseConfig).
type Denoise struct {
	HalfLife float64 `yaml:"half_life" json:"half_life"`
	Warmup   int     `yaml:"warmup" json:"warmup"`
	RhoMax   float64 `yaml:"rho_max" json:"rho_max"`
	// Eta2Floor is the smallest η̂²_cal ρ divides by (denoise.Config);
	// omitted from the JSON when 0 (no floor), so the configurations of runs
	// made before it existed encode as they did.
	Eta2Floor float64 `yaml:"eta2_floor" json:"eta2_floor,omitempty"`
	// SignalWindow is the number of recent anchor groups the no-harm
	// signal gate tests (denoise.Config); omitted from the JSON when 0 (no
	// gate), so the configurations of runs made before it existed encode
	// as they did and keep their behaviour.
	SignalWindow int `yaml:"signal_window" json:"signal_window,omitempty"`
}

// Advantage configures the GRPO advantages: the fields of advantage.Config
// that a run sets (its MinGraded is always 2), validated by
// advantage.Config.Validate (see AdvantageConfig).
type Advantage struct {
	Standardize bool    `yaml:"standardize" json:"standardize"`
	Eps         float64 `yaml:"eps" json:"eps"`
}

// Policy configures the built-in policy and its optimiser.
type Policy struct {
	// Backend names the policy's backend (package backend's adapters):
	// "" or "builtin" (the CPU policy), or "tinker" (a model trained
	// through the Tinker training API; the worker's TINKER_BASE_URL).
	Backend      string  `yaml:"backend" json:"backend,omitempty"`
	LearningRate float64 `yaml:"learning_rate" json:"learning_rate"`
	KLCoef       float64 `yaml:"kl_coef" json:"kl_coef"`
	Hidden       int     `yaml:"hidden" json:"hidden"`
	// Tinker configures a policy trained through the Tinker training API
	// (policy.backend: tinker): which model, its adapter, the loss, Adam
	// and sampling. Where the service is and its key are the worker's
	// (TINKER_BASE_URL, TINKER_API_KEY), never the run's. Zero values
	// take the adapter's defaults.
	Tinker Tinker `yaml:"tinker" json:"tinker,omitzero"`
}

// Tinker is the policy.tinker section.
type Tinker struct {
	BaseModel   string  `yaml:"base_model" json:"base_model,omitempty"`
	LoRARank    int     `yaml:"lora_rank" json:"lora_rank,omitempty"`
	Loss        string  `yaml:"loss" json:"loss,omitempty"`
	Beta1       float64 `yaml:"beta1" json:"beta1,omitempty"`
	Beta2       float64 `yaml:"beta2" json:"beta2,omitempty"`
	Eps         float64 `yaml:"eps" json:"eps,omitempty"`
	MaxTokens   int     `yaml:"max_tokens" json:"max_tokens,omitempty"`
	Temperature float64 `yaml:"temperature" json:"temperature,omitempty"`
}

// validate checks the section's values; zeros mean the defaults.
func (t Tinker) validate() error {
	switch {
	case t.LoRARank < 0 || t.LoRARank > 1024:
		return bad("policy.tinker.lora_rank", "must be in [1,1024] (0: the default), got %d", t.LoRARank)
	case t.Loss != "" && t.Loss != "importance_sampling" && t.Loss != "ppo":
		return bad("policy.tinker.loss", "must be \"importance_sampling\" or \"ppo\", got %q", t.Loss)
	case !finite(t.Beta1) || t.Beta1 < 0 || t.Beta1 >= 1:
		return bad("policy.tinker.beta1", "must be in [0,1), got %v", t.Beta1)
	case !finite(t.Beta2) || t.Beta2 < 0 || t.Beta2 >= 1:
		return bad("policy.tinker.beta2", "must be in [0,1), got %v", t.Beta2)
	case !finite(t.Eps) || t.Eps < 0 || t.Eps > 1:
		return bad("policy.tinker.eps", "must be in [0,1], got %v", t.Eps)
	case t.MaxTokens < 0 || t.MaxTokens > 1<<20:
		return bad("policy.tinker.max_tokens", "must be in [1,1048576] (0: the default), got %d", t.MaxTokens)
	case !finite(t.Temperature) || t.Temperature < 0 || t.Temperature > 10:
		return bad("policy.tinker.temperature", "must be in [0,10] (0: the default), got %v", t.Temperature)
	}
	return nil
}

// WorldModel configures the world model.
type WorldModel struct {
	// Backend names the world model's backend: "" or "builtin" (the
	// frozen built-in model, or the artefact the worker was given with
	// --world-model), "openai" (an LLM over OpenAI-compatible chat
	// completions) or "grade-http" (a /grade server), or "simulated" (a
	// world model of controlled quality, for studying the method). Where
	// the remote ones are is the worker's configuration, not the run's.
	Backend string `yaml:"backend" json:"backend,omitempty"`
	// Simulated sets the simulated world model's quality
	// (world_model.backend: simulated).
	Simulated Simulated `yaml:"simulated" json:"simulated,omitzero"`
	// Refresh retrains the world model on the run's own anchor executions
	// as the run goes (off when Every is 0). Left out of the JSON when off,
	// so configurations written before it keep their recorded form.
	Refresh Refresh `yaml:"refresh" json:"refresh,omitzero"`
}

// Refresh configures the on-policy world model: every Every steps, once the
// run has at least MinPairs anchor pairs, the world model is retrained on
// its original training data plus the run's anchor executions so far, and
// the steps after it are scored by the new version (docs/design.md,
// "On-policy world model"). Every 0 means never: the frozen model.
type Refresh struct {
	Every    int `yaml:"every" json:"every,omitempty"`
	MinPairs int `yaml:"min_pairs" json:"min_pairs,omitempty"`
}

// On reports whether the world model is refreshed.
func (r Refresh) On() bool { return r.Every > 0 }

// validate checks the section against the run's mode and world-model
// backend.
func (r Refresh) validate(m mode.Mode, wmBackend string) error {
	if err := intIn("world_model.refresh.every", r.Every, 0, maxSteps); err != nil {
		return err
	}
	if err := intIn("world_model.refresh.min_pairs", r.MinPairs, 0, maxRefreshPairs); err != nil {
		return err
	}
	if !r.On() {
		if r.MinPairs != 0 {
			return bad("world_model.refresh.min_pairs", "is set (%d) but world_model.refresh.every is 0 (off)", r.MinPairs)
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

// Simulated is the world_model.simulated section: the simulated world
// model scores a program r_env + bias + noise·z, clamped to [0,1], z a
// standard normal fixed by the run seed and the trajectory.
type Simulated struct {
	Noise float64 `yaml:"noise" json:"noise,omitempty"`
	Bias  float64 `yaml:"bias" json:"bias,omitempty"`
}

// PolicyBackends lists the valid values of policy.backend ("" means
// backend.Builtin).
func PolicyBackends() []string { return []string{backend.Builtin, backend.Tinker} }

// WorldModelBackends lists the valid values of world_model.backend ("" means
// backend.Builtin).
func WorldModelBackends() []string {
	return []string{backend.Builtin, backend.OpenAI, backend.GradeHTTP, backend.Simulated}
}

// TaskSources lists the valid values of tasks ("" means backend.Builtin).
func TaskSources() []string { return []string{backend.Builtin, backend.TaskStore} }

// SandboxKinds lists the valid values of sandbox.kind: the worker's own
// sandboxes, and remote graders.
func SandboxKinds() []string {
	return []string{SandboxAuto, SandboxDocker, SandboxProcess, SandboxGradeHTTP, SandboxPython}
}

// checkBackend checks a backend name field against its valid values.
func checkBackend(path, name string, valid []string) error {
	if name == "" || slices.Contains(valid, name) {
		return nil
	}
	return bad(path, "must be one of %q (empty means %q), got %q", valid, backend.Builtin, name)
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
	// SandboxGradeHTTP is a remote grader over /health + /grade.
	SandboxGradeHTTP = backend.GradeHTTP
	// SandboxPython runs Python solutions of real tasks (internal/tasks)
	// in the Python sandbox.
	SandboxPython = backend.Python
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
func (c Config) DebiasConfig() debias.Config { return c.Debias }

// DenoiseConfig returns the denoiser's configuration.
func (c Config) DenoiseConfig() denoise.Config { return c.Denoise.config() }

func (d Denoise) config() denoise.Config {
	return denoise.Config{HalfLife: d.HalfLife, WarmUp: d.Warmup, RhoMax: d.RhoMax, Eta2Floor: d.Eta2Floor,
		SignalWindow: d.SignalWindow}
}

// AdvantageConfig returns the advantage configuration (at least 2 graded
// trajectories per group).
func (c Config) AdvantageConfig() advantage.Config { return c.Advantage.config() }

func (a Advantage) config() advantage.Config {
	return advantage.Config{Standardize: a.Standardize, Eps: a.Eps, MinGraded: 2}
}

// FreeCapacity is the capacity argument of anchors.Select: -1 (no cap)
// when Anchors.Capacity is 0.
func (c Config) FreeCapacity() int {
	if c.Anchors.Capacity == 0 {
		return -1
	}
	return c.Anchors.Capacity
}

// MaxBytes bounds a YAML configuration: a real one has a few hundred bytes.
const MaxBytes = 1 << 20

// Parse reads a YAML configuration over base: fields the document omits keep
// base's values. Unknown fields are rejected. The result is validated, and
// the error reports every invalid field (see Load).
func Parse(base Config, data []byte) (Config, error) {
	cfg, err := Load(base, data, Overrides{})
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Overrides are fields set after the document (by command-line flags); nil
// leaves the field as the document set it.
type Overrides struct {
	Name *string
	Seed *uint64
}

// Load reads a YAML configuration over base as Decode does (no document
// when data is nil), applies the overrides and validates the result. A
// configuration with invalid fields is an *Invalid error naming every one,
// with its line in the document when the document set it.
func Load(base Config, data []byte, o Overrides) (Config, error) {
	cfg := base
	var doc *document
	var problems []error
	if data != nil {
		var err error
		cfg, doc, err = decode(base, data)
		var inv *Invalid
		switch {
		case errors.As(err, &inv):
			problems = inv.Problems
		case err != nil:
			return cfg, err
		}
	}
	overridden := map[string]bool{}
	if o.Name != nil {
		cfg.Name, overridden["name"] = *o.Name, true
	}
	if o.Seed != nil {
		cfg.Seed, overridden["seed"] = *o.Seed, true
	}
	for _, p := range cfg.Problems() {
		var fe *fieldError
		if doc != nil && errors.As(p, &fe) && !overridden[fe.path] {
			if line, ok := doc.lines[fe.path]; ok {
				p = bad(fe.path, "line %d: %s", line, fe.msg)
			}
		}
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return cfg, &Invalid{Problems: problems}
	}
	return cfg, nil
}

// Invalid is a configuration with invalid fields: every problem, those of
// the document first (in its order), then those of the values (in
// Validate's order).
type Invalid struct {
	Problems []error
}

func (e *Invalid) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "; ")
}

// Decode reads a YAML configuration over base as Parse does, strictly, but
// does not validate the result, so that a caller can change fields (a name
// or seed from flags) and then report every problem at once (Problems, or
// Load). A field the document cannot set (an unknown field, a value of the
// wrong type, an unknown mode) does not stop the others: they are all
// reported in an *Invalid error, each with its path and line, and the
// configuration has every other field of the document.
func Decode(base Config, data []byte) (Config, error) {
	cfg, _, err := decode(base, data)
	return cfg, err
}

// document is where a configuration document sets its fields: the line of
// each field path ("anchors.fraction"), and the path of the value at each
// line.
type document struct {
	lines  map[string]int
	byLine map[int]string
}

func decode(base Config, data []byte) (Config, *document, error) {
	if len(data) > MaxBytes {
		return base, nil, fmt.Errorf("config: larger than %d bytes", MaxBytes)
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return base, nil, errors.New("config: empty document")
		}
		return base, nil, fmt.Errorf("config: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return base, nil, errors.New("config: more than one YAML document")
	}
	doc := &document{lines: map[string]int{}, byLine: map[int]string{}}
	var problems []error
	if len(root.Content) == 1 && root.Content[0].Kind == yaml.MappingNode {
		problems = doc.walk(root.Content[0], reflect.TypeOf(Config{}), "")
		problems = append(problems, checkMode(root.Content[0], base.Mode)...)
	}
	cfg := base
	if err := root.Decode(&cfg); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return base, nil, fmt.Errorf("config: %w", err)
		}
		for _, msg := range te.Errors {
			problems = append(problems, doc.typeError(msg))
		}
	}
	if len(problems) > 0 {
		sort.SliceStable(problems, func(i, j int) bool { return lineOf(problems[i]) < lineOf(problems[j]) })
		return cfg, doc, &Invalid{Problems: problems}
	}
	return cfg, doc, nil
}

// walk records the lines of the fields of a mapping decoded into t and
// reports the keys t does not have (the decoder, not strict, skips them).
// It follows aliases; its depth is that of Config's sections, so a cyclic
// alias cannot loop.
//
// It also checks every number as written (checkNumber) and takes a field
// whose number is refused out of the mapping, so that the decoder neither
// reads it its own way (2.9 as 2, 0x10 as 16) nor reports it again: the
// field keeps base's value and the problem names it.
func (d *document) walk(m *yaml.Node, t reflect.Type, prefix string) []error {
	var problems []error
	kept := m.Content[:0:0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		path := prefix + k.Value
		f, ok := yamlField(t, k.Value)
		if !ok {
			problems = append(problems, bad(path, "line %d: field %s not found", k.Line, k.Value))
			kept = append(kept, k, v)
			continue
		}
		d.lines[path] = k.Line
		// A deeper field's value is the one the decoder's message at a
		// line is about ("sandbox:\n  memory_mb: x" has both at line 2).
		if at, dup := d.byLine[v.Line]; !dup || strings.HasPrefix(path, at+".") {
			d.byLine[v.Line] = path
		}
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind == yaml.ScalarNode {
			if err := checkNumber(v, f.Type); err != nil {
				problems = append(problems, bad(path, "line %d: %v", v.Line, err))
				continue
			}
		}
		kept = append(kept, m.Content[i], m.Content[i+1])
		if v.Kind == yaml.MappingNode && f.Type.Kind() == reflect.Struct {
			problems = append(problems, d.walk(v, f.Type, path+".")...)
		}
	}
	m.Content = kept
	return problems
}

var (
	// decimalInt is an integer as a configuration writes it: decimal
	// digits, no leading zero (which the YAML decoder reads as octal).
	decimalInt = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)
	// decimalFloat is a number in decimal notation, with an optional
	// fraction and exponent.
	decimalFloat = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
	// leadingZero is an integer the YAML decoder reads as octal (010 is 8).
	leadingZero = regexp.MustCompile(`^[-+]?0[0-9_]+$`)
)

// checkNumber checks a scalar that sets a field of type t when t is a
// number: an integer must be written in decimal digits and be in the range
// of t (600.7, 1e30, 0x10, 0b11, 010 and 2^64 for a uint64 are refused,
// where the YAML decoder would truncate, wrap or convert them), and a float
// in decimal notation and finite. A null leaves the field to the decoder
// (its zero value), as does a type that is not a number.
func checkNumber(v *yaml.Node, t reflect.Type) error {
	if v.ShortTag() == "!!null" {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(reflect.TypeFor[yaml.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	s := v.Value
	// A string (quoted, or a block) is shown quoted, as is a plain
	// scalar that needs escapes to fit in one line.
	str := v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	written := s
	if q := strconv.Quote(s); str || q[1:len(q)-1] != s {
		written = q
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if err := checkIntForm(str, written, s); err != nil {
			return err
		}
		if _, err := strconv.ParseInt(s, 10, t.Bits()); err != nil {
			lo, hi := -int64(1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1
			return fmt.Errorf("%s is out of range [%d,%d]", written, lo, hi)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if err := checkIntForm(str, written, s); err != nil {
			return err
		}
		if _, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, t.Bits()); err != nil && s != "-0" {
			return fmt.Errorf("%s is out of range [0,%d]", written, uint64(1)<<(t.Bits()-1)<<1-1)
		}
	case reflect.Float32, reflect.Float64:
		switch {
		case str:
			return fmt.Errorf("%s is a string, not a number", written)
		case isNonFinite(s):
			return fmt.Errorf("%s is not a finite number", written)
		case leadingZero.MatchString(s):
			return fmt.Errorf("%s is not a decimal number (a leading 0 reads as octal)", written)
		case decimalFloat.MatchString(s):
		case nonDecimalInt(s) || parsesAsFloat(s):
			return fmt.Errorf("%s is not a decimal number", written)
		default:
			return fmt.Errorf("%s is not a number", written)
		}
		if f, err := strconv.ParseFloat(s, t.Bits()); err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("%s is out of range for a %d-bit float", written, t.Bits())
		}
	}
	return nil
}

// checkIntForm checks that s, shown as written (str: a string), is an
// integer in decimal digits.
func checkIntForm(str bool, written, s string) error {
	switch {
	case str:
		return fmt.Errorf("%s is a string, not an integer", written)
	case decimalInt.MatchString(s):
		return nil
	case leadingZero.MatchString(s):
		return fmt.Errorf("%s is not a decimal integer (a leading 0 reads as octal)", written)
	case nonDecimalInt(s):
		return fmt.Errorf("%s is not a decimal integer", written)
	}
	return fmt.Errorf("%s is not an integer", written)
}

// nonDecimalInt reports whether s is an integer in another base or with
// digit separators, as Go and YAML write them (0x10, 0o17, 0b11, 1_000).
func nonDecimalInt(s string) bool {
	_, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
	if err != nil {
		_, err = strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 0, 64)
	}
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// parsesAsFloat reports whether s is a number in a notation Go reads but a
// configuration does not write (0x1p-2, Inf).
func parsesAsFloat(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// isNonFinite reports whether s is one of YAML's infinities or NaN.
func isNonFinite(s string) bool {
	switch strings.TrimLeft(strings.ToLower(s), "+-") {
	case ".inf", ".nan":
		return true
	}
	return false
}

// yamlField is the field of struct type t with the YAML key name.
func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// typeError names the field of one of the YAML decoder's messages
// ("line 3: cannot unmarshal !!str `ten` into int").
func (d *document) typeError(msg string) error {
	msg = strings.ReplaceAll(msg, "\n", `\n`) // the decoder quotes values as they are
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err == nil {
		if path, ok := d.byLine[line]; ok {
			return bad(path, "%s", msg)
		}
	}
	return fmt.Errorf("config: %s", msg)
}

// lineOf is the line a problem names, or 0.
func lineOf(err error) int {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "line "); ok {
		var line int
		if _, err := fmt.Sscanf(rest, "%d", &line); err == nil {
			return line
		}
	}
	return 0
}

// checkMode reports an invalid top-level mode with its field path and line
// and puts base's mode in its place, so that the YAML decoder (which would
// stop at mode.Mode's error, without path or line) decodes the rest.
func checkMode(top *yaml.Node, base mode.Mode) []error {
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "mode" || v.Kind != yaml.ScalarNode {
			continue
		}
		if _, err := mode.Parse(v.Value); err != nil {
			v.Value, v.Tag, v.Style = string(base), "!!str", 0
			return []error{bad("mode", "line %d: %v", v.Line, err)}
		}
	}
	return nil
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
		field, msg, _ := strings.Cut(err.Error(), ": ")
		return bad("anchors.active."+field, "%s", msg)
	}
	return nil
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
		field, msg, _ := strings.Cut(err.Error(), ": ")
		return bad("anchors.adaptive."+field, "%s", msg)
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
		})...)
	checks = append(checks, section("advantage.", c.Advantage, Default().Advantage, func(a Advantage) error { return a.config().Validate() },
		[]field[Advantage]{
			{"standardize", func(d *Advantage, s Advantage) { d.Standardize = s.Standardize }, nil},
			{"eps", func(d *Advantage, s Advantage) { d.Eps = s.Eps }, func(s Advantage) float64 { return s.Eps }},
		})...)
	return append(checks, []func() error{
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
		func() error { return checkBackend("policy.backend", c.Policy.Backend, PolicyBackends()) },
		c.Policy.Tinker.validate,
		func() error {
			s := c.WorldModel.Simulated
			if s == (Simulated{}) {
				return nil
			}
			if c.WorldModel.Backend != backend.Simulated {
				return bad("world_model.simulated", "is set but world_model.backend is %q, not %q", c.WorldModel.Backend, backend.Simulated)
			}
			switch {
			case !finite(s.Noise) || s.Noise < 0 || s.Noise > 1:
				return bad("world_model.simulated.noise", "must be in [0,1], got %v", s.Noise)
			case !finite(s.Bias) || s.Bias < -1 || s.Bias > 1:
				return bad("world_model.simulated.bias", "must be in [-1,1], got %v", s.Bias)
			}
			return nil
		},
		func() error { return checkBackend("world_model.backend", c.WorldModel.Backend, WorldModelBackends()) },
		func() error { return c.WorldModel.Refresh.validate(c.Mode, c.WorldModel.Backend) },
		func() error {
			if err := checkBackend("tasks", c.Tasks, TaskSources()); err != nil {
				return err
			}
			if c.Tasks == backend.TaskStore && c.Sandbox.Kind != SandboxPython {
				return bad("tasks", "%q needs sandbox.kind %q (the store's tasks are graded in the Python sandbox), got sandbox.kind %q",
					c.Tasks, SandboxPython, c.Sandbox.Kind)
			}
			return nil
		},
		func() error { return intIn("eval.every", c.Eval.Every, 0, maxSteps) },
		func() error { return intIn("eval.samples", c.Eval.Samples, 1, maxSamples) },
		func() error { return intIn("eval.tasks", c.Eval.Tasks, 0, 1000) },
		func() error { return intIn("continue_as_new_every", c.ContinueAsNewEvery, 1, 10_000) },
		func() error {
			if slices.Contains(SandboxKinds(), c.Sandbox.Kind) {
				return nil
			}
			return bad("sandbox.kind", "must be one of %q, got %q", SandboxKinds(), c.Sandbox.Kind)
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
// reports the first invalid field as "name: message"). Each check copies
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
				if _, rest, ok := strings.Cut(msg, ": "); ok {
					msg = rest
				}
				return bad(path, "%s", msg)
			}
			return nil
		}
	}
	return checks
}
