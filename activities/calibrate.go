package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/store"
)

// RecordAnchorsRequest names the anchor groups of a step.
type RecordAnchorsRequest struct {
	RunID  string `json:"run_id"`
	Step   int    `json:"step"`
	Groups []int  `json:"groups"`
	// Weights are the groups' weights under active anchor selection
	// (Weights[i] of Groups[i]), stored with their pairs; empty for all 1.
	Weights []float64 `json:"weights,omitempty"`
}

// Validate checks the request: groups ascending, without repeats; weights,
// when given, one per group, finite and positive.
func (r RecordAnchorsRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	for i, g := range r.Groups {
		if g < 0 || (i > 0 && g <= r.Groups[i-1]) {
			return fmt.Errorf("groups %v: want ascending non-negative group indices", r.Groups)
		}
	}
	return checkWeights(r.Weights, len(r.Groups))
}

// checkWeights checks anchor weights: none, or one per group, each finite
// and positive.
func checkWeights(w []float64, groups int) error {
	if len(w) == 0 {
		return nil
	}
	if len(w) != groups {
		return fmt.Errorf("weights: %d for %d anchor groups", len(w), groups)
	}
	for i, v := range w {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("weights: %v of group %d is not finite and positive", v, i)
		}
	}
	return nil
}

// weight returns the weight of the i-th anchor group, 1 without weights.
func (r RecordAnchorsRequest) weight(g int) float64 {
	if len(r.Weights) == 0 {
		return 1
	}
	i, _ := slices.BinarySearch(r.Groups, g)
	return r.Weights[i]
}

// RecordAnchorsResponse counts the anchor pairs of the step.
type RecordAnchorsResponse struct {
	// Pairs is the number of anchor trajectories with both scores (none in
	// the anchor mode, which scores nothing by the world model); New how
	// many of them were not stored before; Ungraded the anchor trajectories
	// without an execution result (excluded, never scored 0).
	Pairs    int `json:"pairs"`
	New      int `json:"new"`
	Ungraded int `json:"ungraded"`
}

// RecordAnchors marks the anchor groups' trajectories and stores their
// anchor pairs (r_wm, r_env). Both writes are idempotent.
func (a *Activities) RecordAnchors(ctx context.Context, req RecordAnchorsRequest) (RecordAnchorsResponse, error) {
	if err := req.Validate(); err != nil {
		return RecordAnchorsResponse{}, invalid(err)
	}
	if len(req.Groups) == 0 {
		return RecordAnchorsResponse{}, nil
	}
	err := a.Store.SetAnchors(ctx, req.RunID, req.Step, req.Groups)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return RecordAnchorsResponse{}, invalid(err)
	}
	if err != nil {
		return RecordAnchorsResponse{}, err
	}
	ts, err := a.Store.StepTrajectories(ctx, req.RunID, req.Step)
	if err != nil {
		return RecordAnchorsResponse{}, err
	}
	var resp RecordAnchorsResponse
	var pairs []store.AnchorPair
	for _, t := range ts {
		if _, ok := slices.BinarySearch(req.Groups, t.Group); !ok {
			continue
		}
		if t.Exec == nil {
			resp.Ungraded++
			continue
		}
		if t.WMScore == nil {
			continue // the anchor mode: no world model, no pair
		}
		pairs = append(pairs, store.AnchorPair{Key: t.Key, WM: *t.WMScore, Env: t.Exec.Score, Weight: req.weight(t.Group)})
	}
	n, err := a.Store.RecordAnchorPairs(ctx, pairs)
	if err != nil {
		return RecordAnchorsResponse{}, err
	}
	resp.Pairs, resp.New = len(pairs), n
	return resp, nil
}

// CalibrateRequest asks for the calibration map of a step.
type CalibrateRequest struct {
	RunID  string        `json:"run_id"`
	Step   int           `json:"step"`
	Debias debias.Config `json:"debias"`
	// FromStep is the first step whose anchor pairs the window may hold:
	// after a world-model refresh, the first step the current version
	// scored (world_model.refresh; 0, left out of the JSON, otherwise).
	FromStep int `json:"from_step,omitempty"`
}

// Validate checks the request.
func (r CalibrateRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.FromStep < 0 || r.FromStep > r.Step {
		return fmt.Errorf("from step %d: want in [0, %d]", r.FromStep, r.Step)
	}
	return r.Debias.Validate()
}

// CalibrationSummary describes the map fitted at a step.
type CalibrationSummary struct {
	Step int `json:"step"`
	// Pairs is the size of the window the map was fitted on; Knots the
	// map's knots (0: the identity, before MinPairs pairs exist).
	Pairs int `json:"pairs"`
	Knots int `json:"knots"`
	// BiasBefore and BiasAfter are the window's mean bias r_wm − r_env
	// before and after the map (0 without pairs).
	BiasBefore float64 `json:"bias_before"`
	BiasAfter  float64 `json:"bias_after"`
	// FromStep is the request's: the window's first step after a
	// world-model refresh.
	FromStep int `json:"from_step,omitempty"`
}

// Calibrate fits f̂ on the window of anchor pairs of steps 0..s (FromStep..s
// after a world-model refresh: only pairs the current version scored), each
// weighted by its stored weight (1 but under active anchor selection), and
// stores it as the step's map. The fit is deterministic, so a retry stores the same
// map.
func (a *Activities) Calibrate(ctx context.Context, req CalibrateRequest) (CalibrationSummary, error) {
	if err := req.Validate(); err != nil {
		return CalibrationSummary{}, invalid(err)
	}
	stored, err := a.Store.AnchorPairsFrom(ctx, req.RunID, req.FromStep, req.Step, req.Debias.Window)
	if err != nil {
		return CalibrationSummary{}, err
	}
	pairs := make([]debias.Pair, len(stored))
	for i, p := range stored {
		pairs[i] = p.Pair()
	}
	m, err := debias.Fit(pairs, req.Debias)
	if err != nil {
		return CalibrationSummary{}, invalid(err)
	}
	sum := CalibrationSummary{Step: req.Step, Pairs: len(pairs), Knots: len(m.X), FromStep: req.FromStep}
	c := store.Calibration{Run: req.RunID, Step: req.Step, Map: m, NPairs: len(pairs)}
	if before, after, ok := debias.MeanBias(pairs, m); ok {
		sum.BiasBefore, sum.BiasAfter = before, after
		c.BiasBefore, c.BiasAfter = &before, &after
	}
	if err := a.Store.SaveCalibration(ctx, c); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return CalibrationSummary{}, invalid(err)
		}
		return CalibrationSummary{}, err
	}
	if c.BiasBefore != nil {
		a.Metrics.Calibration(a.metricsRun(ctx, req.RunID), sum.Pairs, sum.BiasBefore, sum.BiasAfter)
	}
	return sum, nil
}
