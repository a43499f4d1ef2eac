package activities

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

// AnchorUncertaintyRequest asks for the world model's uncertainty about
// each group of a step, before the step generates anything: what active
// anchor selection (anchors.SelectActive) weighs the groups by.
type AnchorUncertaintyRequest struct {
	RunID     string `json:"run_id"`
	Step      int    `json:"step"`
	Groups    int    `json:"groups"`
	Seed      uint64 `json:"seed"`
	SuiteSeed uint64 `json:"suite_seed"`
	// Debias is true when the run's mode calibrates: residuals are then
	// taken through the map of the last step read, else through the
	// identity.
	Debias bool `json:"debias,omitempty"`
	// Lag is the asynchronous pipeline's d (pipeline.max_off_policy): the
	// steps step−d..step−1 may still be in flight when the step chooses
	// its anchors, so the pairs of steps 0..step−d−1 and the map of step
	// step−d−1 are read, the steps complete before the step starts. 0,
	// left out of the JSON, reads steps 0..step−1, as every request made
	// before the pipeline did.
	Lag int `json:"lag,omitempty"`
}

// Validate checks the request.
func (r AnchorUncertaintyRequest) Validate() error {
	if err := (StepRequest{RunID: r.RunID, Step: r.Step}).Validate(); err != nil {
		return err
	}
	if r.Groups < 1 {
		return fmt.Errorf("groups: %d, want at least 1", r.Groups)
	}
	if r.Lag < 0 || r.Lag > runconfig.MaxOffPolicy {
		return fmt.Errorf("lag %d: want in [0, %d] (pipeline.max_off_policy)", r.Lag, runconfig.MaxOffPolicy)
	}
	return nil
}

// last is the last step whose pairs the request reads; below 0: none.
func (r AnchorUncertaintyRequest) last() int { return r.Step - 1 - r.Lag }

// AnchorUncertaintyResponse holds, per group, its training task (the index
// Generate will use) and its uncertainty; Pairs counts the past anchor pairs
// it was computed from.
type AnchorUncertaintyResponse struct {
	Tasks       []int     `json:"tasks"`
	Uncertainty []float64 `json:"uncertainty"`
	Pairs       int       `json:"pairs"`
	// Sigma0 is σ0, the run's root-mean-square residual over those pairs
	// (anchors.RunResidual), the scale of selective scoring's cut. Absent
	// (0) in the answers recorded before selective scoring existed, which
	// only steps with active anchors and without selective scoring read.
	Sigma0 float64 `json:"sigma0,omitempty"`
}

// AnchorUncertainty computes each group's uncertainty from what is known
// before the step runs: the group's task, plan.TaskIndex(seed, step, group,
// tasks) as Generate chooses it, and the run's anchor pairs of the steps
// 0..last (last = step − 1 − lag: the step before, or in an asynchronous
// pipeline the last step complete before the step starts), each a residual
// r_env − f̂(r_wm) under the map of step last (the identity when there is
// none or the mode does not calibrate), on the task its group had
// (anchors.Uncertainty). It reads only rows written by completed steps, so
// a retry returns the same answer. A lag must be the run's
// pipeline.max_off_policy.
func (a *Activities) AnchorUncertainty(ctx context.Context, req AnchorUncertaintyRequest) (AnchorUncertaintyResponse, error) {
	if err := req.Validate(); err != nil {
		return AnchorUncertaintyResponse{}, invalid(err)
	}
	if req.Lag != 0 {
		cfg, err := a.runConfig(ctx, req.RunID)
		if err != nil {
			return AnchorUncertaintyResponse{}, err
		}
		if d := cfg.Pipeline.OffPolicy(); d != req.Lag {
			return AnchorUncertaintyResponse{}, invalid(fmt.Errorf("lag %d: the run's pipeline.max_off_policy is %d", req.Lag, d))
		}
	}
	train, err := a.tasks(ctx, req.RunID, req.SuiteSeed, backend.Train)
	if err != nil {
		return AnchorUncertaintyResponse{}, err
	}
	if len(train) == 0 {
		return AnchorUncertaintyResponse{}, invalid(fmt.Errorf("suite %d has no training tasks", req.SuiteSeed))
	}
	n := len(train)
	resp := AnchorUncertaintyResponse{Tasks: make([]int, req.Groups)}
	for g := range resp.Tasks {
		resp.Tasks[g] = plan.TaskIndex(req.Seed, req.Step, g, n)
	}
	var past []anchors.Residual
	if last := req.last(); last >= 0 {
		pairs, err := a.Store.AnchorPairs(ctx, req.RunID, last, 0)
		if err != nil {
			return AnchorUncertaintyResponse{}, err
		}
		var m isotonic.Map
		if req.Debias {
			c, err := a.Store.Calibration(ctx, req.RunID, last)
			switch {
			case errors.Is(err, store.ErrNotFound):
				// No map stored (a run resumed before its first map): identity.
			case err != nil:
				return AnchorUncertaintyResponse{}, err
			default:
				m = c.Map
			}
		}
		past = make([]anchors.Residual, len(pairs))
		for i, p := range pairs {
			past[i] = anchors.Residual{Task: plan.TaskIndex(req.Seed, p.Step, p.Group, n),
				Value: p.Env - m.Apply(p.WM), Weight: p.Weight}
		}
		resp.Pairs = len(pairs)
	}
	resp.Uncertainty = anchors.Uncertainty(resp.Tasks, past)
	resp.Sigma0 = anchors.RunResidual(past)
	if math.IsNaN(resp.Sigma0) || math.IsInf(resp.Sigma0, 0) {
		return AnchorUncertaintyResponse{}, fmt.Errorf("run residual is %v", resp.Sigma0)
	}
	for g, u := range resp.Uncertainty {
		if math.IsNaN(u) || math.IsInf(u, 0) {
			return AnchorUncertaintyResponse{}, fmt.Errorf("uncertainty of group %d is %v", g, u)
		}
	}
	return resp, nil
}
