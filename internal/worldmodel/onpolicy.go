package worldmodel

import (
	"fmt"
	"math"
	"sort"
)

// Pair is one anchor trajectory of a training run: the world model's score
// and the real execution's score of the same program, in the group (one task
// of one step) it was sampled in.
type Pair struct {
	// Group identifies the group; pairs of one group share it.
	Group string
	Step  int
	WM    float64
	Env   float64
}

// StepRange is how well the world model ranked a run's own programs over a
// range of steps.
type StepRange struct {
	// From and To are the first and last step of the range.
	From int `json:"from"`
	To   int `json:"to"`
	// Pairs and Groups count the anchor trajectories and groups in it.
	Pairs  int `json:"pairs"`
	Groups int `json:"groups"`
	// Ranked counts the groups whose within-group Spearman correlation is
	// defined (both scores vary); Spearman is its mean over them (0 when
	// Ranked is 0).
	Ranked   int     `json:"ranked_groups"`
	Spearman float64 `json:"spearman_within_group"`
	// Tied counts the groups whose real scores are all equal: they carry no
	// gradient of their own.
	Tied int `json:"tied_groups"`
	// Bias is mean(WM − Env) over the range's pairs.
	Bias float64 `json:"mean_bias"`
}

// OnPolicy measures the world model on the programs a policy sampled, from
// the anchor pairs of one or more runs: for every range of `every` steps
// (0..every-1, every..2·every-1, ...) that holds pairs, the mean
// within-group Spearman correlation between WM and Env, the groups with
// tied real scores and the mean bias. Unlike Evaluate, which scores random
// programs, this is the quality the world model had where training used it.
func OnPolicy(pairs []Pair, every int) ([]StepRange, error) {
	if every < 1 {
		return nil, fmt.Errorf("every %d: want >= 1", every)
	}
	byRange := map[int][]Pair{}
	for i, p := range pairs {
		if p.Step < 0 {
			return nil, fmt.Errorf("pair %d: step %d", i, p.Step)
		}
		if !finite(p.WM) || !finite(p.Env) {
			return nil, fmt.Errorf("pair %d (group %s): scores %v, %v must be finite", i, p.Group, p.WM, p.Env)
		}
		byRange[p.Step/every] = append(byRange[p.Step/every], p)
	}
	keys := make([]int, 0, len(byRange))
	for k := range byRange {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]StepRange, 0, len(keys))
	for _, k := range keys {
		ps := byRange[k]
		r := StepRange{From: k * every, To: k*every + every - 1, Pairs: len(ps)}
		group := make([]string, len(ps))
		wm := make([]float64, len(ps))
		env := make([]float64, len(ps))
		var bias float64
		for i, p := range ps {
			group[i], wm[i], env[i] = p.Group, p.WM, p.Env
			bias += p.WM - p.Env
		}
		r.Bias = bias / float64(len(ps))
		order, members := groupIndex(group)
		r.Groups = len(order)
		for _, g := range order {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, i := range members[g] {
				lo, hi = math.Min(lo, env[i]), math.Max(hi, env[i])
			}
			if hi-lo < 1e-12 {
				r.Tied++
			}
		}
		r.Spearman, r.Ranked = WithinGroupSpearman(group, wm, env)
		out = append(out, r)
	}
	return out, nil
}
