package fusion

import (
	"fmt"
	"slices"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/program"
)

// Trajectory is what Step reads of one trajectory of a step.
type Trajectory struct {
	Group   int
	Sample  int
	TaskID  string
	Program string
	// WM is r_wm, nil when the world model has not scored it.
	WM *float64
	// Env is r_env, nil when it has no execution result.
	Env *float64
	// Known is the run's real score of the same program on the same task
	// at an earlier step (Memory.Fill; denoise.Config.Memory), nil when
	// there is none or memory is off. Where set, Step reads it instead of
	// the calibrated world-model score.
	Known *float64
}

// Stats summarises a fused batch.
type Stats struct {
	Trajectories int `json:"trajectories"`
	Executed     int `json:"executed"`
	Graded       int `json:"graded"`
	Ungraded     int `json:"ungraded"`
	// Excluded counts the trajectories left out of the update by the mode
	// (the non-anchor groups in anchor): neither scored nor ungraded.
	Excluded      int     `json:"excluded,omitempty"`
	SkippedGroups int     `json:"skipped_groups"`
	S2Groups      int     `json:"s2_groups"` // anchor groups pushed into the denoiser
	MeanReward    float64 `json:"mean_reward"`
	MeanEnv       float64 `json:"mean_env"`
	MeanWM        float64 `json:"mean_wm"`
	AnchorShare   float64 `json:"anchor_share"`
	// Gate is the signal gate's decision (denoise.Gate) in a mode that
	// denoises with a gate (denoise.Config.SignalWindow > 0); nil otherwise.
	Gate *denoise.Gate `json:"gate,omitempty"`
	// Remembered counts the trajectories whose world-model score Step
	// read from an earlier execution (Trajectory.Known): the rewards of
	// world-model trajectories, and the denoiser's and the control's
	// scores of anchor trajectories that have their own execution (the
	// only anchors those read). Left out of the JSON when 0.
	Remembered int `json:"remembered,omitempty"`
	// Scoring is selective scoring's decision (StepSelective with a
	// Selection): how many world-model groups kept their scores in the
	// update and how many were left out. Nil without selective scoring.
	Scoring *Scoring `json:"scoring,omitempty"`
}

// Scoring is selective scoring's decision as the update saw it
// (anchors.Scoring).
type Scoring = anchors.Scoring

// Selection is selective scoring's decision for a step (anchors.Selective):
// the groups whose world-model uncertainty is above Cut, ascending. Those of
// them that are world-model groups (not anchors, not left out by the mode)
// keep their reward and advantage but get weight 0, as under a closed gate;
// an anchor group among them is trained on its real scores as always.
type Selection struct {
	LeftOut []int   `json:"left_out"`
	Cut     float64 `json:"cut"`
	// MaxRatio is the largest u_g/σ0 of the world-model groups
	// (anchors.MaxRatio), carried into Stats.Scoring.
	MaxRatio float64 `json:"max_ratio,omitempty"`
}

// BatchItem is one trajectory of a fused batch: its training reward, its
// GRPO advantage and its normalised fusion weight w_i/Σw, so that the update
// direction is Σ Weight·Advantage·∇log π.
type BatchItem struct {
	Group   int    `json:"group"`
	Sample  int    `json:"sample"`
	TaskID  string `json:"task_id"`
	Program string `json:"program"`
	Anchor  bool   `json:"anchor"` // scored by real execution and weighted by ρ
	Graded  bool   `json:"graded"`
	// Excluded: the mode leaves the trajectory out (a non-anchor group in
	// anchor); it has no reward, advantage or weight.
	Excluded  bool    `json:"excluded,omitempty"`
	Reward    float64 `json:"reward"`
	Advantage float64 `json:"advantage"`
	Weight    float64 `json:"weight"`
	// Under the difference estimator (denoise.EstimatorDifference)
	// Advantage and Weight are what the update uses, and these say where
	// they come from: GroupAdvantage is the trajectory's GRPO advantage
	// (A, of its training reward), Control, on an anchor trajectory, the
	// GRPO advantage of its calibrated world-model score within its group
	// (Â). Both 0 and left out of the JSON under the fused estimator.
	GroupAdvantage float64 `json:"group_advantage,omitempty"`
	Control        float64 `json:"control,omitempty"`
}

// Batch is the fused batch of a step, stored in the data directory for
// Update and `wmrl inspect`.
type Batch struct {
	Run  string    `json:"run"`
	Step int       `json:"step"`
	Mode mode.Mode `json:"mode"`
	Rho  float64   `json:"rho"`
	// Gate is the signal gate's decision (Stats.Gate): when it is closed
	// the world-model trajectories have weight 0.
	Gate  *denoise.Gate `json:"gate,omitempty"`
	Items []BatchItem   `json:"items"`
}

// Step computes the fused batch of a step. ts are the step's trajectories
// in (group, sample) order, anchors the anchor groups (ascending), m the
// step's map (ignored unless the mode debiases), st the denoiser's state
// before the step. It returns the batch (without Run and Step), the
// denoiser's state after the step and a summary. Ungraded trajectories (no
// execution result where one is needed) get advantage 0 and weight 0: they
// are excluded, never scored 0. In a mode that trains on its anchor groups
// only, the other groups' trajectories are excluded the same way, marked
// Excluded and counted apart (not ungraded, not skipped groups); the anchor
// groups' advantages and weights are then those of GRPO on them alone.
func Step(ts []Trajectory, md mode.Mode, anchors []int, m isotonic.Map, st denoise.State,
	dcfg denoise.Config, acfg advantage.Config) (Batch, denoise.State, Stats) {
	return StepWeighted(ts, md, anchors, nil, m, st, dcfg, acfg)
}

// StepWeighted is Step with the anchor groups' weights (weights[i] of
// anchors[i]; nil for all 1), as active anchor selection gives them: each
// anchor group's s² enters the denoiser with its weight
// (denoise.State.PushWeighted). The rewards, advantages and gradient
// weights do not depend on them. It panics when weights is neither nil nor
// as long as anchors.
func StepWeighted(ts []Trajectory, md mode.Mode, anchors []int, weights []float64, m isotonic.Map, st denoise.State,
	dcfg denoise.Config, acfg advantage.Config) (Batch, denoise.State, Stats) {
	return StepSelective(ts, md, anchors, weights, nil, m, st, dcfg, acfg)
}

// StepSelective is StepWeighted with selective scoring's decision sel (nil:
// none, StepWeighted): the world-model groups in sel.LeftOut get weight 0,
// the other trajectories the weights they would have had among themselves,
// and Stats.Scoring counts the world-model groups scored in and left out.
// Rewards, advantages, the denoiser and the gate do not depend on sel. It
// panics when sel.LeftOut is not ascending.
func StepSelective(ts []Trajectory, md mode.Mode, anchors []int, weights []float64, sel *Selection, m isotonic.Map,
	st denoise.State, dcfg denoise.Config, acfg advantage.Config) (Batch, denoise.State, Stats) {
	if sel != nil && !slices.IsSorted(sel.LeftOut) {
		panic(fmt.Sprintf("fusion: left-out groups %v not ascending", sel.LeftOut))
	}
	if weights != nil && len(weights) != len(anchors) {
		panic(fmt.Sprintf("fusion: %d anchor weights for %d anchor groups", len(weights), len(anchors)))
	}
	weightOf := func(g int) float64 {
		if i, ok := slices.BinarySearch(anchors, g); ok && weights != nil {
			return weights[i]
		}
		return 1
	}
	pc := md.Pieces()
	isAnchor := func(g int) bool {
		_, ok := slices.BinarySearch(anchors, g)
		return pc.Anchors && ok
	}
	excluded := func(g int) bool { return pc.AnchorsOnly && !isAnchor(g) }
	// A world-model group is trained on r_wm: neither an anchor, nor
	// executed in full, nor excluded by the mode.
	wmGroup := func(g int) bool { return !pc.ExecuteAll && !isAnchor(g) && !excluded(g) }
	leftOut := func(g int) bool {
		if sel == nil || !wmGroup(g) {
			return false
		}
		_, ok := slices.BinarySearch(sel.LeftOut, g)
		return ok
	}
	// scored: the trajectory has a world-model score, its own or an
	// earlier execution's (Known).
	scored := func(t Trajectory) bool { return t.WM != nil || t.Known != nil }
	wmOf := func(t Trajectory) float64 {
		if t.Known != nil {
			return *t.Known
		}
		if pc.Debias {
			return m.Apply(*t.WM)
		}
		return *t.WM
	}
	var stats Stats
	items := make([]BatchItem, len(ts))
	var nEnv, nWM int
	var sumEnv, sumWM, sumReward float64
	for i, t := range ts {
		it := BatchItem{Group: t.Group, Sample: t.Sample, TaskID: t.TaskID, Program: t.Program, Anchor: isAnchor(t.Group)}
		if excluded(t.Group) {
			it.Excluded = true
			stats.Excluded++
			items[i] = it
			continue
		}
		if t.Env != nil {
			nEnv++
			sumEnv += *t.Env
		}
		if t.WM != nil {
			nWM++
			sumWM += *t.WM
		}
		// A remembered score counts where the update reads it: a
		// world-model trajectory's reward, or an anchor's d beside its
		// own execution (an anchor without one reads neither).
		if t.Known != nil && !pc.ExecuteAll && (!it.Anchor || t.Env != nil) {
			stats.Remembered++
		}
		switch {
		case pc.ExecuteAll || it.Anchor:
			if t.Env != nil {
				it.Graded, it.Reward = true, *t.Env
			}
		case scored(t):
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
				if t.Env != nil && scored(t) {
					d = append(d, wmOf(t))
					y = append(y, *t.Env)
				}
			}
			if len(d) >= 2 && st.ObserveWeighted(dcfg, d, y, weightOf(g.group)) {
				stats.S2Groups++
			}
			if len(d) >= 2 {
				st.ObserveSignal(dcfg, d, y, weightOf(g.group))
			}
		}
	}
	rho := 1.0
	if pc.Denoise {
		rho = st.Rho(dcfg)
		if dcfg.SignalWindow > 0 {
			g := st.Gate(dcfg)
			stats.Gate = &g
		}
	}
	// A closed gate leaves the world-model trajectories out of the update:
	// the step is GRPO on its anchor groups alone.
	closed := stats.Gate != nil && !stats.Gate.Open
	if sel != nil {
		sc := Scoring{Cut: sel.Cut, MaxRatio: sel.MaxRatio}
		for _, g := range groups {
			switch {
			case leftOut(g.group):
				sc.LeftOut++
			case wmGroup(g.group):
				sc.Scored++
			}
		}
		stats.Scoring = &sc
	}

	for _, g := range groups {
		if excluded(g.group) {
			continue
		}
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
		if it.Graded && (!closed || it.Anchor) && !leftOut(it.Group) {
			gradedIdx = append(gradedIdx, i)
			flags = append(flags, it.Anchor)
		}
	}
	if len(gradedIdx) > 0 {
		if pc.Denoise {
			k := 0
			for _, a := range flags {
				if a {
					k++
				}
			}
			rho = denoise.EffectiveRho(dcfg, rho, k, len(flags)-k)
		}
		w := advantage.Weights(flags, rho)
		for k, i := range gradedIdx {
			items[i].Weight = w[k]
		}
		stats.AnchorShare = advantage.AnchorShare(flags, rho)
	}
	if pc.Denoise && dcfg.Estimator == denoise.EstimatorDifference {
		// The world-model advantages Â of each anchor group, over its
		// trajectories with both scores (0 elsewhere).
		control := make([]float64, len(items))
		for _, g := range groups {
			if !isAnchor(g.group) {
				continue
			}
			d := make([]float64, g.hi-g.lo)
			both := make([]bool, g.hi-g.lo)
			for j, t := range ts[g.lo:g.hi] {
				if items[g.lo+j].Graded && scored(t) {
					d[j], both[j] = wmOf(t), true
				}
			}
			adv, _ := advantage.Group(d, both, acfg)
			copy(control[g.lo:g.hi], adv)
		}
		var g denoise.Gate // no window: λ = 0 (runconfig refuses the case)
		if stats.Gate != nil {
			g = *stats.Gate
		}
		lam := difference(items, gradedIdx, control, weightOf, g)
		g.Lambda = &lam
		stats.Gate = &g
		stats.AnchorShare = 0
		if len(gradedIdx) > 0 {
			stats.AnchorShare = 1 / (1 + lam)
		}
	}
	return Batch{Mode: md, Rho: rho, Gate: stats.Gate, Items: items}, st, stats
}

// difference sets the difference estimator's weights and advantages
// (denoise.EstimatorDifference) on the items of idx, the trajectories the
// update trains on, and returns λ (denoise.Lambda of the gate g). control
// holds each anchor trajectory's world-model advantage Â, groupWeight an
// anchor group's design weight (1, or active selection's). With ω_i the
// anchor trajectories' design shares (summing to 1) and m world-model
// trajectories, the update Σ Weight·Advantage·∇log π is
//
//	Σ_anchor ω_i·(A_i − λ·Â_i)·∇_i + (λ/m)·Σ_wm Â_j·∇_j
//
// with weights ω_i/(1+λ) and λ/(m(1+λ)), summing to 1, and advantages
// scaled by 1+λ. At λ = 0 the world-model trajectories get weight 0 and
// the anchors their GRPO advantages at equal weights: the anchor control.
func difference(items []BatchItem, idx []int, control []float64, groupWeight func(int) float64, g denoise.Gate) float64 {
	var n, m int
	var sumW float64
	for _, i := range idx {
		if items[i].Anchor {
			n++
			sumW += groupWeight(items[i].Group)
		} else {
			m++
		}
	}
	lam := denoise.Lambda(g, n, m)
	for _, i := range idx {
		it := &items[i]
		a := it.Advantage
		it.GroupAdvantage = a
		if it.Anchor {
			it.Control = control[i]
			it.Weight = groupWeight(it.Group) / sumW / (1 + lam)
			it.Advantage = (1 + lam) * (a - lam*control[i])
			continue
		}
		it.Weight = 0
		if lam > 0 {
			it.Weight = lam / float64(m) / (1 + lam)
			it.Advantage = (1 + lam) * a
		}
	}
	return lam
}

// Examples turns a fused batch into the policy's update examples, in batch
// order; card returns a task's card vector. Items of weight 0 (ungraded)
// are left out. When nothing in the step was graded every item the mode did
// not exclude enters with advantage 0 and weight 1: a zero-gradient step
// that still advances the policy's step. The tokens are those of each
// program's canonical text.
func Examples(b Batch, card func(taskID string) ([]float64, error)) ([]policy.Example, error) {
	var total float64
	for _, it := range b.Items {
		total += it.Weight
	}
	var out []policy.Example
	for _, it := range b.Items {
		w, adv := it.Weight, it.Advantage
		if total == 0 && !it.Excluded {
			w, adv = 1, 0
		}
		if w == 0 {
			continue
		}
		c, err := card(it.TaskID)
		if err != nil {
			return nil, err
		}
		prog, err := program.Parse(it.Program)
		if err != nil {
			return nil, fmt.Errorf("group %d sample %d: %w", it.Group, it.Sample, err)
		}
		tokens, err := program.Encode(prog)
		if err != nil {
			return nil, fmt.Errorf("group %d sample %d: %w", it.Group, it.Sample, err)
		}
		out = append(out, policy.Example{Card: c, Tokens: tokens, Advantage: adv, Weight: w})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("step %d of %s has an empty batch", b.Step, b.Run)
	}
	return out, nil
}
