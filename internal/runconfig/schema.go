package runconfig

import (
	"math"
	"time"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
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
	// Trajectory sets the turns of a trajectory (docs/design.md,
	// "Multi-turn trajectories"). Its zero value is one turn, the
	// single-shot step; left out of the JSON then, so configurations
	// written before it existed keep their recorded form.
	Trajectory Trajectory `yaml:"trajectory" json:"trajectory,omitzero"`
	// Pipeline bounds how far off-policy a step's rollouts may be
	// (docs/design.md, "Asynchronous pipeline"). Its zero value
	// is today's strictly sequential step; left out of the JSON then, so
	// configurations written before it existed keep their recorded form.
	Pipeline Pipeline `yaml:"pipeline" json:"pipeline,omitzero"`

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
	// Selective leaves out of the update the world-model groups whose
	// uncertainty is above ratio times the run's residual
	// (internal/anchors.Selective). Off when not enabled; left out of the
	// JSON then.
	Selective SelectiveScoring `yaml:"selective" json:"selective,omitzero"`
}

// SelectiveScoring is the anchors.selective section.
type SelectiveScoring struct {
	Enabled bool `yaml:"enabled" json:"enabled,omitempty"`
	// Ratio κ ≥ 1: a world-model group whose task's uncertainty is above
	// κ·σ0 (σ0 the run's root-mean-square residual) is left out.
	Ratio float64 `yaml:"ratio" json:"ratio,omitempty"`
}

// Rule returns selective scoring's settings.
func (s SelectiveScoring) Rule() anchors.Selective { return anchors.Selective{Ratio: s.Ratio} }

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
	// WMShareMax caps the world model's share of a step's fusion weight
	// (denoise.Config); omitted from the JSON when 0 (no cap).
	WMShareMax float64 `yaml:"wm_share_max" json:"wm_share_max,omitempty"`
	// Estimator is how the update combines the anchor and world-model
	// streams (denoise.Config): "" or "fused" (the paper's weights) or
	// "difference" (the no-harm difference estimator, the default where it
	// applies: Config.DenoiseConfig); omitted from the JSON when "", so
	// earlier runs' configurations encode as they did.
	Estimator string `yaml:"estimator" json:"estimator,omitempty"`
	// Memory scores a program the run already executed on the same task
	// at an earlier step by that real score instead of the world model's
	// (denoise.Config; on by default where it applies:
	// Config.DenoiseConfig); omitted from the JSON when false, so earlier
	// runs' configurations encode as they did.
	Memory bool `yaml:"memory" json:"memory,omitempty"`
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
	// Any well-formed name is valid here: the workers' registrations
	// (worker/registry.go) say which exist.
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

// WorldModel configures the world model.
type WorldModel struct {
	// Backend names the world model's backend: "" or "builtin" (the
	// frozen built-in model, or the artefact the worker was given with
	// --world-model), "openai" (an LLM over OpenAI-compatible chat
	// completions) or "grade-http" (a /grade server), or "simulated" (a
	// world model of controlled quality, for studying the method). Where
	// the remote ones are is the worker's configuration, not the run's.
	// Any well-formed name is valid here: the workers' registrations say
	// which exist.
	Backend string `yaml:"backend" json:"backend,omitempty"`
	// Features picks the built-in world model's feature set: "" or "v1"
	// (the stored model, default.json) or "v2" (FeaturesV2: each family's
	// hyperparameters against the task's card; the stored v2 model,
	// default-v2.json). Left out of the JSON when empty, so configurations
	// written before it keep their recorded form.
	Features string `yaml:"features" json:"features,omitempty"`
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
//
// HalfLife, in steps, weights the run's examples toward the current policy:
// in the refresh after step s an anchor execution of step t weighs
// 0.5^((s − t)/HalfLife) relative to the others (Weight), and the run's
// weights are scaled to sum to its number of executions, so the run counts
// against the base data as much as without weights; 0 (the default) weighs
// every one as a base example.
type Refresh struct {
	Every    int     `yaml:"every" json:"every,omitempty"`
	MinPairs int     `yaml:"min_pairs" json:"min_pairs,omitempty"`
	HalfLife float64 `yaml:"half_life" json:"half_life,omitempty"`
}

// Weight is the relative weight of a run's anchor execution of step in the
// refresh after refreshStep: 0.5^((refreshStep − step)/HalfLife), 1 for the
// newest step and for every step when HalfLife is 0. A weight too small to represent is the smallest
// positive float64, so that an old execution never weighs 0.
func (r Refresh) Weight(step, refreshStep int) float64 {
	if r.HalfLife == 0 || step >= refreshStep {
		return 1
	}
	return math.Max(math.Pow(0.5, float64(refreshStep-step)/r.HalfLife), math.SmallestNonzeroFloat64)
}

// Feature sets of the built-in world model (WorldModel.Features).
const (
	FeaturesV1 = "v1"
	FeaturesV2 = "v2"
)

// FeaturesV2On reports whether the run's built-in world model reads the v2
// feature set.
func (w WorldModel) FeaturesV2On() bool { return w.Features == FeaturesV2 }

// On reports whether the world model is refreshed.
func (r Refresh) On() bool { return r.Every > 0 }

// Simulated is the world_model.simulated section: the simulated world
// model scores a program r_env + bias + noise·z, clamped to [0,1], z a
// standard normal fixed by the run seed and the trajectory.
type Simulated struct {
	Noise float64 `yaml:"noise" json:"noise,omitempty"`
	Bias  float64 `yaml:"bias" json:"bias,omitempty"`
}

// Trajectory is the trajectory section: K turns, each an action of the
// policy answered by the group's environment with an observation. Zero
// values are the defaults (TurnCount, Reduction and ObservationCap give them).
type Trajectory struct {
	// Turns is K, the number of turns; 0 means DefaultTurns (1).
	Turns int `yaml:"turns" json:"turns,omitempty"`
	// Reward is how the turns' rewards become the trajectory's:
	// RewardMax (the default, "") or RewardLast.
	Reward string `yaml:"reward" json:"reward,omitempty"`
	// ObservationTokens caps an observation's feedback text, in tokens
	// of the policy's tokenizer; 0 means DefaultObservationTokens.
	ObservationTokens int `yaml:"observation_tokens" json:"observation_tokens,omitempty"`
}

// The trajectory section's defaults and its reward reductions.
const (
	DefaultTurns             = 1
	DefaultObservationTokens = 1200
	// RewardMax is the maximum over the answered turns (the reference's);
	// RewardLast the last answered turn's: turns.Reduce's names (a test
	// holds them equal; the workflows' dependencies stay without turns').
	RewardMax  = "max"
	RewardLast = "last"
)

// TurnCount is K (trajectory.turns, or its default).
func (t Trajectory) TurnCount() int {
	if t.Turns == 0 {
		return DefaultTurns
	}
	return t.Turns
}

// Reduction is the reduction of the turns' rewards (trajectory.reward, or
// its default).
func (t Trajectory) Reduction() string {
	if t.Reward == "" {
		return RewardMax
	}
	return t.Reward
}

// ObservationCap is the observation's cap in tokens
// (trajectory.observation_tokens, or its default).
func (t Trajectory) ObservationCap() int {
	if t.ObservationTokens == 0 {
		return DefaultObservationTokens
	}
	return t.ObservationTokens
}

// MultiTurn reports whether a trajectory has more than one turn.
func (t Trajectory) MultiTurn() bool { return t.TurnCount() > 1 }

// Pipeline is the pipeline section: the update of step t trains on
// rollouts sampled from checkpoint max(0, t−MaxOffPolicy), corrected by a
// clipped importance ratio. Zero values are the defaults (OffPolicy and
// ClipRange give them).
type Pipeline struct {
	// MaxOffPolicy is d, in [0, MaxOffPolicy]: how many updates older
	// than the one it trains a step's sampling checkpoint may be. 0 is
	// the sequential step.
	MaxOffPolicy int `yaml:"max_off_policy" json:"max_off_policy,omitempty"`
	// Clip is ε of the clipped importance ratio (PPO's): a token's ratio
	// π_θ/π_sample counts only inside [1−ε, 1+ε] on the side its
	// advantage pushes; 0 means DefaultClip.
	Clip float64 `yaml:"clip" json:"clip,omitempty"`
}

// The pipeline section's bound and default.
const (
	// MaxOffPolicy bounds pipeline.max_off_policy: at most d+1 steps are
	// in flight, and the importance ratio of a policy further off than a
	// few updates is mostly clipped.
	MaxOffPolicy = 4
	// DefaultClip is pipeline.clip's default, PPO's ε.
	DefaultClip = 0.2
)

// OffPolicy is d (pipeline.max_off_policy).
func (p Pipeline) OffPolicy() int { return p.MaxOffPolicy }

// ClipRange is ε (pipeline.clip, or its default).
func (p Pipeline) ClipRange() float64 {
	if p.Clip == 0 {
		return DefaultClip
	}
	return p.Clip
}

// SamplingCheckpoint is the checkpoint the rollouts of step t are sampled
// from: max(0, t−d).
func (p Pipeline) SamplingCheckpoint(t int) int { return max(0, t-p.MaxOffPolicy) }

// Eval configures the held-out evaluation (avg@Samples by real execution).
type Eval struct {
	// Every E steps, and always after the last step; 0 means only at the end.
	Every int `yaml:"every" json:"every"`
	// Samples per held-out task (8 for avg@8).
	Samples int `yaml:"samples" json:"samples"`
	// Tasks limits the evaluation to the first Tasks held-out tasks; 0
	// means all of them.
	Tasks int `yaml:"tasks" json:"tasks"`
	// BestOf N (above 1) evaluates a single-shot policy best-of-N: each
	// held-out sample is N independent attempts, really executed, and
	// scores the best (docs/design.md, "Held-out evaluation over turns").
	// 0 or 1 is off. A multi-turn run (trajectory.turns > 1) is evaluated
	// over its K turns instead, and refuses it.
	BestOf int `yaml:"best_of" json:"best_of,omitempty"`
}

// EvalAttempts is the number of executions of one held-out sample: the
// trajectory's turns of a multi-turn run, eval.best_of of a single-shot
// one, else 1.
func (c Config) EvalAttempts() int { return max(1, c.Trajectory.TurnCount(), c.Eval.BestOf) }

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
func (s Sandbox) Limits() backend.Limits {
	l := backend.DefaultLimits()
	l.MemoryBytes = int64(s.MemoryMB) << 20
	l.CPUs = s.CPUs
	l.Deadline = time.Duration(s.DeadlineSeconds * float64(time.Second))
	return l
}

// DebiasConfig returns the debiaser's configuration.
func (c Config) DebiasConfig() debias.Config { return c.Debias }

// DenoiseConfig returns the denoiser's configuration as the run reads it.
// The difference estimator and execution memory are the defaults
// (Default), but they apply only where the method has what they need
// (docs/design.md, "The default update"): only modes that fuse the two
// streams read either; memory keys a real score by task and program, so
// it is off in a mode that executes everything and with multi-turn
// trajectories; and the difference estimator reads λ from the signal gate
// and sets the world model's share itself, so without the gate
// (signal_window 0) or with a share cap (wm_share_max) the update uses the
// paper's fused weights (Denoise.config). A document that sets either
// where it does not apply is refused by Load (checkDenoiseSet).
func (c Config) DenoiseConfig() denoise.Config {
	d := c.Denoise.config()
	if c.Mode.Validate() != nil || !c.Mode.Pieces().Denoise {
		d.Estimator, d.Memory = "", false
	}
	if d.Memory && (c.Mode.Pieces().ExecuteAll || c.Trajectory.Turns > 1) {
		d.Memory = false
	}
	return d
}

func (d Denoise) config() denoise.Config {
	est := d.Estimator
	if est == denoise.EstimatorDifference && (d.SignalWindow == 0 || d.WMShareMax != 0) {
		est = denoise.EstimatorFused
	}
	return denoise.Config{HalfLife: d.HalfLife, WarmUp: d.Warmup, RhoMax: d.RhoMax, Eta2Floor: d.Eta2Floor,
		SignalWindow: d.SignalWindow, WMShareMax: d.WMShareMax, Estimator: est, Memory: d.Memory}
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
