// Package runreport is wmrl report: one run's curves by step (training
// reward, held-out score, ρ, the calibration bias before and after the map,
// training executions and their sandbox CPU seconds) and the isotonic maps
// of its debiaser at a few steps, and for a multi-turn run the reward by
// turn index and the share of trajectories that improved after their first
// turn, read from Postgres and written as one
// self-contained HTML page.
//
// Collect reads the run's rows: its completed steps as package collect
// reads them for wmrl bench reproduce (metrics, executions and CPU counted
// from the trajectories, the held-out evaluation of the checkpoint each step
// produced) and its stored calibration maps. Write renders them with
// html/template; the plots are drawn by reproduce.DrawLines, as wmrl bench
// reproduce draws its own, and embedded as inline SVG, so the page needs no
// other file. The same rows always give the same page.
package runreport

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/reproduce/collect"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
)

// DefaultMaps is how many calibration maps a report draws by default.
const DefaultMaps = 4

// Reader is the part of the store Collect reads.
type Reader interface {
	collect.Reader
	Calibrations(ctx context.Context, run string) ([]store.Calibration, error)
	TurnsByIndex(ctx context.Context, run string, step int) ([]store.TurnIndexStats, error)
	TurnImprovements(ctx context.Context, run string, step int) ([]store.TurnImprovement, error)
}

var _ Reader = (*store.Store)(nil)

// Step is one completed step of the run.
type Step struct {
	Step int `json:"step"`
	// Groups and AnchorGroups count the step's groups and anchor groups.
	Groups       int `json:"groups"`
	AnchorGroups int `json:"anchor_groups"`
	// MeanReward is the mean training reward, MeanEnv the mean real score
	// of the executed trajectories, MeanWM the mean raw world-model score
	// (metrics.Step).
	MeanReward float64 `json:"mean_reward"`
	MeanEnv    float64 `json:"mean_env"`
	MeanWM     float64 `json:"mean_wm"`
	// HeldOut is the held-out score of the checkpoint the step produced
	// (version Step+1), when it was evaluated.
	HeldOut *float64 `json:"heldout_score"`
	Rho     float64  `json:"rho"`
	// Gate is the no-harm signal gate's decision (metrics.Step.Gate), nil
	// in modes and runs without one.
	Gate *denoise.Gate `json:"gate,omitempty"`
	// Scoring is selective scoring's decision (metrics.Step.Scoring), nil
	// in runs without it.
	Scoring *anchors.Scoring `json:"scoring,omitempty"`
	// BiasBefore and BiasAfter are the calibration window's mean bias
	// (r_wm − r_env) before and after the step's map; CalibrationPairs the
	// window's size.
	BiasBefore       float64 `json:"bias_before"`
	BiasAfter        float64 `json:"bias_after"`
	CalibrationPairs int     `json:"calibration_pairs"`
	// Executions counts the training trajectories really executed,
	// CPUSeconds their sandbox CPU seconds; WMCalls the trajectories the
	// world model scored.
	Executions int     `json:"executions"`
	CPUSeconds float64 `json:"cpu_seconds"`
	WMCalls    int     `json:"wm_calls"`
	// Stages are the step's stage wall seconds and their overlap with
	// the other completed steps' stages (stepsummary.Overlap); empty for
	// a step recorded without stage times.
	Stages []stepsummary.StageTime `json:"stages,omitempty"`
}

// Data is what a report shows.
type Data struct {
	Run store.Run `json:"run"`
	// Steps are the completed steps, in order.
	Steps []Step `json:"steps"`
	// Maps are the calibration maps drawn: at most the number asked for,
	// spread over the completed steps whose map is not the identity, in
	// step order.
	Maps []store.Calibration `json:"maps"`
	// Fitted counts the completed steps whose map is not the identity;
	// Identity those whose stored map is the identity (too few pairs).
	Fitted   int `json:"fitted_maps"`
	Identity int `json:"identity_maps"`
	// Turns is the turns of a multi-turn run's completed steps
	// (trajectory.turns > 1); nil for a single-shot run.
	Turns *Turns `json:"turns,omitempty"`
}

// Turns summarises the turns of a multi-turn run's completed steps, by
// source (real: the executed groups; world_model: the others).
type Turns struct {
	// K is the largest turn index stored.
	K int `json:"turns"`
	// ByIndex is the reward by turn index and source, in (turn, source)
	// order.
	ByIndex []store.TurnIndexStats `json:"by_index"`
	// Improved counts, by source, the trajectories whose best reward after
	// their first turn is above their first turn's.
	Improved []store.TurnImprovement `json:"improved"`
}

// Share is Improved/Compared of a source's trajectories (0 when none were
// compared).
func Share(x store.TurnImprovement) float64 {
	if x.Compared == 0 {
		return 0
	}
	return float64(x.Improved) / float64(x.Compared)
}

// Collect reads run id's report: its completed steps (a run in progress is
// read as far as it got) and up to maxMaps of its calibration maps. An
// unknown run is an error wrapping store.ErrNotFound.
func Collect(ctx context.Context, r Reader, id string, maxMaps int) (Data, error) {
	if maxMaps < 0 {
		return Data{}, fmt.Errorf("report %s: %d maps, want 0 or more", id, maxMaps)
	}
	rec, run, err := collect.Run(ctx, r, id)
	if err != nil {
		return Data{}, fmt.Errorf("report %s: %w", id, err)
	}
	// collect.Run keeps the metrics it needs; the rewards and the window
	// size come from the same rows, read again. A step that completed in
	// between is not in rec and is left out.
	rows, err := r.Steps(ctx, id)
	if err != nil {
		return Data{}, fmt.Errorf("report %s: %w", id, err)
	}
	byStep := make(map[int]store.Step, len(rows))
	for _, s := range rows {
		byStep[s.Step] = s
	}
	d := Data{Run: run, Steps: make([]Step, 0, len(rec.Steps))}
	done := make(map[int]bool, len(rec.Steps))
	stages := make([]stepsummary.Stages, len(rec.Steps))
	for i, s := range rec.Steps {
		stages[i] = byStep[s.Step].Metrics.Stages
	}
	for i, s := range rec.Steps {
		m := byStep[s.Step].Metrics
		d.Steps = append(d.Steps, Step{
			Step: s.Step, Groups: s.Groups, AnchorGroups: s.AnchorGroups,
			MeanReward: m.MeanReward, MeanEnv: m.MeanEnv, MeanWM: m.MeanWM, HeldOut: s.HeldOut,
			Rho: s.Rho, BiasBefore: s.BiasBefore, BiasAfter: s.BiasAfter, CalibrationPairs: m.CalibrationPairs,
			Executions: s.Executions, CPUSeconds: s.CPUSeconds, WMCalls: s.WMCalls, Gate: m.Gate, Scoring: m.Scoring,
			Stages: stepsummary.Overlap(stages, i),
		})
		done[s.Step] = true
	}
	cals, err := r.Calibrations(ctx, id)
	if err != nil {
		return Data{}, fmt.Errorf("report %s: %w", id, err)
	}
	var fitted []store.Calibration
	for _, c := range cals {
		switch {
		case !done[c.Step]:
		case c.Map.Identity():
			d.Identity++
		default:
			fitted = append(fitted, c)
		}
	}
	byIndex, err := r.TurnsByIndex(ctx, id, -1)
	if err != nil {
		return Data{}, fmt.Errorf("report %s: %w", id, err)
	}
	if len(byIndex) > 0 {
		d.Turns = &Turns{ByIndex: byIndex}
		for _, x := range byIndex {
			d.Turns.K = max(d.Turns.K, x.Turn)
		}
		if d.Turns.Improved, err = r.TurnImprovements(ctx, id, -1); err != nil {
			return Data{}, fmt.Errorf("report %s: %w", id, err)
		}
	}
	d.Fitted = len(fitted)
	d.Maps = []store.Calibration{}
	for _, i := range spread(len(fitted), maxMaps) {
		d.Maps = append(d.Maps, fitted[i])
	}
	return d, nil
}

// spread returns k indices of 0..n-1 (all when n <= k), evenly spread,
// the first and the last included, in increasing order.
func spread(n, k int) []int {
	if n <= k {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	switch k {
	case 0:
		return nil
	case 1:
		return []int{n - 1}
	}
	out := make([]int, k)
	for i := range out {
		// round(i·(n−1)/(k−1)), exactly, in integers; strictly
		// increasing since n > k.
		out[i] = (2*i*(n-1) + (k - 1)) / (2 * (k - 1))
	}
	return out
}
