package reproduce

import (
	"fmt"
	"math"
	"slices"

	"github.com/wmrl/wmrl/internal/mode"
)

// Stat is the mean and the sample standard deviation (n−1 in the
// denominator; 0 when N < 2) of N values.
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	N    int     `json:"n"`
}

// MeanSD returns the mean and sample standard deviation of xs (a zero Stat
// for none).
func MeanSD(xs []float64) Stat {
	s := Stat{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	for _, x := range xs {
		s.Mean += x
	}
	s.Mean /= float64(len(xs))
	if len(xs) < 2 {
		return s
	}
	var ss float64
	for _, x := range xs {
		d := x - s.Mean
		ss += d * d
	}
	s.SD = math.Sqrt(ss / float64(len(xs)-1))
	return s
}

// ModeSummary aggregates the seeds of one mode.
type ModeSummary struct {
	Mode           mode.Mode `json:"mode"`
	Seeds          []uint64  `json:"seeds"`
	HeldOut        Stat      `json:"heldout_score"`
	CPUSeconds     Stat      `json:"sandbox_cpu_seconds"`
	WallSeconds    Stat      `json:"sandbox_wall_seconds"`
	Executions     Stat      `json:"executions"`
	EvalExecutions Stat      `json:"eval_executions"`
	EvalCPUSeconds Stat      `json:"eval_cpu_seconds"`
	WMCalls        Stat      `json:"wm_calls"`
	RunWall        Stat      `json:"wall_seconds"`
	FinalRho       Stat      `json:"final_rho"`
	BiasRemoved    Stat      `json:"bias_removed"`
	AnchorFraction Stat      `json:"anchor_fraction"`
	// CostReduction is grpo's mean sandbox CPU-seconds over this mode's
	// (+Inf when this mode executes nothing, NaN without grpo).
	CostReduction float64 `json:"-"`
}

// CostReduction is how many times fewer sandbox CPU-seconds cost spends than
// base: base/cost, +Inf when cost is 0 and base is not, NaN when both are 0
// or either is negative.
func CostReduction(base, cost float64) float64 {
	switch {
	case base < 0 || cost < 0 || (base == 0 && cost == 0):
		return math.NaN()
	case cost == 0:
		return math.Inf(1)
	}
	return base / cost
}

// GoalStatus is the outcome of a goal check.
type GoalStatus string

// Goal outcomes.
const (
	GoalMet    GoalStatus = "met"
	GoalMissed GoalStatus = "missed"
	GoalNoData GoalStatus = "no data"
)

// Goal is one of the benchmark's goals, checked from the numbers.
type Goal struct {
	Name   string     `json:"name"`
	Status GoalStatus `json:"status"`
	Detail string     `json:"detail"`
}

// Summary is the per-mode aggregate (modes in mode.All order, only those
// with runs), the paired differences of held-out scores and the goal
// checks.
type Summary struct {
	Modes []ModeSummary `json:"modes"`
	Pairs []PairedDiff  `json:"paired"`
	Goals []Goal        `json:"goals"`
}

// PairedDiff is the held-out score of mode A minus that of mode B, paired
// by seed: the mean of the per-seed differences, its standard error (the
// sample standard deviation of the differences over √N; 0 when N < 2) and
// the seeds both modes ran.
type PairedDiff struct {
	A     mode.Mode `json:"a"`
	B     mode.Mode `json:"b"`
	Mean  float64   `json:"mean"`
	SE    float64   `json:"se"`
	N     int       `json:"n"`
	Seeds []uint64  `json:"seeds"`
}

// Paired returns the paired difference of the held-out scores of a and b
// over the seeds both ran (seeds ascending); ok is false when they share
// none. A seed run twice in a mode (which Build refuses) counts once, its
// first run.
func Paired(runs []Run, a, b mode.Mode) (PairedDiff, bool) {
	score := func(m mode.Mode) map[uint64]float64 {
		out := map[uint64]float64{}
		for _, r := range runs {
			if _, seen := out[r.Seed]; r.Mode == m && !seen {
				out[r.Seed] = r.HeldOutScore
			}
		}
		return out
	}
	d := PairedDiff{A: a, B: b}
	var ok bool
	d.Mean, d.SE, d.Seeds, ok = pairScores(score(a), score(b))
	d.N = len(d.Seeds)
	return d, ok
}

// pairScores pairs two sets of scores by seed: the mean of the differences
// a − b over the seeds both have (ascending), its standard error (sd of the
// differences / √n; 0 when n < 2); ok is false when they share no seed.
func pairScores(sa, sb map[uint64]float64) (mean, se float64, seeds []uint64, ok bool) {
	for seed := range sa {
		if _, ok := sb[seed]; ok {
			seeds = append(seeds, seed)
		}
	}
	if len(seeds) == 0 {
		return 0, 0, nil, false
	}
	slices.Sort(seeds)
	diffs := make([]float64, len(seeds))
	for i, seed := range seeds {
		diffs[i] = sa[seed] - sb[seed]
	}
	st := MeanSD(diffs)
	if st.N >= 2 {
		se = st.SD / math.Sqrt(float64(st.N))
	}
	return st.Mean, se, seeds, true
}

// pairsReported are the paired differences results.md shows.
var pairsReported = [][2]mode.Mode{
	{mode.WMRL, mode.GRPO}, {mode.WMRL, mode.Anchor}, {mode.WMRL, mode.Mix}, {mode.WM, mode.GRPO},
	{mode.Anchor, mode.GRPO},
}

// Mode returns the summary of m, if it has runs.
func (s Summary) Mode(m mode.Mode) (ModeSummary, bool) {
	for _, x := range s.Modes {
		if x.Mode == m {
			return x, true
		}
	}
	return ModeSummary{}, false
}

// Summarise aggregates the runs of each mode and checks the goals.
func Summarise(res Results) Summary {
	var s Summary
	for _, m := range mode.All() {
		var runs []Run
		for _, r := range res.Runs {
			if r.Mode == m {
				runs = append(runs, r)
			}
		}
		if len(runs) == 0 {
			continue
		}
		stat := func(f func(Run) float64) Stat {
			xs := make([]float64, len(runs))
			for i, r := range runs {
				xs[i] = f(r)
			}
			return MeanSD(xs)
		}
		ms := ModeSummary{Mode: m, CostReduction: math.NaN()}
		for _, r := range runs {
			ms.Seeds = append(ms.Seeds, r.Seed)
		}
		ms.HeldOut = stat(func(r Run) float64 { return r.HeldOutScore })
		ms.CPUSeconds = stat(func(r Run) float64 { return r.SandboxCPUSeconds })
		ms.WallSeconds = stat(func(r Run) float64 { return r.SandboxWallSeconds })
		ms.Executions = stat(func(r Run) float64 { return float64(r.Executions) })
		ms.EvalExecutions = stat(func(r Run) float64 { return float64(r.EvalExecutions) })
		ms.EvalCPUSeconds = stat(func(r Run) float64 { return r.EvalCPUSeconds })
		ms.WMCalls = stat(func(r Run) float64 { return float64(r.WMCalls) })
		ms.RunWall = stat(func(r Run) float64 { return r.WallSeconds })
		ms.FinalRho = stat(func(r Run) float64 { return r.FinalRho })
		ms.BiasRemoved = stat(func(r Run) float64 { return r.BiasRemoved })
		ms.AnchorFraction = stat(func(r Run) float64 { return r.AnchorFraction })
		s.Modes = append(s.Modes, ms)
	}
	if g, ok := s.Mode(mode.GRPO); ok {
		for i := range s.Modes {
			s.Modes[i].CostReduction = CostReduction(g.CPUSeconds.Mean, s.Modes[i].CPUSeconds.Mean)
		}
	}
	for _, p := range pairsReported {
		if d, ok := Paired(res.Runs, p[0], p[1]); ok {
			s.Pairs = append(s.Pairs, d)
		}
	}
	s.Goals = goals(s)
	return s
}

// Pair returns the paired difference of a and b, if both ran a seed.
func (s Summary) Pair(a, b mode.Mode) (PairedDiff, bool) {
	for _, d := range s.Pairs {
		if d.A == a && d.B == b {
			return d, true
		}
	}
	return PairedDiff{}, false
}

// The goals of issue 5, in the order they are reported.
const (
	GoalQuality = "wmrl held-out score >= grpo's, within one standard error of the paired difference"
	GoalCost    = "wmrl sandbox CPU-seconds <= 1/3 of grpo's"
	GoalWMBelow = "wm held-out score below grpo's"
	GoalOverMix = "wmrl held-out score above mix's"
	// GoalOverAnchor: the world model pays. anchor is GRPO on wmrl's anchor
	// groups alone, at the same executions; wmrl must beat it.
	GoalOverAnchor = "wmrl held-out score above anchor's by more than the standard error of the paired difference, at the same executions"
)

func status(ok bool) GoalStatus {
	if ok {
		return GoalMet
	}
	return GoalMissed
}

// goals checks the goals from the summaries. The quality goal and the
// anchor goal are read on the differences paired by seed (d = wmrl − other,
// per seed; SE its standard error): quality holds when mean d ≥ −SE, the
// anchor goal when mean d > SE. With one seed SE is 0.
func goals(s Summary) []Goal {
	grpo, hasG := s.Mode(mode.GRPO)
	wmrl, hasW := s.Mode(mode.WMRL)
	wm, hasWM := s.Mode(mode.WM)
	mix, hasMix := s.Mode(mode.Mix)
	anc, hasAnc := s.Mode(mode.Anchor)
	noData := func(name string, missing ...mode.Mode) Goal {
		return Goal{Name: name, Status: GoalNoData, Detail: fmt.Sprintf("needs runs of %v", missing)}
	}
	var out []Goal
	if hasG && hasW {
		if d, ok := s.Pair(mode.WMRL, mode.GRPO); ok {
			out = append(out, Goal{Name: GoalQuality, Status: status(d.Mean >= -d.SE),
				Detail: fmt.Sprintf("wmrl − grpo paired over %d seeds: %+.4f ± %.4f (SE); needs >= %+.4f",
					d.N, d.Mean, d.SE, -d.SE)})
		} else {
			out = append(out, Goal{Name: GoalQuality, Status: GoalNoData, Detail: "wmrl and grpo share no seed"})
		}
		limit := grpo.CPUSeconds.Mean / 3
		out = append(out, Goal{Name: GoalCost, Status: status(wmrl.CPUSeconds.Mean <= limit),
			Detail: fmt.Sprintf("wmrl %.2f s vs grpo %.2f s (%s less): needs <= %.2f s",
				wmrl.CPUSeconds.Mean, grpo.CPUSeconds.Mean, FormatReduction(wmrl.CostReduction), limit)})
	} else {
		out = append(out, noData(GoalQuality, mode.WMRL, mode.GRPO), noData(GoalCost, mode.WMRL, mode.GRPO))
	}
	if hasG && hasWM {
		out = append(out, Goal{Name: GoalWMBelow, Status: status(wm.HeldOut.Mean < grpo.HeldOut.Mean),
			Detail: fmt.Sprintf("wm %.4f ± %.4f vs grpo %.4f ± %.4f",
				wm.HeldOut.Mean, wm.HeldOut.SD, grpo.HeldOut.Mean, grpo.HeldOut.SD)})
	} else {
		out = append(out, noData(GoalWMBelow, mode.WM, mode.GRPO))
	}
	if hasW && hasMix {
		out = append(out, Goal{Name: GoalOverMix, Status: status(wmrl.HeldOut.Mean > mix.HeldOut.Mean),
			Detail: fmt.Sprintf("wmrl %.4f ± %.4f vs mix %.4f ± %.4f",
				wmrl.HeldOut.Mean, wmrl.HeldOut.SD, mix.HeldOut.Mean, mix.HeldOut.SD)})
	} else {
		out = append(out, noData(GoalOverMix, mode.WMRL, mode.Mix))
	}
	if hasW && hasAnc {
		if d, ok := s.Pair(mode.WMRL, mode.Anchor); ok {
			out = append(out, Goal{Name: GoalOverAnchor, Status: status(d.Mean > d.SE),
				Detail: fmt.Sprintf("wmrl − anchor paired over %d seeds: %+.4f ± %.4f (SE); needs > %.4f; at %.0f and %.0f executions",
					d.N, d.Mean, d.SE, d.SE, wmrl.Executions.Mean, anc.Executions.Mean)})
		} else {
			out = append(out, Goal{Name: GoalOverAnchor, Status: GoalNoData, Detail: "wmrl and anchor share no seed"})
		}
	} else {
		out = append(out, noData(GoalOverAnchor, mode.WMRL, mode.Anchor))
	}
	return out
}

// FormatReduction prints a cost reduction as "3.1×", "∞×" or "n/a".
func FormatReduction(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case math.IsInf(x, 1):
		return "∞×"
	}
	return fmt.Sprintf("%.2f×", x)
}
