package denoise

import "math"

// The difference estimator: the no-harm update (Config.Estimator).
//
// The fused update weighs the anchor stream against the world-model stream
// as two estimates of one gradient. Where the world model's calibrated
// scores are biased in some direction of the update (they prefer a kind of
// program that the real scores do not), that bias enters the update with
// the world-model stream's weight, whatever ρ says, and the signal gate,
// which tests ranks, does not see it when the world model still ranks most
// programs right. The difference estimator removes it with the anchors
// themselves. On an anchor group both scores are known, so besides its real
// GRPO advantages A it has the advantages Â of its calibrated world-model
// scores. With g(x) = x·∇log π, the update is
//
//	ĝ = mean_anchor g(A) + λ·(mean_wm g(Â) − mean_anchor g(Â))
//
// The anchor groups are a uniform draw of the step's groups, so the two
// Â-means have the same expectation over that draw: ĝ has the expectation
// of the anchor control's update for every world model and every λ, and
// the world model can only change its variance. With Â = c·A + √(1−c²)·e
// (c the within-group correlation the gate estimates), n anchor and m
// world-model trajectories of gradient variance V, the variance is
// (V/n)·(1 − 2λc + λ²(1 + n/m)), least at λ* = c·m/(m + n), where it is
// (V/n)·(1 − c²·m/(m+n)): the control's at c = 0, all executions' (V/(n+m))
// at c = 1. This is the control-variate (difference) estimator of survey
// sampling, as in prediction-powered inference's power tuning.

// The estimators of Config.Estimator.
const (
	// EstimatorFused is the paper's fused update: anchor trajectories at
	// weight ρ, world-model ones at 1 (or 0 under a closed gate).
	EstimatorFused = ""
	// EstimatorDifference is the difference estimator with λ = Lambda.
	EstimatorDifference = "difference"
)

// Lambda returns the difference estimator's λ for a step whose update has
// n anchor and m world-model trajectories, given the gate's decision g:
// max(0, min(1, g.Mean))·m/(m+n), the plug-in of λ* with the window's mean
// correlation; 0, the anchor control, when the gate is closed, when the
// window holds fewer than MinSignalGroups groups (its Mean is then 0) or
// when either stream is empty.
func Lambda(g Gate, n, m int) float64 {
	if !g.Open || n <= 0 || m <= 0 || !(g.Mean > 0) {
		return 0
	}
	c := math.Min(1, g.Mean)
	return c * float64(m) / float64(m+n)
}
