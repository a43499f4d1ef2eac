package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

// ResumeRunRequest starts run RunID from the last completed step of run
// From (a TrainingRun started with RunInput.ResumeFrom).
type ResumeRunRequest struct {
	RunID  string           `json:"run_id"`
	From   string           `json:"from"`
	Config runconfig.Config `json:"config"`
}

// Validate checks the request.
func (r ResumeRunRequest) Validate() error {
	if err := checkRun(r.RunID); err != nil {
		return err
	}
	if err := checkRun(r.From); err != nil {
		return fmt.Errorf("from: %w", err)
	}
	if r.From == r.RunID {
		return fmt.Errorf("run %s cannot resume from itself", r.RunID)
	}
	return r.Config.Validate()
}

// ResumeRunResponse is the state of the resumed run before its next step.
type ResumeRunResponse struct {
	// Step is the next step (the old run's last completed step + 1) and
	// Checkpoint its checkpoint.
	Step        int                 `json:"step"`
	Checkpoint  CheckpointRef       `json:"checkpoint"`
	Denoise     denoise.State       `json:"denoise"`
	Rho         float64             `json:"rho"`
	Tracker     anchors.Tracker     `json:"tracker"`
	Calibration *CalibrationSummary `json:"calibration,omitempty"`
	// LastMetrics are the metrics of step Step-1 and LastAnchors its anchor
	// groups (ascending; empty in modes without anchors).
	LastMetrics StepMetrics `json:"last_metrics"`
	LastAnchors []int       `json:"last_anchors"`
	// AnchorFraction is the anchor fraction step Step-1 used (recorded in
	// its metrics; the last set-anchor-fraction's or the configuration's),
	// the configuration's when the step did not record it.
	AnchorFraction float64 `json:"anchor_fraction"`
	// HeldOut is the held-out score of checkpoint Step when the old run
	// evaluated it, nil otherwise.
	HeldOut *store.HeldOut `json:"held_out,omitempty"`
	// Pipeline is, for a run with pipeline.max_off_policy d > 0, what its
	// steps Step..Step+d start with; nil, left out of the JSON, otherwise.
	Pipeline *ResumedPipeline `json:"pipeline,omitempty"`
}

// ResumedPipeline is what the first steps of a resumed pipelined run
// (pipeline.max_off_policy d) start with, as in the uninterrupted run
// (docs/design.md, "Asynchronous pipeline"): Recent are the resumed run's
// checkpoints max(0, s+1−d)..s+1, the samplers of steps s+1..s+1+d, and
// Fractions[k] the anchor fraction planned for step s+1+k (k = 0..d): the
// run's fraction after step s−d+k, which the adaptive controller
// (anchors.adaptive) moves step by step from the fraction step s used by
// each step's ρ. Fractions[d] is the run's fraction after step s.
type ResumedPipeline struct {
	Recent    []CheckpointRef `json:"recent"`
	Fractions []float64       `json:"fractions"`
}

// ResumeRun copies run From's history up to its last completed step s into
// run RunID (store.ResumeRun: steps, trajectories, anchor pairs, maps and
// fusion states of steps 0..s, checkpoints and evaluations of versions
// 0..s+1, and the new run's row, in one transaction) and returns the state
// to continue from, step s+1: checkpoint s+1, the denoiser state and ρ of
// step s, the anchor tracker of steps 0..s, the metrics and anchor groups
// of step s, the anchor fraction it used, the latest calibration summary
// and the held-out score of checkpoint s+1. With the same seed and
// configuration the resumed run continues exactly as the old one would
// have. Calling it again is a no-op that returns the same state. A
// pipelined run (pipeline.max_off_policy d > 0) also gets its next d+1
// steps' samplers and anchor fractions (ResumedPipeline), and is continued
// only with the old run's d.
//
// TrainingRun calls it when started with RunInput.ResumeFrom; it is the
// only writer of a resumed run's first state: `wmrl continue` only
// checks and starts the workflow.
func (a *Activities) ResumeRun(ctx context.Context, req ResumeRunRequest) (ResumeRunResponse, error) {
	if err := req.Validate(); err != nil {
		return ResumeRunResponse{}, invalid(err)
	}
	last, ok, err := a.Store.LastCompletedStep(ctx, req.From)
	if err != nil {
		return ResumeRunResponse{}, err
	}
	if !ok {
		return ResumeRunResponse{}, invalid(fmt.Errorf("run %s has no completed step to resume from", req.From))
	}
	from, err := a.Store.Checkpoint(ctx, req.From, last+1)
	if errors.Is(err, store.ErrNotFound) {
		return ResumeRunResponse{}, invalid(err)
	}
	if err != nil {
		return ResumeRunResponse{}, err
	}
	if err := CanContinue(req.Config, from); err != nil {
		return ResumeRunResponse{}, invalid(fmt.Errorf("run %s: %w", req.From, err))
	}
	old, err := a.runConfig(ctx, req.From)
	if err != nil {
		return ResumeRunResponse{}, err
	}
	if d, od := req.Config.Pipeline.OffPolicy(), old.Pipeline.OffPolicy(); d != od {
		// Another d changes which checkpoints the next steps sample from
		// and which steps' values they start with.
		return ResumeRunResponse{}, invalid(fmt.Errorf("pipeline.max_off_policy: %d, run %s was run with %d: a run is "+
			"continued with its own", d, req.From, od))
	}
	var cont backend.Continuer
	if b := req.Config.Policy.Backend; b != "" && b != backend.Builtin {
		pol, err := a.policyNamed(b)
		if err != nil {
			return ResumeRunResponse{}, err
		}
		cont, _ = pol.(backend.Continuer)
	}
	raw, err := json.Marshal(req.Config)
	if err != nil {
		return ResumeRunResponse{}, fmt.Errorf("encode config: %w", err)
	}
	cfg := req.Config
	err = a.Store.ResumeRun(ctx, store.Run{ID: req.RunID, Name: cfg.Name, Mode: cfg.Mode, Config: raw, Seed: cfg.Seed,
		Steps: cfg.Steps, State: store.RunRunning, ResumedFrom: req.From, ResumedStep: last})
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return ResumeRunResponse{}, invalid(err)
	}
	if err != nil {
		return ResumeRunResponse{}, err
	}
	if cont != nil {
		// The new run's own model, put at the old run's checkpoint last+1.
		var ck backend.Checkpoint
		err := withHeartbeat(ctx, func() error {
			var err error
			ck, err = cont.Continue(ctx, backend.ContinueRequest{Run: req.RunID, From: req.From,
				Checkpoint: backend.Checkpoint{Version: from.Version, Hash: from.Hash, Location: from.Location, State: from.State},
				Suite:      cfg.SuiteSeed, Seed: plan.InitSeed(cfg.Seed), Settings: policySettings(cfg)})
			return err
		})
		if err != nil {
			return ResumeRunResponse{}, fromPort(err)
		}
		if ck.Version != last+1 {
			return ResumeRunResponse{}, invalid(fmt.Errorf("continue: the policy returned checkpoint %d, want %d", ck.Version, last+1))
		}
		err = a.Store.ContinueCheckpoint(ctx, store.Checkpoint{Run: req.RunID, Version: ck.Version, Hash: ck.Hash, Location: ck.Location, State: ck.State})
		if errors.Is(err, store.ErrConflict) {
			return ResumeRunResponse{}, invalid(err)
		}
		if err != nil {
			return ResumeRunResponse{}, err
		}
	}
	resp := ResumeRunResponse{Step: last + 1, Rho: 1, AnchorFraction: cfg.Anchors.Fraction, LastAnchors: []int{}}
	cp, err := a.Store.Checkpoint(ctx, req.RunID, last+1)
	if err != nil {
		return ResumeRunResponse{}, fmt.Errorf("checkpoint %d: %w", last+1, err)
	}
	resp.Checkpoint = CheckpointRef{Version: last + 1, Hash: cp.Hash}
	if f, err := a.Store.FusionState(ctx, req.RunID, last); err == nil {
		resp.Denoise, resp.Rho = f.State, f.Rho
	} else if !errors.Is(err, store.ErrNotFound) {
		return ResumeRunResponse{}, err
	}
	if c, err := a.Store.LatestCalibration(ctx, req.RunID, last); err == nil {
		sum := CalibrationSummary{Step: c.Step, Pairs: c.NPairs, Knots: len(c.Map.X)}
		if c.BiasBefore != nil && c.BiasAfter != nil {
			sum.BiasBefore, sum.BiasAfter = *c.BiasBefore, *c.BiasAfter
		}
		resp.Calibration = &sum
	} else if !errors.Is(err, store.ErrNotFound) {
		return ResumeRunResponse{}, err
	}
	steps, err := a.Store.Steps(ctx, req.RunID)
	if err != nil {
		return ResumeRunResponse{}, err
	}
	for _, s := range steps {
		if s.Status != store.StepCompleted || s.Step > last {
			continue
		}
		resp.Tracker.Add(s.Metrics.Groups, s.Metrics.AnchorGroups)
		if s.Step == last {
			resp.LastMetrics = s.Metrics
			if s.FractionRecorded && cfg.Mode.Pieces().Anchors {
				resp.AnchorFraction = s.Metrics.AnchorFraction
			}
		}
	}
	ts, err := a.Store.StepTrajectories(ctx, req.RunID, last)
	if err != nil {
		return ResumeRunResponse{}, err
	}
	for _, t := range ts { // in (group, sample) order
		if t.Anchor && (len(resp.LastAnchors) == 0 || resp.LastAnchors[len(resp.LastAnchors)-1] != t.Group) {
			resp.LastAnchors = append(resp.LastAnchors, t.Group)
		}
	}
	h, err := a.Store.HeldOutScore(ctx, req.RunID, last+1)
	if err != nil {
		return ResumeRunResponse{}, err
	}
	if h.Tasks > 0 {
		resp.HeldOut = &h
	}
	if d := cfg.Pipeline.OffPolicy(); d > 0 {
		if resp.Pipeline, err = a.resumedPipeline(ctx, req.RunID, cfg, last, resp.AnchorFraction); err != nil {
			return ResumeRunResponse{}, err
		}
	}
	return resp, nil
}

// resumedPipeline is the ResumedPipeline of run (already copied) resumed
// after step last, whose step last used anchor fraction used. In a
// pipelined run the fraction f(j) after step j is f(j−1) moved by step j's
// ρ once its denoiser is calibrated (anchors.adaptive; unchanged without
// it), f(−1) the initial one, and step t uses f(t−d−1) (f(−1) for t ≤ d).
// So used is f(last−d−1), and f(last−d)..f(last) follow from the ρ of
// steps last−d..last.
func (a *Activities) resumedPipeline(ctx context.Context, run string, cfg runconfig.Config, last int, used float64) (*ResumedPipeline, error) {
	d := cfg.Pipeline.OffPolicy()
	p := &ResumedPipeline{}
	for v := max(0, last+1-d); v <= last+1; v++ {
		c, err := a.Store.Checkpoint(ctx, run, v)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", v, err)
		}
		p.Recent = append(p.Recent, CheckpointRef{Version: v, Hash: c.Hash})
	}
	ad := cfg.Anchors.Adaptive
	f := used // f(max(last−d−1, −1))
	for j := last - d; j <= last; j++ {
		if j >= 0 && ad.Enabled() {
			fs, err := a.Store.FusionState(ctx, run, j)
			switch {
			case errors.Is(err, store.ErrNotFound):
				// No fusion state (a mode without one): nothing to move by.
			case err != nil:
				return nil, err
			case fs.State.Calibrated:
				f = anchors.Adapt(f, fs.Rho, ad.Controller())
			}
		}
		p.Fractions = append(p.Fractions, f)
	}
	return p, nil
}

// CanContinue refuses to continue a run from its checkpoint from (the one
// after its last completed step) when the policy cannot be put back there.
// A Tinker model's weights are the training service's state, which the
// run's later requests may have moved past that step: a continued run
// creates a model of its own and loads into it the training weights and
// optimiser state the old run saved with the checkpoint (Checkpoint.State,
// save_weights after each optimiser step). A checkpoint recorded without
// them (before wmrl saved them) cannot be continued. The built-in policy's
// checkpoint file is its whole state.
func CanContinue(cfg runconfig.Config, from store.Checkpoint) error {
	if cfg.Policy.Backend == backend.Tinker && from.State == "" {
		return fmt.Errorf("policy.backend: %q: checkpoint %d has no saved training weights (runs recorded before wmrl "+
			"saved them after each optimiser step cannot be continued); start a new run", backend.Tinker, from.Version)
	}
	return nil
}
