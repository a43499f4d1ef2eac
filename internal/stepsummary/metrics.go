// Package stepsummary is the summary of a completed training step: one struct,
// Step, that the step workflow fills, the FinishStep activity stores in
// Postgres as its JSON (steps.metrics), and status, inspect, resume and the
// reproduction records read back.
//
// The JSON names are part of recorded workflow histories and of stored
// rows: they must not change. Rows written before Step was stored as itself
// hold a name → number object of the same names, which decodes into Step
// unchanged (names it lacks read as 0).
package stepsummary

import (
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/denoise"
)

// Step summarises a completed step. Everything except the CPU and wall
// seconds is a deterministic function of the run seed and the executions'
// results.
type Step struct {
	Groups       int `json:"groups"`
	Samples      int `json:"samples"`
	AnchorGroups int `json:"anchor_groups"`
	// AnchorFraction is the run's anchor fraction the step used (the
	// config's, or the last set-anchor-fraction's).
	AnchorFraction float64 `json:"anchor_fraction"`
	Trajectories   int     `json:"trajectories"`
	// Executed counts the training trajectories really executed (graded or
	// not); Ungraded those whose execution failed after every retry.
	Executed int `json:"executed"`
	Ungraded int `json:"ungraded"`
	// Unexecuted counts the turns of the executed groups' trajectories
	// that executed nothing (request_info and malformed turns, answered
	// without the grader: no execution, no CPU or wall seconds; workflow
	// change unexecuted-turns). 0, and left out of the JSON, in single-shot
	// steps and in steps recorded before, which counted them in Executed.
	Unexecuted int `json:"unexecuted,omitempty"`
	// Graded counts the trajectories with a training reward.
	Graded int `json:"graded"`
	// MeanReward is the mean training reward (r_env for executed
	// trajectories in grpo and anchor groups, r_wm, calibrated or not,
	// otherwise); MeanEnv the mean r_env of the executed trajectories;
	// MeanWM the mean raw r_wm of the scored ones.
	MeanReward float64 `json:"mean_reward"`
	MeanEnv    float64 `json:"mean_env"`
	MeanWM     float64 `json:"mean_wm"`
	// Rho is the anchor weight of the step; AnchorShare the fraction of the
	// update's weight on anchor trajectories.
	Rho         float64 `json:"rho"`
	AnchorShare float64 `json:"anchor_share"`
	// SkippedGroups had fewer than two graded trajectories.
	SkippedGroups int `json:"skipped_groups"`
	// CalibrationPairs is the size of the calibration window; BiasBefore and
	// BiasAfter its mean bias (r_wm − r_env) before and after the map.
	CalibrationPairs int     `json:"calibration_pairs"`
	BiasBefore       float64 `json:"bias_before"`
	BiasAfter        float64 `json:"bias_after"`
	// Objective, KL and GradNorm come from the policy update.
	Objective float64 `json:"objective"`
	KL        float64 `json:"kl"`
	GradNorm  float64 `json:"grad_norm"`
	// ImportanceRatioMean and ImportanceRatioMax are the update's
	// importance ratio exp(logp_update − logp_sample) over the action
	// tokens of its weighted trajectories, the policy's logprobs at the
	// update as the training service reported them (a Tinker backend's
	// loss_fn_outputs; backend.UpdateStats.RatioMean and RatioMax): 1 when
	// the update is on-policy. Absent (0) for a backend that reports none
	// (the built-in policy) and in steps recorded before they were.
	ImportanceRatioMean float64 `json:"importance_ratio_mean,omitempty"`
	ImportanceRatioMax  float64 `json:"importance_ratio_max,omitempty"`
	// CPUSeconds and WallSeconds sum the training executions' costs.
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	// GraderCapacity is what the grader said it takes at once at the
	// step's start (anchors.from_grader; 0 when not asked).
	GraderCapacity int `json:"grader_capacity,omitempty"`
	// Gate is the no-harm signal gate's decision (denoise.Gate): closed,
	// the world-model groups had weight 0 and the step trained on its
	// anchor groups alone. Nil in modes and runs without a gate.
	Gate *denoise.Gate `json:"gate,omitempty"`
	// Scoring is selective scoring's decision (anchors.selective): how
	// many world-model groups kept their scores in the update and how many
	// were left out (weight 0) as their task's uncertainty was above the
	// cut. Nil in runs without it.
	Scoring *anchors.Scoring `json:"scoring,omitempty"`
	// Remembered counts the trajectories whose world-model score the
	// update read from the run's earlier execution of the same program on
	// the same task (denoise.memory; fusion.Stats.Remembered). 0, and left
	// out of the JSON, in runs without it.
	Remembered int `json:"remembered,omitempty"`
	// Stages are the step's stage intervals (workflow change
	// stage-times): timings, like CPUSeconds, never an input of the
	// training. Left out of the JSON when not recorded.
	Stages Stages `json:"stages,omitzero"`
}

// Validate reports the first metric that is not a finite number (JSON, and
// so the store, cannot hold it), by its name.
func (m Step) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"anchor_fraction", m.AnchorFraction}, {"mean_reward", m.MeanReward}, {"mean_env", m.MeanEnv},
		{"mean_wm", m.MeanWM}, {"rho", m.Rho}, {"anchor_share", m.AnchorShare},
		{"bias_before", m.BiasBefore}, {"bias_after", m.BiasAfter}, {"objective", m.Objective},
		{"kl", m.KL}, {"grad_norm", m.GradNorm},
		{"importance_ratio_mean", m.ImportanceRatioMean}, {"importance_ratio_max", m.ImportanceRatioMax}, {"cpu_seconds", m.CPUSeconds}, {"wall_seconds", m.WallSeconds},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("metric %s is %v", f.name, f.v)
		}
	}
	if sc := m.Scoring; sc != nil {
		for name, v := range map[string]float64{"scoring.cut": sc.Cut, "scoring.max_ratio": sc.MaxRatio} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("metric %s is %v", name, v)
			}
		}
	}
	return nil
}
