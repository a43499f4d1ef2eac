package worldmodel

import (
	"math"
	"sort"
)

// Ranks returns the 1-based ranks of xs in increasing order; tied values
// share the mean of the ranks they span ("fractional" ranking), so
// Ranks([]float64{10, 20, 20, 30}) is [1, 2.5, 2.5, 4].
func Ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && xs[idx[j]] == xs[idx[i]] {
			j++
		}
		// Positions i..j-1 (0-based) hold equal values: ranks i+1..j.
		mean := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			r[idx[k]] = mean
		}
		i = j
	}
	return r
}

// Spearman returns the Spearman rank correlation of xs and ys: the Pearson
// correlation of their fractional ranks, which handles ties. ok is false
// when fewer than two pairs are given or either side is constant (the
// correlation is undefined); it panics when the lengths differ.
func Spearman(xs, ys []float64) (rho float64, ok bool) {
	if len(xs) != len(ys) {
		panic("worldmodel: Spearman of slices with different lengths")
	}
	if len(xs) < 2 {
		return 0, false
	}
	return pearson(Ranks(xs), Ranks(ys))
}

func pearson(a, b []float64) (float64, bool) {
	n := float64(len(a))
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= n
	mb /= n
	var sab, saa, sbb float64
	for i := range a {
		da, db := a[i]-ma, b[i]-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	if saa <= 0 || sbb <= 0 {
		return 0, false
	}
	r := sab / math.Sqrt(saa*sbb)
	return math.Max(-1, math.Min(1, r)), true
}

// WithinGroupSpearman returns the mean over groups of the Spearman
// correlation between pred and real inside each group, and how many groups
// entered the mean. Groups are identified by group[i]; a group whose
// correlation is undefined (fewer than two members, or constant pred or real
// scores) is left out. Groups are visited in order of first appearance.
func WithinGroupSpearman(group []string, pred, real []float64) (mean float64, groups int) {
	if len(group) != len(pred) || len(pred) != len(real) {
		panic("worldmodel: WithinGroupSpearman of slices with different lengths")
	}
	order, members := groupIndex(group)
	var sum float64
	for _, g := range order {
		ix := members[g]
		p := make([]float64, len(ix))
		r := make([]float64, len(ix))
		for k, i := range ix {
			p[k], r[k] = pred[i], real[i]
		}
		if rho, ok := Spearman(p, r); ok {
			sum += rho
			groups++
		}
	}
	if groups == 0 {
		return 0, 0
	}
	return sum / float64(groups), groups
}

// groupIndex lists the distinct groups in order of first appearance and the
// indices of each group's members.
func groupIndex(group []string) ([]string, map[string][]int) {
	members := make(map[string][]int)
	var order []string
	for i, g := range group {
		if _, seen := members[g]; !seen {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	return order, members
}
