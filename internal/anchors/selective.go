package anchors

import (
	"fmt"
	"math"
	"slices"

	"github.com/wmrl/wmrl/internal/fielderr"
)

// DefaultSelectiveRatio is the suggested Selective.Ratio κ: a group is
// left out when its residual is more than twice the run's (docs/design.md,
// "Selective scoring").
const DefaultSelectiveRatio = 2

// Selective configures selective scoring (LeftOut): which world-model
// groups of a step keep their calibrated world-model scores in the update.
type Selective struct {
	// Ratio κ ≥ 1: a group whose uncertainty u_g exceeds κ·σ0, σ0 the
	// run's root-mean-square residual, is left out.
	Ratio float64
}

// Validate reports the first invalid field, by its name.
func (s Selective) Validate() error {
	if math.IsNaN(s.Ratio) || math.IsInf(s.Ratio, 0) || s.Ratio < 1 {
		return fielderr.New("ratio", "%v, want a finite value at least 1 (suggested %v): below 1 a task "+
			"the run has never seen, whose uncertainty is the run's, would be left out", s.Ratio, DefaultSelectiveRatio)
	}
	return nil
}

// Cut is the uncertainty above which a group is left out: κ·σ0.
func (s Selective) Cut(sigma0 float64) float64 { return s.Ratio * sigma0 }

// LeftOut returns the groups, ascending, whose uncertainty u[g] is strictly
// above Cut(sigma0): their world-model scores stay out of the step's update.
// A group at the cut is kept, so equal uncertainties at σ0 (a step with no
// past pairs, or tasks the run has not seen) leave nothing out whatever κ.
// The cut is the run's, not the step's: a step whose groups are all far
// above it leaves them all out. u and sigma0 must be finite and at least 0.
// It is a pure function.
func (s Selective) LeftOut(u []float64, sigma0 float64) ([]int, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if math.IsNaN(sigma0) || math.IsInf(sigma0, 0) || sigma0 < 0 {
		return nil, fmt.Errorf("sigma0: %v, want a finite value at least 0", sigma0)
	}
	cut := s.Cut(sigma0)
	out := []int{}
	for g, v := range u {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("uncertainty of group %d: %v, want a finite value at least 0", g, v)
		}
		if v > cut {
			out = append(out, g)
		}
	}
	return out, nil
}

// MaxRatio is the largest u[g]/σ0 over the groups not in skip (ascending):
// the smallest κ at which the step would leave nothing out. It is 0 when
// every group is skipped or σ0 is 0.
func MaxRatio(u []float64, sigma0 float64, skip []int) float64 {
	if !(sigma0 > 0) {
		return 0
	}
	var m float64
	for g, v := range u {
		if _, ok := slices.BinarySearch(skip, g); !ok {
			m = max(m, v/sigma0)
		}
	}
	return m
}

// Scoring is a step's selective-scoring decision as the update saw it: of
// the world-model groups (neither anchors nor left out by the mode), how
// many had their scores in the update and how many were left out, and the
// cut κ·σ0 the uncertainties were held against; MaxRatio is the largest
// u_g/σ0 of the step's world-model groups (MaxRatio), to hold against κ.
type Scoring struct {
	Scored   int     `json:"scored"`
	LeftOut  int     `json:"left_out"`
	Cut      float64 `json:"cut"`
	MaxRatio float64 `json:"max_ratio"`
}

// String is the decision in a few words, for the step's line and inspect.
func (s Scoring) String() string {
	groups := "groups"
	if s.Scored == 1 {
		groups = "group"
	}
	return fmt.Sprintf("world model scored %d %s, %d left out (uncertainty above %.4f; highest u/σ0 %.3f)",
		s.Scored, groups, s.LeftOut, s.Cut, s.MaxRatio)
}
