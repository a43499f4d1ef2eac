package reproduce

import (
	"fmt"
	"math"

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
// with runs) and the goal checks.
type Summary struct {
	Modes []ModeSummary `json:"modes"`
	Goals []Goal        `json:"goals"`
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
	s.Goals = goals(s)
	return s
}

// The goals of issue 5, in the order they are reported.
const (
	GoalQuality = "wmrl held-out score >= grpo's, within one standard deviation"
	GoalCost    = "wmrl sandbox CPU-seconds <= 1/3 of grpo's"
	GoalWMBelow = "wm held-out score below grpo's"
	GoalOverMix = "wmrl held-out score above mix's"
	// GoalOverAnchor: the world model pays. anchor is GRPO on wmrl's anchor
	// groups alone, at the same executions; wmrl must beat it.
	GoalOverAnchor = "wmrl held-out score above anchor's, at the same executions"
)

func status(ok bool) GoalStatus {
	if ok {
		return GoalMet
	}
	return GoalMissed
}

// goals checks the goals from the summaries. "Within one standard
// deviation" is read as: wmrl's mean is at least grpo's mean minus grpo's
// sample standard deviation over seeds.
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
		need := grpo.HeldOut.Mean - grpo.HeldOut.SD
		out = append(out, Goal{Name: GoalQuality, Status: status(wmrl.HeldOut.Mean >= need),
			Detail: fmt.Sprintf("wmrl %.4f ± %.4f vs grpo %.4f ± %.4f: needs >= %.4f",
				wmrl.HeldOut.Mean, wmrl.HeldOut.SD, grpo.HeldOut.Mean, grpo.HeldOut.SD, need)})
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
		out = append(out, Goal{Name: GoalOverAnchor, Status: status(wmrl.HeldOut.Mean > anc.HeldOut.Mean),
			Detail: fmt.Sprintf("wmrl %.4f ± %.4f vs anchor %.4f ± %.4f, at %.0f and %.0f executions",
				wmrl.HeldOut.Mean, wmrl.HeldOut.SD, anc.HeldOut.Mean, anc.HeldOut.SD, wmrl.Executions.Mean,
				anc.Executions.Mean)})
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
