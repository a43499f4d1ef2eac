package anchors

import (
	"fmt"
	"math"
	"slices"

	"github.com/wmrl/wmrl/internal/seed"
)

// domain separates the anchor ranking from other seeds derived from the same
// (run seed, step, group), such as task or sampling seeds, so that which
// groups are anchors is not correlated with what those groups contain.
// It is the ASCII of "anchors" followed by a zero byte.
const domain uint64 = 0x616e63686f727300

// Count returns the number of anchor groups, k = max(minAnchors,
// round(fraction·groups)), capped at groups and, when freeCapacity >= 0, at
// freeCapacity. A negative freeCapacity means unlimited capacity. Rounding is
// half away from zero (math.Round). The capacity cap wins over the floor:
// with no free capacity there are no anchors.
func Count(groups int, fraction float64, minAnchors, freeCapacity int) (int, error) {
	if err := validate(groups, fraction, minAnchors); err != nil {
		return 0, err
	}
	k := max(minAnchors, int(math.Round(fraction*float64(groups))))
	k = min(k, groups)
	if freeCapacity >= 0 {
		k = min(k, freeCapacity)
	}
	return k, nil
}

func validate(groups int, fraction float64, minAnchors int) error {
	if groups < 1 {
		return fmt.Errorf("groups: %d, want at least 1", groups)
	}
	if math.IsNaN(fraction) || fraction < 0 || fraction > 1 {
		return fmt.Errorf("fraction: %v, want a value in [0, 1]", fraction)
	}
	if minAnchors < 0 {
		return fmt.Errorf("minAnchors: %d, want at least 0", minAnchors)
	}
	return nil
}

// Select returns the anchor group indices of step, sorted ascending, for a
// step of groups groups. The count is Count(groups, fraction, minAnchors,
// freeCapacity); a negative freeCapacity means unlimited. The indices are the
// k groups with the smallest keyed hash seed.Derive(runSeed, domain, step, g)
// (ties, which need a 64-bit collision, go to the lower index). The result is
// never nil, so it encodes as a JSON array.
func Select(runSeed uint64, step, groups int, fraction float64, minAnchors, freeCapacity int) ([]int, error) {
	if step < 0 {
		return nil, fmt.Errorf("step: %d, want at least 0", step)
	}
	k, err := Count(groups, fraction, minAnchors, freeCapacity)
	if err != nil {
		return nil, err
	}
	type ranked struct {
		key uint64
		g   int
	}
	rs := make([]ranked, groups)
	for g := range rs {
		rs[g] = ranked{seed.Derive(runSeed, domain, uint64(step), uint64(g)), g}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return a.g - b.g
	})
	out := make([]int, k)
	for i := range out {
		out[i] = rs[i].g
	}
	slices.Sort(out)
	return out, nil
}

// Tracker accumulates how many groups a run has sampled and how many of them
// were anchors. It is a plain value for workflow state and storage.
type Tracker struct {
	Groups  int `json:"groups"`
	Anchors int `json:"anchors"`
}

// Add records a step with groups groups of which anchors were anchors.
// It panics when anchors is negative or above groups (a caller bug).
func (t *Tracker) Add(groups, anchors int) {
	if groups < 0 || anchors < 0 || anchors > groups {
		panic(fmt.Sprintf("anchors: Tracker.Add(%d, %d): need 0 <= anchors <= groups", groups, anchors))
	}
	t.Groups += groups
	t.Anchors += anchors
}

// Realised returns the realised anchor fraction, Anchors/Groups, or 0 before
// any group was recorded.
func (t Tracker) Realised() float64 {
	if t.Groups == 0 {
		return 0
	}
	return float64(t.Anchors) / float64(t.Groups)
}
