package denoise

import (
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/fielderr"
)

// MinVarY is the population variance of the real scores below which a group
// is degenerate and skipped.
const MinVarY = 1e-9

// CalFloor is the smallest η̂²_cal ever used as a denominator, whatever
// Config.Eta2Floor says: a numerical guard that keeps ρ finite when the
// world model agreed exactly with every warm-up group (η̂²_cal = 0).
const CalFloor = 1e-12

// DefaultEta2Floor is the default Config.Eta2Floor (runconfig.Default):
// ρ treats a warm-up disagreement below 1% of the real scores' within-group
// variance as 1%.
//
// s² is a normalised residual variance: 0 when the world model reproduces
// a group's deviations exactly, 1 for a constant world model, about 2 for
// one independent of the real scores with the same spread. 0.01 is the
// level where the world model explains 99% of the within-group variance;
// scores with a residual standard deviation of 3% of the reward range give
// about 0.02 in groups of 8. Below it the warm-up says "as good as we can
// tell", and the floor keeps ρ from reading a later, still tiny,
// disagreement as a collapse: with the floor, ρ = 2 when η̂² reaches 0.01
// and ρ_max = 10 when it reaches 0.09, instead of ρ_max after any
// disagreement at all.
const DefaultEta2Floor = 0.01

// GroupS2 returns the relative disagreement s² of one anchor group with
// calibrated world-model scores d and real scores y:
//
//	s² = mean(((d − mean d) − (y − mean y))²) / var(y)
//
// with population variance. ok is false, and the group must be skipped,
// when it has fewer than two trajectories, when var(y) < MinVarY, or when a
// score is not finite. It panics when d and y differ in length.
func GroupS2(d, y []float64) (s2 float64, ok bool) {
	md, my, ok := groupMeans("GroupS2", d, y)
	if !ok {
		return 0, false
	}
	n := len(y)
	var vy, diff float64
	for i := range y {
		cy := y[i] - my
		e := (d[i] - md) - cy
		vy += cy * cy
		diff += e * e
	}
	vy /= float64(n)
	if vy < MinVarY {
		return 0, false
	}
	return diff / float64(n) / vy, true
}

// groupMeans returns the means of one group's world-model scores d and real
// scores y; ok is false when the group has fewer than two trajectories or a
// score is not finite. It panics, naming fn, when d and y differ in length.
func groupMeans(fn string, d, y []float64) (md, my float64, ok bool) {
	if len(d) != len(y) {
		panic(fmt.Sprintf("denoise: %s length mismatch: %d world-model scores, %d real scores", fn, len(d), len(y)))
	}
	n := len(y)
	if n < 2 {
		return 0, 0, false
	}
	for i := range y {
		if !finite(d[i]) || !finite(y[i]) {
			return 0, 0, false
		}
		md += d[i]
		my += y[i]
	}
	return md / float64(n), my / float64(n), true
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Config holds the denoiser's settings.
type Config struct {
	// HalfLife of the moving average of s², in groups: a group's weight
	// halves after HalfLife more groups. Must be positive.
	HalfLife float64 `json:"half_life"`
	// WarmUp is the number of (non-degenerate) groups pushed before η̂²_cal
	// is frozen. Must be at least 1.
	WarmUp int `json:"warm_up"`
	// RhoMax caps ρ; 0 means no cap, otherwise it must be at least 1.
	RhoMax float64 `json:"rho_max"`
	// Eta2Floor is the smallest η̂²_cal ρ divides by (DefaultEta2Floor in
	// runconfig.Default): a world model that agreed (nearly) exactly with
	// the warm-up groups is taken to be as noisy as the floor, not
	// infinitely precise. 0 means no floor but CalFloor, the behaviour
	// before the field existed, so it is left out of the JSON when 0.
	Eta2Floor float64 `json:"eta2_floor,omitempty"`
	// SignalWindow is the number of recent anchor groups the signal gate
	// tests (gate.go; DefaultSignalWindow in new runs). 0 means no gate,
	// the behaviour before the field existed, so it is left out of the
	// JSON when 0.
	SignalWindow int `json:"signal_window,omitempty"`
	// WMShareMax caps the world-model trajectories' share of a step's
	// fusion weight (in (0,1); 0 means no cap, the behaviour before the
	// field existed, so it is left out of the JSON when 0). The cap acts
	// as a floor on ρ (EffectiveRho).
	WMShareMax float64 `json:"wm_share_max,omitempty"`
	// Estimator is how the fused update combines the two streams:
	// EstimatorFused ("", the paper's: ρ against 1) or EstimatorDifference
	// (the anchors' real advantages plus λ times the world-model stream's
	// difference from its own scores on the anchors; estimator.go). Left
	// out of the JSON when "", the behaviour before the field existed.
	Estimator string `json:"estimator,omitempty"`
	// Memory gives a world-model-scored trajectory whose task and
	// program the run executed at an earlier step that execution's real
	// score (the mean of them) in place of its calibrated world-model
	// score, anchors included (memory.go). Left out of the JSON when
	// false, the behaviour before the field existed.
	Memory bool `json:"memory,omitempty"`
}

// EffectiveRho returns rho raised, when cfg.WMShareMax caps it, to the
// smallest value at which k anchor trajectories of weight ρ and m
// world-model trajectories of weight 1 give the world model at most
// WMShareMax of the total: m/(kρ+m) <= s, so ρ >= (m/k)(1−s)/s.
func EffectiveRho(cfg Config, rho float64, k, m int) float64 {
	s := cfg.WMShareMax
	if s <= 0 || k == 0 || m == 0 {
		return rho
	}
	return math.Max(rho, float64(m)/float64(k)*(1-s)/s)
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if !finite(c.HalfLife) || c.HalfLife <= 0 {
		return fielderr.New("half_life", "%v, want a positive number of groups", c.HalfLife)
	}
	if c.WarmUp < 1 {
		return fielderr.New("warm_up", "%d, want at least 1 group", c.WarmUp)
	}
	if math.IsNaN(c.RhoMax) || (c.RhoMax != 0 && c.RhoMax < 1) {
		return fielderr.New("rho_max", "%v, want 0 (no cap) or at least 1", c.RhoMax)
	}
	if !finite(c.Eta2Floor) || c.Eta2Floor < 0 {
		return fielderr.New("eta2_floor", "%v, want a finite number at least 0 (0: no floor)", c.Eta2Floor)
	}
	if !finite(c.WMShareMax) || c.WMShareMax < 0 || c.WMShareMax >= 1 {
		return fielderr.New("wm_share_max", "%v, want 0 (no cap) or a share in (0,1)", c.WMShareMax)
	}
	switch c.Estimator {
	case EstimatorFused, "fused":
	case EstimatorDifference:
		if c.SignalWindow == 0 {
			return fielderr.New("estimator", "%q needs the signal gate's window (signal_window > 0): λ is read from it", c.Estimator)
		}
	default:
		return fielderr.New("estimator", "%q, want %q (the paper's fused weights) or %q", c.Estimator, "fused", EstimatorDifference)
	}
	if c.SignalWindow != 0 && (c.SignalWindow < MinSignalGroups || c.SignalWindow > MaxSignalWindow) {
		return fielderr.New("signal_window", "%d, want 0 (no gate) or %d to %d groups", c.SignalWindow, MinSignalGroups, MaxSignalWindow)
	}
	return nil
}

// Alpha is the moving-average weight of a new s², 1 − 2^(−1/HalfLife).
func (c Config) Alpha() float64 {
	return -math.Expm1(-math.Ln2 / c.HalfLife)
}

// State is the denoiser's running state, carried by the run workflow and
// stored with each step.
type State struct {
	// Eta2 is η̂², the moving average of the pushed s² values.
	Eta2 float64 `json:"eta2"`
	// Groups counts the pushed (non-degenerate) groups.
	Groups int `json:"groups"`
	// Eta2Cal is η̂²_cal, frozen once Groups reaches the warm-up.
	Eta2Cal float64 `json:"eta2_cal"`
	// Calibrated is true once Eta2Cal is frozen.
	Calibrated bool `json:"calibrated"`
	// Signal is the signal gate's window: the last SignalWindow anchor
	// groups' correlations, oldest first (empty without a gate).
	Signal []Signal `json:"signal,omitempty"`
}

// Push adds the s² of one non-degenerate group (see GroupS2). The first value
// initialises η̂²; later ones update it by η̂² ← (1−α)·η̂² + α·s². When the
// number of pushed groups reaches cfg.WarmUp, η̂²_cal is frozen to η̂², once.
// It panics on a negative or non-finite s² or an invalid cfg, which are
// caller bugs: GroupS2 never returns them with ok true, and configurations
// are validated where they are read.
func (s *State) Push(cfg Config, s2 float64) {
	if err := cfg.Validate(); err != nil {
		panic("denoise: Push with invalid config: " + err.Error())
	}
	if !finite(s2) || s2 < 0 {
		panic(fmt.Sprintf("denoise: Push(%v): s² must be finite and non-negative", s2))
	}
	if s.Groups == 0 {
		s.Eta2 = s2
	} else {
		a := cfg.Alpha()
		s.Eta2 = (1-a)*s.Eta2 + a*s2
	}
	s.Groups++
	if !s.Calibrated && s.Groups >= cfg.WarmUp {
		s.Eta2Cal = s.Eta2
		s.Calibrated = true
	}
}

// Observe computes GroupS2(d, y) and pushes it when the group is not
// degenerate. It reports whether the group was pushed.
func (s *State) Observe(cfg Config, d, y []float64) bool {
	s2, ok := GroupS2(d, y)
	if ok {
		s.Push(cfg, s2)
	}
	return ok
}

// PushWeighted adds the s² of a group of weight w > 0 (1/π of an anchor
// group chosen by active selection, scaled so that uniform selection gives
// 1): the group counts as w groups of the same s², so the moving average
// moves by α_w = 1 − (1−α)^w instead of α,
//
//	η̂² ← (1−α)^w·η̂² + (1 − (1−α)^w)·s²,
//
// which is Push when w = 1 and, for an integer w, Push of s² w times. The
// average is then a discounted weighted mean of the pushed s², each
// weighted by its w: over the groups of a step, a ratio estimate of the
// mean s² of all the step's groups, not of the anchors chosen more often.
// The warm-up still counts groups. It panics on a weight that is not
// finite and positive, and as Push does.
func (s *State) PushWeighted(cfg Config, s2, w float64) {
	if !finite(w) || w <= 0 {
		panic(fmt.Sprintf("denoise: PushWeighted weight %v: must be finite and positive", w))
	}
	if w == 1 {
		s.Push(cfg, s2)
		return
	}
	if err := cfg.Validate(); err != nil {
		panic("denoise: Push with invalid config: " + err.Error())
	}
	if !finite(s2) || s2 < 0 {
		panic(fmt.Sprintf("denoise: Push(%v): s² must be finite and non-negative", s2))
	}
	if s.Groups == 0 {
		s.Eta2 = s2
	} else {
		keep := math.Exp(w * math.Log1p(-cfg.Alpha()))
		s.Eta2 = keep*s.Eta2 + (1-keep)*s2
	}
	s.Groups++
	if !s.Calibrated && s.Groups >= cfg.WarmUp {
		s.Eta2Cal = s.Eta2
		s.Calibrated = true
	}
}

// ObserveWeighted is Observe for a group of weight w (PushWeighted).
func (s *State) ObserveWeighted(cfg Config, d, y []float64, w float64) bool {
	s2, ok := GroupS2(d, y)
	if ok {
		s.PushWeighted(cfg, s2, w)
	}
	return ok
}

// Rho returns the anchor weight ρ: exactly 1 before warm-up, then
// 1 + η̂²/max(η̂²_cal, cfg.Eta2Floor, CalFloor), capped at cfg.RhoMax when
// that is set. It is never below 1. The state keeps η̂²_cal as measured; the
// floor applies only here.
func (s State) Rho(cfg Config) float64 {
	if !s.Calibrated {
		return 1
	}
	rho := 1 + s.Eta2/max(s.Eta2Cal, cfg.Eta2Floor, CalFloor)
	if cfg.RhoMax > 0 && rho > cfg.RhoMax {
		rho = cfg.RhoMax
	}
	return max(rho, 1)
}
