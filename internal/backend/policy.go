package backend

import "context"

// Checkpoint is one version of a run's policy, as the activities record it
// in Postgres.
type Checkpoint struct {
	// Version is the number of updates applied since Init.
	Version int
	// Hash is the checkpoint's content hash: the adapter computes it, and
	// refuses (with a *PermanentError) a checkpoint whose content no longer
	// matches the hash recorded for it.
	Hash string
	// Location is where the adapter keeps it: a file (built-in), a sampler
	// path of a remote training service.
	Location string
	// State is where a remote training service keeps the training state
	// the checkpoint continues from (its training weights with the
	// optimiser state: a Tinker save_weights path); empty when Location
	// holds it (the built-in checkpoint file) or it was not saved.
	State string
}

// PolicySettings are the run's policy settings (the run config's policy
// section). An adapter ignores the ones it has no use for.
type PolicySettings struct {
	LearningRate float64
	KLCoef       float64
	// Hidden is the built-in policy's hidden width.
	Hidden int
	// Model are a language-model policy's settings (the run config's
	// policy.tinker); zero values take the adapter's defaults.
	Model ModelSettings
	// Turns is the run's trajectory.turns: above 1, the built-in policy's
	// input has room for its previous attempt (Previous); 0 or 1 is the
	// single-shot policy, as before.
	Turns int
}

// Previous is a turn's previous attempt as the policy sees it at turn t > 1
// (docs/design.md, "Multi-turn trajectories"): its action and the status
// and score bucket of the answer it got (turns.Render's).
type Previous struct {
	Text   string
	Status string
	// Graded is false when the answer held no score; Bucket is then 0.
	Graded bool
	Bucket int
}

// ModelSettings are the settings of a language model trained through a
// remote training service.
type ModelSettings struct {
	BaseModel string
	LoRARank  int
	// Loss is the service's loss function ("importance_sampling", "ppo").
	Loss string
	// Beta1, Beta2 and Eps are Adam's.
	Beta1, Beta2, Eps float64
	// MaxTokens bounds a completion; Temperature is the sampling's.
	MaxTokens   int
	Temperature float64
}

// InitRequest asks for checkpoint 0 of a run.
type InitRequest struct {
	Run string
	// Suite is the run's suite: the built-in policy sizes its input to
	// the suite's task features.
	Suite    uint64
	Seed     uint64 // the initial policy's seed (plan.InitSeed)
	Settings PolicySettings
	// Dir is the run's checkpoint directory, where an adapter that keeps
	// checkpoints in files writes them; others ignore it.
	Dir string
}

// SampleRequest asks for len(Seeds) completions of one task's prompt.
type SampleRequest struct {
	Run        string // for messages
	Checkpoint Checkpoint
	Task       Task
	// Seeds has one seed per completion (plan's per-sample seeds). The
	// same checkpoint, task and seeds must give the same completions: a
	// retried Generate stores the same trajectories. An adapter whose
	// service takes one seed and a number of samples derives its seed from
	// Seeds (Seeds[0] with len(Seeds) samples), which the service must
	// honour deterministically.
	Seeds []uint64
	// Key is the group's idempotency key (SampleKey with sample -1).
	Key string
	// Settings are the run's policy settings (a remote sampler needs
	// the length bound and the temperature).
	Settings PolicySettings
	// Previous are the previous attempts, one per seed, at turn t > 1 of
	// a multi-turn trajectory; empty at turn 1 and in single-shot runs.
	Previous []Previous
	// History are, at turn t > 1, one per seed, the trajectory's turns 1
	// to t-1 as a token policy samples from them (a language model's: its
	// sequence so far is the prompt, then each turn's action tokens and
	// observation); empty at turn 1 and in single-shot runs. The built-in
	// policy reads Previous instead.
	History [][]Exchange
}

// Exchange is one answered turn of a trajectory as a token policy sees it:
// its action's token ids and sampling logprobs as the policy gave them
// (Completion's), and the observation that answered it (turns.Render's
// text, empty for a trajectory's last turn, which nothing answers before
// the update).
type Exchange struct {
	Tokens      []int
	LogProbs    []float64
	Observation string
}

// Completion is one sampled solution.
type Completion struct {
	// Text is the solution as the world model and the grader see it.
	Text string
	// Tokens are its token ids and LogProbs the sampling logprob of each,
	// when the backend has them (a remote policy needs them for its
	// update); the built-in policy gives its program tokens and no
	// LogProbs. len(LogProbs) is 0 or len(Tokens).
	Tokens   []int
	LogProbs []float64
}

// Datum is one trajectory of a fused batch.
type Datum struct {
	Task   Task
	Group  int
	Sample int
	Text   string
	// Tokens and LogProbs are the completion's, when it had them (see
	// Completion); the built-in policy re-encodes Text.
	Tokens   []int
	LogProbs []float64
	// Turns are a multi-turn trajectory's turns in order (empty for a
	// single-shot one, whose action is Text): every turn's action carries
	// the trajectory's advantage and weight, what it saw is its input.
	Turns []DatumTurn
	// Advantage is A_i and Weight the normalised fusion weight W_i
	// (docs/design.md, "GRPO advantages and the fused update"): the update
	// ascends Σ_i W_i A_i ∇log π(τ_i), per token of the completion.
	Advantage float64
	Weight    float64
}

// DatumTurn is one turn of a multi-turn datum: its action and, from turn
// 2 on, the previous attempt it was sampled from; for a token policy, its
// action's tokens and logprobs and the observation that answered it
// (Exchange; the observation of every turn but the last).
type DatumTurn struct {
	Text     string
	Previous *Previous
	Exchange
}

// UpdateRequest asks for the checkpoint after one update of Base.
type UpdateRequest struct {
	Run  string
	Step int
	// Base is checkpoint Step (Version == Step).
	Base Checkpoint
	// Batch is the step's fused batch, in (group, sample) order, every
	// trajectory with its weight (0 for ungraded ones). When every weight
	// is 0 the update is a zero-gradient step that still advances the
	// version.
	Batch []Datum
	// Settings are the run's policy settings (a remote optimiser step
	// needs the learning rate; the built-in policy keeps its own in the
	// checkpoint).
	Settings PolicySettings
	// Dir is where an adapter keeping files writes the new checkpoint.
	Dir string
	// Key is the step's idempotency key (StepKey): a remote adapter must
	// apply one optimiser step per key, however often it is retried.
	Key string
	// Sampler is the checkpoint the batch was sampled from when it is an
	// older one than Base (an asynchronous pipeline's, docs/design.md,
	// "Asynchronous pipeline"); nil when it is Base, the
	// sequential step. The built-in policy then scores each token under
	// Sampler (its sampling logprob, a deterministic function of the
	// checkpoint, the input and the tokens, so nothing per token is
	// stored) and weighs it by the clipped importance ratio; a remote
	// policy has its sampling logprobs in the Datums already.
	Sampler *Checkpoint
	// RatioClip is ε of the clipped importance ratio (pipeline.clip), in
	// (0, 1); read only when Sampler is set.
	RatioClip float64
}

// UpdateStats describe one update; the objective and KL are measured at the
// parameters before the step.
type UpdateStats struct {
	// Step is the policy's step after the update.
	Step uint64 `json:"step"`
	// Objective is L(θ), the weighted mean of A_i log π(τ_i) − β KL_i.
	Objective float64 `json:"objective"`
	// KL is the weighted mean of the per-trajectory KL estimate to the
	// reference (0 when β = 0, since it is not computed).
	KL float64 `json:"kl"`
	// GradNorm is the Euclidean norm of ∇L before clipping.
	GradNorm float64 `json:"grad_norm"`
	// Clipped reports whether the gradient was rescaled to ClipNorm.
	Clipped bool `json:"clipped"`
	// WeightSum is Σ w_i.
	WeightSum float64 `json:"weight_sum"`
	// Trajectories counts the examples with a positive weight.
	Trajectories int `json:"trajectories"`
	// RatioMean and RatioMax are the importance ratio
	// exp(logp_update − logp_sample) over the action tokens of the weighted
	// examples, logp_update the policy's logprob at the update's weights
	// as the training service reports it (Tinker's loss_fn_outputs): 1 when
	// the update is on-policy. 0 when the backend does not report it: the
	// built-in one reports it only for a batch sampled from an older
	// checkpoint (UpdateRequest.Sampler), where it applies the clipped
	// ratio itself (policy.UpdateOffPolicy; its Objective is then the
	// clipped surrogate's value).
	RatioMean float64 `json:"importance_ratio_mean,omitempty"`
	RatioMax  float64 `json:"importance_ratio_max,omitempty"`
}

// Policy samples solutions and learns from fused batches. Every method is
// a deterministic function of its request: the same seeds and batch give the
// same completions and the same next checkpoint (same Hash), so that a run
// and its replay, or a retried activity, agree.
type Policy interface {
	// Init returns checkpoint 0 of a run, a function of the seed and the
	// settings.
	Init(ctx context.Context, req InitRequest) (Checkpoint, error)
	// Sample returns len(req.Seeds) completions, completion i from seed i.
	Sample(ctx context.Context, req SampleRequest) ([]Completion, error)
	// Update returns checkpoint Base.Version+1. It never changes Base: a
	// retry recomputes the same next checkpoint from Base.
	Update(ctx context.Context, req UpdateRequest) (Checkpoint, UpdateStats, error)
}

// ContinueRequest asks for a new run's own copy of an earlier run's
// checkpoint, to continue that run from (wmrl continue).
type ContinueRequest struct {
	// Run is the new run, From the run it continues.
	Run, From string
	// Checkpoint is From's checkpoint the new run starts at, with its
	// State.
	Checkpoint Checkpoint
	// Suite, Seed and Settings are the new run's, as InitRequest's.
	Suite    uint64
	Seed     uint64
	Settings PolicySettings
}

// Continuer is a Policy whose runs' state a remote training service keeps
// (a model that its updates change in place): a run continued from another
// run's checkpoint needs its own model put at that checkpoint before its
// first update, since the old run's model may have moved past it. A policy
// whose checkpoints are self-contained (the built-in one) is not one.
type Continuer interface {
	// Continue returns the new run's checkpoint of req.Checkpoint.Version:
	// the same policy state (the same Hash when the service reports content
	// hashes) in a model of the new run's own. Calling it again returns
	// the same checkpoint.
	Continue(ctx context.Context, req ContinueRequest) (Checkpoint, error)
}
