package backend

import (
	"context"
	"errors"
	"math"

	"github.com/wmrl/wmrl/internal/fielderr"
)

// ScoreItem is one (task, solution) pair to score.
type ScoreItem struct {
	Task     Task
	Solution string
	// Action is the turn's action, as GradeItem.Action.
	Action string
	// Key is the trajectory's idempotency key (SampleKey), for messages
	// and request ids.
	Key string
}

// Prediction is the world model's score of one pair.
type Prediction struct {
	// Graded is false when the model gave no usable score (an LLM's
	// unparsable answer): the trajectory keeps no r_wm and is left out of
	// the advantages, the anchor pairs and s², never scored 0.
	Graded bool
	// Score is r_wm in [0,1], when Graded.
	Score float64
	// Status and Feedback are the world model's predicted outcome of the
	// turn, for the policy's next observation (the reference's status and
	// env_feedback); "" leaves them to the ladder: the rung Score falls on
	// and its description (turns.WorldModelAnswer).
	Status   string
	Feedback string
	// Tokens is what the prediction cost a language-model world model:
	// the prompt and completion tokens of the call that answered it (a
	// cached answer reports the tokens of the call it came from, so a
	// retried activity records the same figure); 0 for a model without
	// tokens (the built-in one) or an item scored without a call.
	Tokens int
}

// WorldModel predicts the execution score of solutions without running them.
type WorldModel interface {
	// Score returns one prediction per item, in order. A frozen model
	// returns the same predictions for the same items (the activities store
	// r_wm once; a retry must not change it). A failure to reach the model
	// is an error; an answer the model gave but that holds no score is an
	// ungraded Prediction.
	Score(ctx context.Context, items []ScoreItem) ([]Prediction, error)
}

// Simulation is how a simulated world model degrades the real score (the
// run config's world_model.simulated): score = clamp(r_env + Bias +
// Noise·z, 0, 1), z a standard normal drawn from Seed and the item's key.
type Simulation struct {
	Noise float64
	Bias  float64
	Seed  uint64
}

// Check refuses a simulation out of bounds, naming the run-config field:
// these are the only bounds of world_model.simulated (runconfig validates
// a run's section with Check).
func (s Simulation) Check() error {
	switch {
	case math.IsNaN(s.Noise) || math.IsInf(s.Noise, 0) || s.Noise < 0 || s.Noise > 1:
		return fielderr.New("world_model.simulated.noise", "must be in [0,1], got %v", s.Noise)
	case math.IsNaN(s.Bias) || math.IsInf(s.Bias, 0) || s.Bias < -1 || s.Bias > 1:
		return fielderr.New("world_model.simulated.bias", "must be in [-1,1], got %v", s.Bias)
	}
	return nil
}

// WorldModelSettings are a run's settings of its world model (the run
// config's world_model section) for the adapters that take any; they
// travel with each scoring request (ScoreRequest), as PolicySettings do
// with a policy's. A world model without settings never sees them.
type WorldModelSettings struct {
	// Simulation is world_model.simulated, seeded by the run seed.
	Simulation Simulation
}

// ScoreRequest is a batch of items to score under a run's settings.
type ScoreRequest struct {
	Items    []ScoreItem
	Settings WorldModelSettings
}

// SettingsScorer is a world model whose scores depend on the run's
// settings (the simulated world model: its noise and bias): Score hands it
// the whole request.
type SettingsScorer interface {
	ScoreWith(ctx context.Context, req ScoreRequest) ([]Prediction, error)
}

// Score scores req's items with wm: by ScoreWith when wm takes settings,
// else by its Score. A request that sets a simulation for a world model
// that takes no settings is a *PermanentError (the run config refuses
// world_model.simulated for any backend but simulated).
func Score(ctx context.Context, wm WorldModel, req ScoreRequest) ([]Prediction, error) {
	if s, ok := wm.(SettingsScorer); ok {
		return s.ScoreWith(ctx, req)
	}
	if sim := req.Settings.Simulation; sim.Noise != 0 || sim.Bias != 0 {
		return nil, Permanent(errors.New("world_model.simulated: set, but the run's world model takes no settings"))
	}
	return wm.Score(ctx, req.Items)
}

// TrainItem is one real execution a world model may learn from: an anchor
// trajectory of a run, with its task, its solution and its real score.
type TrainItem struct {
	Task     Task
	Solution string
	// Score is r_env in [0,1].
	Score float64
	// Group names the item's group (one task of one step) and Key its
	// trajectory (SampleKey), for metrics and messages.
	Group, Key string
	// Step is the step the item was executed at.
	Step int
	// Weight is how much the item counts relative to the run's other items,
	// finite and > 0 (world_model.refresh.half_life); 0 means 1.
	Weight float64
}

// Refreshed is a retrained world model: its artefact (the bytes Open reads
// back; their sha256 is the version's identity) and how it was trained.
type Refreshed struct {
	Artefact []byte
	// Base identifies the frozen model the version extends; BaseExamples
	// counts that model's own training examples, which the version was
	// trained on too.
	Base         string
	BaseExamples int
	// TrainMSE and TrainSpearman are the fit's metrics over all its
	// examples (the within-group Spearman correlation).
	TrainMSE, TrainSpearman float64
}

// Refresher is a world model that can be retrained on a run's own
// executions (world_model.refresh). It is optional: the activities check
// for it by type assertion, and a run asking for refreshes of a world model
// without it fails naming the field. The built-in model implements it by
// refitting its regression on its original data plus the items; a remote
// language model would fine-tune here (its Refresh starting a fine-tuning
// job keyed by (run, step) and returning the tuned model's id as its
// artefact, Open pointing the adapter at that model).
type Refresher interface {
	// Refresh retrains the world model on its original training data plus
	// items (in their order) and returns the new version. The same items
	// must give the same artefact, byte for byte: a retried activity and a
	// replayed run find the version they recorded.
	Refresh(ctx context.Context, items []TrainItem) (Refreshed, error)
	// Open returns the world model of an artefact Refresh returned; one
	// that does not decode is a *PermanentError.
	Open(artefact []byte) (WorldModel, error)
}
