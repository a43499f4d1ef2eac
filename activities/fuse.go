package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/store"
)

// FuseRequest asks for the fused update batch of a step.
type FuseRequest struct {
	RunID string    `json:"run_id"`
	Step  int       `json:"step"`
	Mode  mode.Mode `json:"mode"`
	// Anchors are the step's anchor groups, ascending (empty in grpo and wm).
	Anchors []int `json:"anchors"`
	// AnchorWeights are the anchor groups' weights under active anchor
	// selection (AnchorWeights[i] of Anchors[i]); empty for all 1.
	AnchorWeights []float64 `json:"anchor_weights,omitempty"`
	// Selective is selective scoring's decision (anchors.selective): the
	// world-model groups it names get weight 0 (fusion.StepSelective). Nil
	// without it, as in every request made before it existed.
	Selective *fusion.Selection `json:"selective,omitempty"`
	// Denoise is the denoiser's state before the step.
	Denoise       denoise.State    `json:"denoise"`
	DenoiseConfig denoise.Config   `json:"denoise_config"`
	Advantage     advantage.Config `json:"advantage"`
}

// Validate checks the request.
func (r FuseRequest) Validate() error {
	if err := (RecordAnchorsRequest{RunID: r.RunID, Step: r.Step, Groups: r.Anchors, Weights: r.AnchorWeights}).Validate(); err != nil {
		return err
	}
	if err := r.Mode.Validate(); err != nil {
		return err
	}
	if err := r.DenoiseConfig.Validate(); err != nil {
		return fmt.Errorf("denoise: %w", err)
	}
	if err := r.Advantage.Validate(); err != nil {
		return fmt.Errorf("advantage: %w", err)
	}
	if sel := r.Selective; sel != nil {
		if !slices.IsSorted(sel.LeftOut) {
			return fmt.Errorf("selective: left-out groups %v, want them ascending", sel.LeftOut)
		}
		if !(sel.Cut >= 0) || math.IsInf(sel.Cut, 0) {
			return fmt.Errorf("selective: cut %v, want a finite value at least 0", sel.Cut)
		}
		if !(sel.MaxRatio >= 0) || math.IsInf(sel.MaxRatio, 0) {
			return fmt.Errorf("selective: max ratio %v, want a finite value at least 0", sel.MaxRatio)
		}
	}
	if st := r.Denoise; st.Groups < 0 || !(st.Eta2 >= 0) || !(st.Eta2Cal >= 0) {
		return fmt.Errorf("denoise state %+v: want non-negative values", st)
	}
	return nil
}

// FuseResponse carries the denoiser's state after the step and a summary.
type FuseResponse struct {
	Denoise denoise.State `json:"denoise"`
	Rho     float64       `json:"rho"`
	Stats   FuseStats     `json:"stats"`
}

// FuseStats summarises a fused batch (fusion.Stats).
type FuseStats = fusion.Stats

// Fuse computes the step's rewards per mode (r_env for executed trajectories
// in grpo and in anchor groups, r_wm otherwise, through the step's map when
// the mode debiases; in the anchor mode the other groups are left out),
// pushes each anchor group's s² into the denoiser, with the group's weight
// under active anchor selection (AnchorWeights), when the mode denoises, takes ρ, the GRPO advantages and the per-trajectory
// weights (fusion.Step), stores the batch and the denoiser's state, and
// returns the new state. It is deterministic, so a retry stores the same
// values.
func (a *Activities) Fuse(ctx context.Context, req FuseRequest) (FuseResponse, error) {
	if err := req.Validate(); err != nil {
		return FuseResponse{}, invalid(err)
	}
	ts, err := a.Store.StepTrajectories(ctx, req.RunID, req.Step)
	if err != nil {
		return FuseResponse{}, err
	}
	var m isotonic.Map
	if req.Mode.Pieces().Debias {
		c, err := a.Store.Calibration(ctx, req.RunID, req.Step)
		if errors.Is(err, store.ErrNotFound) {
			return FuseResponse{}, invalid(fmt.Errorf("step %d of %s has no calibration map: Calibrate runs before Fuse", req.Step, req.RunID))
		}
		if err != nil {
			return FuseResponse{}, err
		}
		m = c.Map
	}
	var weights []float64 // nil: all 1
	if len(req.AnchorWeights) > 0 {
		weights = req.AnchorWeights
	}
	fts := trajectoriesOf(ts)
	if req.DenoiseConfig.Memory {
		mem, err := a.memory(ctx, req.RunID, req.Step, ts)
		if err != nil {
			return FuseResponse{}, err
		}
		mem.Fill(fts)
	}
	batch, st, stats := fusion.StepSelective(fts, req.Mode, req.Anchors, weights, req.Selective, m,
		req.Denoise, req.DenoiseConfig, req.Advantage)
	batch.Run, batch.Step = req.RunID, req.Step
	if err := writeJSON(a.batchPath(req.RunID, req.Step), batch); err != nil {
		return FuseResponse{}, fmt.Errorf("write batch: %w", err)
	}
	err = a.Store.SaveFusionState(ctx, store.FusionState{Run: req.RunID, Step: req.Step, State: st, Rho: batch.Rho})
	if errors.Is(err, store.ErrConflict) {
		return FuseResponse{}, invalid(err)
	}
	if err != nil {
		return FuseResponse{}, err
	}
	return FuseResponse{Denoise: st, Rho: batch.Rho, Stats: stats}, nil
}

// memory is execution memory for step (denoise.Config.Memory): the run's
// real executions at earlier steps of the step's tasks. Those steps are
// fused before this one (their denoiser state is this step's input), so
// their executions are all stored and a retry reads the same ones.
func (a *Activities) memory(ctx context.Context, run string, step int, ts []store.Trajectory) (fusion.Memory, error) {
	var tasks []string
	seen := map[string]bool{}
	for _, t := range ts {
		if !seen[t.TaskID] {
			seen[t.TaskID] = true
			tasks = append(tasks, t.TaskID)
		}
	}
	earlier, err := a.Store.ExecutedBefore(ctx, run, step, tasks)
	if err != nil {
		return fusion.Memory{}, err
	}
	es := make([]fusion.Execution, len(earlier))
	for i, t := range earlier {
		es[i] = fusion.Execution{TaskID: t.TaskID, Program: t.Program, Score: t.Exec.Score}
	}
	return fusion.NewMemory(es), nil
}

// trajectoriesOf is what fusion reads of the stored trajectories.
func trajectoriesOf(ts []store.Trajectory) []fusion.Trajectory {
	out := make([]fusion.Trajectory, len(ts))
	for i, t := range ts {
		out[i] = fusion.Trajectory{Group: t.Group, Sample: t.Sample, TaskID: t.TaskID, Program: t.Program, WM: t.WMScore}
		if t.Exec != nil {
			out[i].Env = &t.Exec.Score
		}
	}
	return out
}
