package denoise

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// The signal gate: the no-harm fallback of the fused update.
//
// ρ weighs the anchor stream against the world-model stream on the premise
// that both estimate the same gradient, one with more noise than the
// other. Under GRPO's within-group standardisation the world-model stream's
// expected gradient is c·μ, where μ is the true gradient and c the
// within-group correlation of the calibrated world-model scores with the
// real scores: rescaled by 1/c it is unbiased with c⁻² times an anchor
// trajectory's variance, so inverse-variance weighting gives a world-model
// trajectory c times an anchor trajectory's weight — and no weight at all
// when c ≤ 0, where the stream is not a noisy estimate of μ but a bias away
// from it. No finite ρ expresses that. The gate tests the premise on the
// recent anchor groups: it keeps the last SignalWindow per-group
// correlations (Pearson, calibrated world-model scores against real
// scores, each group weighted as in the denoiser) and closes when the
// one-sided lower confidence bound of their mean, mean − t·SE at
// SignalLevel, is not above zero. A closed gate gives the world-model
// groups weight zero, so the step is GRPO on its anchor groups alone (the
// control); it opens again when the window's evidence returns.

// DefaultSignalWindow is the default Config.SignalWindow in new runs: 16
// anchor groups, 8 steps of the small preset's 2 anchor groups.
const DefaultSignalWindow = 16

// SignalLevel is the one-sided confidence level of the gate's test.
const SignalLevel = 0.95

// MinSignalGroups is the number of observed groups below which the window
// holds too little evidence to test: the gate stays open, as ρ stays 1
// before the warm-up.
const MinSignalGroups = 3

// Signal is one anchor group's evidence: the correlation R of its calibrated
// world-model scores with its real scores and the group's weight W.
type Signal struct {
	R float64 `json:"r"`
	W float64 `json:"w"`
}

// Gate is the gate's decision for a step.
type Gate struct {
	// Groups is the number of groups in the window (0 when the gate is off).
	Groups int `json:"groups"`
	// Mean is the window's weighted mean correlation, Low its one-sided
	// lower confidence bound (both 0 below MinSignalGroups groups).
	Mean float64 `json:"mean"`
	Low  float64 `json:"low"`
	// Open is true when the world-model groups keep their weight.
	Open bool `json:"open"`
	// Lambda is the difference estimator's λ for the step (Lambda), nil
	// under the fused estimator.
	Lambda *float64 `json:"lambda,omitempty"`
}

// String is the decision as the step line shows it.
func (g Gate) String() string {
	if g.Groups < MinSignalGroups {
		s := fmt.Sprintf("gate open (%d groups, too few to test)", g.Groups)
		if g.Lambda != nil {
			s += fmt.Sprintf(", difference λ %.2f", *g.Lambda)
		}
		return s
	}
	state := "open"
	if !g.Open {
		state = "closed: world model unweighted"
	}
	s := fmt.Sprintf("gate %s (signal %.2f, low %+.2f, %d groups)", state, g.Mean, g.Low, g.Groups)
	if g.Lambda != nil {
		s += fmt.Sprintf(", difference λ %.2f", *g.Lambda)
	}
	return s
}

// GroupCorrelation returns the Pearson correlation of one anchor group's
// calibrated world-model scores d with its real scores y. ok is false, and
// the group carries no evidence, when it has fewer than two trajectories,
// when var(y) < MinVarY or when a score is not finite. A world model that
// gives the whole group one score (var(d) < MinVarY) ranks nothing: its
// correlation is 0. It panics when d and y differ in length.
func GroupCorrelation(d, y []float64) (r float64, ok bool) {
	md, my, ok := groupMeans("GroupCorrelation", d, y)
	if !ok {
		return 0, false
	}
	n := len(y)
	var vd, vy, cov float64
	for i := range y {
		cd, cy := d[i]-md, y[i]-my
		vd += cd * cd
		vy += cy * cy
		cov += cd * cy
	}
	vd /= float64(n)
	vy /= float64(n)
	cov /= float64(n)
	if vy < MinVarY {
		return 0, false
	}
	if vd < MinVarY {
		return 0, true
	}
	return max(-1, min(1, cov/math.Sqrt(vd*vy))), true
}

// ObserveSignal adds one group's correlation (GroupCorrelation) of weight
// w > 0 to the window and drops the oldest beyond cfg.SignalWindow. It does
// nothing when the gate is off (SignalWindow 0) or the group carries no
// evidence, and reports whether the group was added.
func (s *State) ObserveSignal(cfg Config, d, y []float64, w float64) bool {
	if cfg.SignalWindow == 0 {
		return false
	}
	if !finite(w) || w <= 0 {
		panic(fmt.Sprintf("denoise: ObserveSignal weight %v: must be finite and positive", w))
	}
	r, ok := GroupCorrelation(d, y)
	if !ok {
		return false
	}
	s.Signal = append(s.Signal, Signal{R: r, W: w})
	if over := len(s.Signal) - cfg.SignalWindow; over > 0 {
		s.Signal = append([]Signal(nil), s.Signal[over:]...)
	}
	return true
}

// Gate returns the gate's decision on the current window: always open when
// the gate is off (cfg.SignalWindow 0) or the window holds fewer than
// MinSignalGroups groups; otherwise open only when the lower bound of the
// window's mean correlation, mean − t(SignalLevel, n_eff − 1)·SE, is above
// zero. The mean and its standard error are weighted by the groups'
// weights, with Kish's effective size n_eff = (Σw)²/Σw² (n for equal
// weights, where this is the one-sample t-test of the correlations' mean).
func (s State) Gate(cfg Config) Gate {
	g := Gate{Groups: len(s.Signal), Open: true}
	if cfg.SignalWindow == 0 {
		g.Groups = 0
		return g
	}
	if g.Groups < MinSignalGroups {
		return g
	}
	var sw, sw2, swr float64
	for _, o := range s.Signal {
		sw += o.W
		sw2 += o.W * o.W
		swr += o.W * o.R
	}
	g.Mean = swr / sw
	var ss float64
	for _, o := range s.Signal {
		ss += o.W * (o.R - g.Mean) * (o.R - g.Mean)
	}
	neff := sw * sw / sw2
	if neff <= 1 {
		// One group carries all the weight: nothing to estimate a spread from.
		g.Low, g.Open = -1, false
		return g
	}
	variance := ss / sw * neff / (neff - 1)
	se := math.Sqrt(variance / neff)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: neff - 1}.Quantile(SignalLevel)
	g.Low = g.Mean - t*se
	g.Open = g.Low > 0
	return g
}

// MaxSignalWindow bounds Config.SignalWindow: the window travels in the run
// workflow's state, so it stays small.
const MaxSignalWindow = 256
