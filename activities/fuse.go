package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/denoise"
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
	// Denoise is the denoiser's state before the step.
	Denoise       denoise.State    `json:"denoise"`
	DenoiseConfig denoise.Config   `json:"denoise_config"`
	Advantage     advantage.Config `json:"advantage"`
}

// Validate checks the request.
func (r FuseRequest) Validate() error {
	if err := (RecordAnchorsRequest{RunID: r.RunID, Step: r.Step, Groups: r.Anchors}).Validate(); err != nil {
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

// FuseStats summarises a fused batch.
type FuseStats struct {
	Trajectories  int     `json:"trajectories"`
	Executed      int     `json:"executed"`
	Graded        int     `json:"graded"`
	Ungraded      int     `json:"ungraded"`
	SkippedGroups int     `json:"skipped_groups"`
	S2Groups      int     `json:"s2_groups"` // anchor groups pushed into the denoiser
	MeanReward    float64 `json:"mean_reward"`
	MeanEnv       float64 `json:"mean_env"`
	MeanWM        float64 `json:"mean_wm"`
	AnchorShare   float64 `json:"anchor_share"`
}

// BatchItem is one trajectory of a fused batch: its training reward, its
// GRPO advantage and its normalised fusion weight w_i/Σw, so that the update
// direction is Σ Weight·Advantage·∇log π.
type BatchItem struct {
	Group     int     `json:"group"`
	Sample    int     `json:"sample"`
	TaskID    string  `json:"task_id"`
	Program   string  `json:"program"`
	Anchor    bool    `json:"anchor"` // scored by real execution and weighted by ρ
	Graded    bool    `json:"graded"`
	Reward    float64 `json:"reward"`
	Advantage float64 `json:"advantage"`
	Weight    float64 `json:"weight"`
}

// Batch is the fused batch of a step, stored in the data directory for
// Update and `wmrl inspect`.
type Batch struct {
	Run   string      `json:"run"`
	Step  int         `json:"step"`
	Mode  mode.Mode   `json:"mode"`
	Rho   float64     `json:"rho"`
	Items []BatchItem `json:"items"`
}

// Fuse computes the step's rewards per mode (r_env for executed trajectories
// in grpo and in anchor groups, r_wm otherwise, through the step's map when
// the mode debiases), pushes each anchor group's s² into the denoiser when
// the mode denoises, takes ρ, the GRPO advantages and the per-trajectory
// weights, stores the batch and the denoiser's state, and returns the new
// state. It is deterministic, so a retry stores the same values.
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
	batch, st, stats := FuseStep(ts, req.Mode, req.Anchors, m, req.Denoise, req.DenoiseConfig, req.Advantage)
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

// FuseStep is Fuse's pure part. ts are the step's trajectories in (group,
// sample) order, anchors the anchor groups (ascending), m the step's map
// (ignored unless the mode debiases), st the denoiser's state before the
// step. Ungraded trajectories (no execution result where one is needed)
// get advantage 0 and weight 0: they are excluded, never scored 0.
func FuseStep(ts []store.Trajectory, md mode.Mode, anchors []int, m isotonic.Map, st denoise.State,
	dcfg denoise.Config, acfg advantage.Config) (Batch, denoise.State, FuseStats) {
	pc := md.Pieces()
	isAnchor := func(g int) bool {
		_, ok := slices.BinarySearch(anchors, g)
		return pc.Anchors && ok
	}
	wmOf := func(t store.Trajectory) float64 {
		if pc.Debias {
			return m.Apply(*t.WMScore)
		}
		return *t.WMScore
	}
	var stats FuseStats
	items := make([]BatchItem, len(ts))
	var nEnv, nWM int
	var sumEnv, sumWM, sumReward float64
	for i, t := range ts {
		it := BatchItem{Group: t.Group, Sample: t.Sample, TaskID: t.TaskID, Program: t.Program, Anchor: isAnchor(t.Group)}
		if t.Exec != nil {
			nEnv++
			sumEnv += t.Exec.Score
		}
		if t.WMScore != nil {
			nWM++
			sumWM += *t.WMScore
		}
		switch {
		case pc.ExecuteAll || it.Anchor:
			if t.Exec != nil {
				it.Graded, it.Reward = true, t.Exec.Score
			}
		case t.WMScore != nil:
			it.Graded, it.Reward = true, wmOf(t)
		}
		if it.Graded {
			stats.Graded++
			sumReward += it.Reward
		} else {
			stats.Ungraded++
		}
		items[i] = it
	}
	stats.Trajectories, stats.Executed = len(ts), nEnv
	if nEnv > 0 {
		stats.MeanEnv = sumEnv / float64(nEnv)
	}
	if nWM > 0 {
		stats.MeanWM = sumWM / float64(nWM)
	}
	if stats.Graded > 0 {
		stats.MeanReward = sumReward / float64(stats.Graded)
	}

	// The trajectories of each group, as index ranges of ts.
	type span struct{ group, lo, hi int }
	var groups []span
	for i, t := range ts {
		if len(groups) == 0 || groups[len(groups)-1].group != t.Group {
			groups = append(groups, span{t.Group, i, i})
		}
		groups[len(groups)-1].hi = i + 1
	}

	if pc.Denoise {
		for _, g := range groups {
			if !isAnchor(g.group) {
				continue
			}
			var d, y []float64
			for _, t := range ts[g.lo:g.hi] {
				if t.Exec != nil && t.WMScore != nil {
					d = append(d, wmOf(t))
					y = append(y, t.Exec.Score)
				}
			}
			if len(d) >= 2 && st.Observe(dcfg, d, y) {
				stats.S2Groups++
			}
		}
	}
	rho := 1.0
	if pc.Denoise {
		rho = st.Rho(dcfg)
	}

	for _, g := range groups {
		rewards := make([]float64, g.hi-g.lo)
		graded := make([]bool, g.hi-g.lo)
		for j := range rewards {
			rewards[j], graded[j] = items[g.lo+j].Reward, items[g.lo+j].Graded
		}
		adv, ok := advantage.Group(rewards, graded, acfg)
		if !ok {
			stats.SkippedGroups++
		}
		for j, v := range adv {
			items[g.lo+j].Advantage = v
		}
	}

	var gradedIdx []int
	var flags []bool
	for i, it := range items {
		if it.Graded {
			gradedIdx = append(gradedIdx, i)
			flags = append(flags, it.Anchor)
		}
	}
	if len(gradedIdx) > 0 {
		w := advantage.Weights(flags, rho)
		for k, i := range gradedIdx {
			items[i].Weight = w[k]
		}
		stats.AnchorShare = advantage.AnchorShare(flags, rho)
	}
	return Batch{Mode: md, Rho: rho, Items: items}, st, stats
}
