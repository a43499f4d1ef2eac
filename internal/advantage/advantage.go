package advantage

import (
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/fielderr"
)

// Config holds the advantage settings.
type Config struct {
	// Standardize divides the centred rewards by (std + Eps); when false the
	// rewards are only centred.
	Standardize bool `json:"standardize"`
	// Eps keeps the division finite for groups with (near) equal rewards.
	Eps float64 `json:"eps"`
	// MinGraded is the number of graded trajectories a group needs to count.
	MinGraded int `json:"min_graded"`
}

// Default returns the configuration of docs/design.md: standardised, ε = 1e-4,
// at least 2 graded trajectories.
func Default() Config {
	return Config{Standardize: true, Eps: 1e-4, MinGraded: 2}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if math.IsNaN(c.Eps) || c.Eps <= 0 || c.Eps > 1 {
		return fielderr.New("eps", "%v, want a small positive number, at most 1", c.Eps)
	}
	if c.MinGraded < 2 {
		return fielderr.New("min_graded", "%d, want at least 2", c.MinGraded)
	}
	return nil
}

// Group returns the advantages of one group's trajectories, in the order of
// rewards. graded marks the trajectories that have a score; nil means all
// are graded. Ungraded trajectories are excluded and get advantage 0, and
// their rewards are ignored. ok is false, and every advantage is 0, when
// fewer than cfg.MinGraded trajectories are graded. A group whose graded
// rewards are all equal has all advantages 0 with ok true.
//
// It panics when graded is not nil and differs in length from rewards, when
// a graded reward is not finite, or when cfg is invalid: scores are
// validated where they enter the system and configurations where they are
// read, so these are caller bugs.
func Group(rewards []float64, graded []bool, cfg Config) (adv []float64, ok bool) {
	if graded != nil && len(graded) != len(rewards) {
		panic(fmt.Sprintf("advantage: Group: %d rewards but %d graded flags", len(rewards), len(graded)))
	}
	if err := cfg.Validate(); err != nil {
		panic("advantage: Group with invalid config: " + err.Error())
	}
	isGraded := func(i int) bool { return graded == nil || graded[i] }

	adv = make([]float64, len(rewards))
	n := 0
	var sum float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, r := range rewards {
		if !isGraded(i) {
			continue
		}
		if math.IsNaN(r) || math.IsInf(r, 0) {
			panic(fmt.Sprintf("advantage: Group: reward %d is %v", i, r))
		}
		n++
		sum += r
		lo, hi = min(lo, r), max(hi, r)
	}
	if n < cfg.MinGraded {
		return adv, false
	}
	if lo == hi {
		return adv, true
	}
	mean := sum / float64(n)
	// One correction pass makes the mean exact to rounding even when the
	// rewards share a large offset.
	var corr float64
	for i, r := range rewards {
		if isGraded(i) {
			corr += r - mean
		}
	}
	mean += corr / float64(n)

	var ss float64
	for i, r := range rewards {
		if isGraded(i) {
			c := r - mean
			adv[i] = c
			ss += c * c
		}
	}
	if !cfg.Standardize {
		return adv, true
	}
	scale := math.Sqrt(ss/float64(n)) + cfg.Eps
	for i := range adv {
		adv[i] /= scale
	}
	return adv, true
}

// Weights returns the normalised fusion weight of every trajectory in a step
// batch: ρ for an anchor trajectory (scored by real execution), 1 for a
// world-model trajectory, divided by the sum over the whole batch so the
// result sums to 1. Trajectories with advantage 0 (in a skipped group, or
// with a reward equal to their group's mean) still count in the sum: pass
// exactly the batch the update averages over. fusion.Step passes the
// graded trajectories only; an ungraded one gets weight 0 and is left
// out of the update. It panics when rho is not a positive finite number.
func Weights(anchor []bool, rho float64) []float64 {
	checkRho(rho)
	w := make([]float64, len(anchor))
	var total float64
	for i, a := range anchor {
		w[i] = 1
		if a {
			w[i] = rho
		}
		total += w[i]
	}
	for i := range w {
		w[i] /= total
	}
	return w
}

// Fuse returns the coefficient of ∇log π(τ_i) for every trajectory of the
// step batch, w_i·A_i/Σw with w from Weights, so that the fused gradient is
// Σ_i coef_i ∇log π(τ_i). It panics when adv and anchor differ in length or
// rho is not a positive finite number.
func Fuse(adv []float64, anchor []bool, rho float64) []float64 {
	if len(adv) != len(anchor) {
		panic(fmt.Sprintf("advantage: Fuse: %d advantages but %d anchor flags", len(adv), len(anchor)))
	}
	coef := Weights(anchor, rho)
	for i := range coef {
		coef[i] *= adv[i]
	}
	return coef
}

// AnchorShare returns the fraction of the total fusion weight that falls on
// anchor trajectories, kρ/(kρ + m) for k anchor and m world-model
// trajectories, or 0 for an empty batch. It panics when rho is not a
// positive finite number.
func AnchorShare(anchor []bool, rho float64) float64 {
	checkRho(rho)
	var k, m float64
	for _, a := range anchor {
		if a {
			k++
		} else {
			m++
		}
	}
	if k+m == 0 {
		return 0
	}
	return k * rho / (k*rho + m)
}

func checkRho(rho float64) {
	if math.IsNaN(rho) || math.IsInf(rho, 0) || rho <= 0 {
		panic(fmt.Sprintf("advantage: rho %v is not a positive finite number", rho))
	}
}
