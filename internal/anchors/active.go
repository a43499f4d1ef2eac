package anchors

import (
	"fmt"
	"math"
	"slices"

	"github.com/wmrl/wmrl/internal/fielderr"
	"github.com/wmrl/wmrl/internal/seed"
)

// domainActive separates the random start of active selection from the
// ranking keys (domain). It is the ASCII of "active" followed by two zero
// bytes.
const domainActive uint64 = 0x6163746976650000

// Active configures active anchor selection (Probabilities, SelectActive).
type Active struct {
	// Mix is λ in [0,1]: the share of the expected anchor count spread in
	// proportion to the uncertainty; the rest is spread uniformly.
	Mix float64
	// Floor in [0,1] bounds every inclusion probability below by
	// Floor·k/G, Floor times the uniform probability, so that no weight
	// exceeds 1/Floor times the uniform one.
	Floor float64
}

// Validate reports the first invalid field, by its name.
func (a Active) Validate() error {
	switch {
	case !finiteIn(a.Mix, 0, 1):
		return fielderr.New("mix", "%v, want a value in [0, 1]", a.Mix)
	case !finiteIn(a.Floor, 0, 1):
		return fielderr.New("floor", "%v, want a value in [0, 1]", a.Floor)
	case a.Mix == 1 && a.Floor == 0:
		return fielderr.New("floor", "0 with mix 1 leaves the weights unbounded, want a floor above 0 or a mix below 1")
	}
	return nil
}

func finiteIn(v, lo, hi float64) bool { return !math.IsNaN(v) && v >= lo && v <= hi }

// Probabilities returns the inclusion probabilities π of k anchors among
// len(u) groups with uncertainties u (non-negative, finite):
//
//	π_g = k·((1−λ)/G + λ·u_g/Σu)
//
// (uniform when Σu = 0), then bounded to [Floor·k/G, 1] with the mass moved
// among the groups still inside the bounds in proportion to their share, so
// that Σπ = k. With λ = 0 or equal uncertainties every π_g is k/G.
func Probabilities(u []float64, k int, a Active) ([]float64, error) {
	G := len(u)
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if k < 0 || k > G {
		return nil, fmt.Errorf("k: %d, want 0 to %d groups", k, G)
	}
	var sum float64
	for g, v := range u {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("uncertainty of group %d: %v, want a finite value at least 0", g, v)
		}
		sum += v
	}
	pi := make([]float64, G)
	if k == 0 {
		return pi, nil
	}
	if k == G {
		for g := range pi {
			pi[g] = 1
		}
		return pi, nil
	}
	// share q_g sums to 1 over the groups.
	q := make([]float64, G)
	for g := range q {
		q[g] = (1 - a.Mix) / float64(G)
		if sum > 0 {
			q[g] += a.Mix * u[g] / sum
		} else {
			q[g] += a.Mix / float64(G)
		}
	}
	lo := a.Floor * float64(k) / float64(G)
	// π_g = clamp(c·q_g, lo, 1): Σπ is continuous and non-decreasing in c,
	// G·lo ≤ k at c = 0 and G ≥ k for c ≥ 1/min q, so bisection finds the c
	// with Σπ = k; the groups inside the bounds keep their proportions.
	fill := func(c float64) float64 {
		var s float64
		for g := range q {
			pi[g] = min(max(c*q[g], lo), 1)
			s += pi[g]
		}
		return s
	}
	// Groups of share 0 (λ = 1, no uncertainty) stay at lo whatever c; when
	// the others at 1 and those at lo fall short of k, the others are all
	// anchors and the rest is spread evenly over the groups of share 0.
	var pos, zero int
	for _, v := range q {
		if v > 0 {
			pos++
		} else {
			zero++
		}
	}
	if float64(pos)+float64(zero)*lo < float64(k) {
		for g, v := range q {
			pi[g] = 1
			if v == 0 {
				pi[g] = float64(k-pos) / float64(zero)
			}
		}
		return pi, nil
	}
	clo, chi := 0.0, 1.0
	for range 2100 {
		if fill(chi) >= float64(k) {
			break
		}
		chi *= 2
	}
	for range 200 {
		mid := (clo + chi) / 2
		if mid <= clo || mid >= chi {
			break
		}
		if fill(mid) < float64(k) {
			clo = mid
		} else {
			chi = mid
		}
	}
	fill(chi)
	var total float64
	for _, p := range pi {
		total += p
	}
	if math.Abs(total-float64(k)) > 1e-9*float64(G) {
		return nil, fmt.Errorf("inclusion probabilities sum to %v, want %d (mix %v, floor %v)", total, k, a.Mix, a.Floor)
	}
	return pi, nil
}

// Selection is the outcome of SelectActive.
type Selection struct {
	// Groups are the anchor groups, ascending.
	Groups []int `json:"groups"`
	// Prob are their inclusion probabilities π_g, Weights their weights
	// (k/G)/π_g: 1/π_g scaled so that uniform selection gives weight 1.
	Prob    []float64 `json:"prob"`
	Weights []float64 `json:"weights"`
}

// SelectActive chooses the anchor groups of step with inclusion
// probabilities Probabilities(u, k, a), k = Count(len(u), fraction,
// minAnchors, freeCapacity), by systematic sampling: the groups are laid
// end to end, each an interval of length π_g, in the order of their keyed
// hash seed.Derive(runSeed, domain, step, g) (Select's ranking), and the
// groups hit by the points t, t+1, …, t+k−1 are the anchors, where t in
// [0,1) is seed.Unit(seed.Derive(runSeed, domainActive, step)). Every
// group is then an anchor with probability exactly π_g over t, and every
// step has exactly k anchors. It is a pure function of its arguments.
func SelectActive(runSeed uint64, step int, u []float64, fraction float64, minAnchors, freeCapacity int,
	a Active) (Selection, error) {
	if step < 0 {
		return Selection{}, fmt.Errorf("step: %d, want at least 0", step)
	}
	G := len(u)
	k, err := Count(G, fraction, minAnchors, freeCapacity)
	if err != nil {
		return Selection{}, err
	}
	pi, err := Probabilities(u, k, a)
	if err != nil {
		return Selection{}, err
	}
	return systematic(runSeed, step, pi, k), nil
}

// systematic draws k groups by systematic sampling over pi (Σpi = k, each
// in [0,1]) in hash order; see SelectActive.
func systematic(runSeed uint64, step int, pi []float64, k int) Selection {
	G := len(pi)
	sel := Selection{Groups: []int{}, Prob: []float64{}, Weights: []float64{}}
	if k == 0 {
		return sel
	}
	order := make([]int, G)
	keys := make([]uint64, G)
	for g := range order {
		order[g] = g
		keys[g] = seed.Derive(runSeed, domain, uint64(step), uint64(g))
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case keys[a] < keys[b]:
			return -1
		case keys[a] > keys[b]:
			return 1
		}
		return a - b
	})
	t := seed.Unit(seed.Derive(runSeed, domainActive, uint64(step)))
	chosen := make([]bool, G)
	var lo float64 // start of the current group's interval
	j, n := 0, 0   // next point t+j; groups chosen
	for i, g := range order {
		hi := lo + pi[g]
		if i == G-1 {
			hi = math.Inf(1) // rounding: the last interval takes what is left
		}
		if j < k && t+float64(j) < hi && pi[g] > 0 {
			chosen[g] = true
			n++
			j++
		}
		lo = hi
	}
	// Each point lies in exactly one interval and no interval (π ≤ 1)
	// holds two, so n = k up to rounding; a point lost to rounding goes
	// to the unchosen group of largest π, lowest index first.
	for ; n < k; n++ {
		best := -1
		for g := range pi {
			if !chosen[g] && (best < 0 || pi[g] > pi[best]) {
				best = g
			}
		}
		chosen[best] = true
	}
	unif := float64(k) / float64(G)
	for g, c := range chosen {
		if c {
			sel.Groups = append(sel.Groups, g)
			sel.Prob = append(sel.Prob, pi[g])
			sel.Weights = append(sel.Weights, unif/pi[g])
		}
	}
	return sel
}

// PriorPairs is the weight, in pairs, of the prior residual in a task's
// uncertainty (one group of eight).
const PriorPairs = 8

// DefaultPriorResidual is the root-mean-square residual assumed before a
// run has any anchor pair.
const DefaultPriorResidual = 0.1

// Residual is one past anchor pair seen from active selection: the task of
// its group, its residual r_env − f̂(r_wm) and its weight (0 counts as 1).
type Residual struct {
	Task   int
	Value  float64
	Weight float64
}

// Uncertainty returns the uncertainty of each group from its task (tasks[g])
// and the run's past residuals: the root mean square of the task's
// residuals, shrunk toward the run's (weighted) root-mean-square residual
// with the weight of PriorPairs pairs,
//
//	u_t = sqrt((n0·σ0² + Σ_{i∈t} r_i²) / (n0 + n_t)),
//
// so that a task never seen gets σ0 (DefaultPriorResidual before any pair).
// Within a task the pairs are averaged unweighted: selection depends on the
// task alone, so a task's anchor pairs are a plain sample of it.
func Uncertainty(tasks []int, past []Residual) []float64 {
	type acc struct {
		sq float64
		n  int
	}
	byTask := make(map[int]acc)
	for _, r := range past {
		a := byTask[r.Task]
		a.sq += r.Value * r.Value
		a.n++
		byTask[r.Task] = a
	}
	prior := runSquare(past)
	u := make([]float64, len(tasks))
	for g, t := range tasks {
		a := byTask[t]
		u[g] = math.Sqrt((PriorPairs*prior + a.sq) / (PriorPairs + float64(a.n)))
	}
	return u
}

// RunResidual is σ0, the run's root-mean-square residual over past
// (weighted by the pairs' weights, a weight at most 0 counting as 1), or
// DefaultPriorResidual when past is empty: the uncertainty of a task the run
// has never seen (Uncertainty) and the scale of selective scoring's cut
// (Selective.Cut).
func RunResidual(past []Residual) float64 { return math.Sqrt(runSquare(past)) }

// runSquare is σ0², the weighted mean square residual of past
// (DefaultPriorResidual² when past is empty).
func runSquare(past []Residual) float64 {
	var sq, w float64
	for _, r := range past {
		wi := r.Weight
		if wi <= 0 {
			wi = 1
		}
		sq += wi * r.Value * r.Value
		w += wi
	}
	if w == 0 {
		return DefaultPriorResidual * DefaultPriorResidual
	}
	return sq / w
}

// Adaptive configures the anchor-fraction controller (Adapt).
type Adaptive struct {
	// TargetRho is the ρ the controller holds; Floor and Ceiling bound the
	// fraction; Gain is the change of the fraction per unit of ρ error.
	TargetRho, Floor, Ceiling, Gain float64
}

// Validate reports the first invalid field, by its name.
func (a Adaptive) Validate() error {
	switch {
	case math.IsNaN(a.TargetRho) || math.IsInf(a.TargetRho, 0) || a.TargetRho < 1:
		return fielderr.New("target_rho", "%v, want a finite value at least 1 (ρ is never below 1)", a.TargetRho)
	case !finiteIn(a.Floor, 0, 1):
		return fielderr.New("floor", "%v, want a value in [0, 1]", a.Floor)
	case !finiteIn(a.Ceiling, a.Floor, 1):
		return fielderr.New("ceiling", "%v, want a value in [floor %v, 1]", a.Ceiling, a.Floor)
	case math.IsNaN(a.Gain) || math.IsInf(a.Gain, 0) || a.Gain <= 0:
		return fielderr.New("gain", "%v, want a finite value above 0", a.Gain)
	}
	return nil
}

// Adapt is one step of the anchor-fraction controller: a step whose ρ is
// above the target (the world model is noisier than when the denoiser was
// calibrated) raises the fraction, one below lowers it,
//
//	f' = clamp(f + Gain·(ρ − TargetRho), Floor, Ceiling),
//
// an integral controller on the fraction: it stops moving when ρ is at the
// target or the fraction at a bound. A non-finite ρ leaves f (clamped)
// unchanged. It is a pure function.
func Adapt(fraction, rho float64, a Adaptive) float64 {
	f := fraction
	if !math.IsNaN(rho) && !math.IsInf(rho, 0) {
		f += a.Gain * (rho - a.TargetRho)
	}
	return min(max(f, a.Floor), a.Ceiling)
}
