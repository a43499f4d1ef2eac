package debias

import (
	"fmt"
	"math"

	"github.com/wmrl/wmrl/internal/fielderr"
	"github.com/wmrl/wmrl/internal/isotonic"
)

// Fitting methods.
const (
	MethodPAVA   = "pava"   // weighted isotonic least squares on every pair
	MethodBinned = "binned" // equal-width bins on [0,1], bin means, then PAVA
)

// Pair is one anchor pair: the world model's score of a trajectory and the
// score of its real execution. Group names the GRPO group the trajectory
// belongs to; it is optional and used only by the diagnostics ("" = no group).
type Pair struct {
	WM    float64 `json:"wm"`
	Env   float64 `json:"env"`
	Group string  `json:"group,omitempty"`
	// Weight is the pair's weight in the fit and the mean bias: 1/π of its
	// group under active anchor selection (internal/anchors), scaled so that
	// uniform selection gives 1. 0 means 1, so pairs without a weight fit
	// as they always did.
	Weight float64 `json:"weight,omitempty"`
}

// W returns the pair's weight, 1 when Weight is 0.
func (p Pair) W() float64 {
	if p.Weight == 0 {
		return 1
	}
	return p.Weight
}

// Config says how the map is fitted. It is also the debias section of a
// run's configuration (runconfig.Config.Debias), read from YAML and carried
// as JSON in workflow inputs: its yaml and json names must not change.
type Config struct {
	// Method is MethodPAVA or MethodBinned.
	Method string `yaml:"method" json:"method"`
	// Bins is the number of equal-width bins on [0,1] of MethodBinned.
	Bins int `yaml:"bins" json:"bins"`
	// MinPairs is the number of pairs (in the window) needed before the map
	// leaves the identity.
	MinPairs int `yaml:"min_pairs" json:"min_pairs"`
	// Window is 0 to fit on every pair of the run, or N > 0 to fit on the
	// most recent N pairs only.
	Window int `yaml:"window" json:"window"`
}

// Default is the configuration used by training runs: PAVA on every pair of
// the run, identity until 32 pairs (four anchor groups of eight) exist.
func Default() Config {
	return Config{Method: MethodPAVA, Bins: 10, MinPairs: 32, Window: 0}
}

// Limits of the fields, generous but finite so that a typo in a run's
// configuration cannot ask for an absurd fit.
const (
	maxBins  = 1_000_000
	maxPairs = math.MaxInt32
)

// Validate reports the first invalid field, by its name.
func (c Config) Validate() error {
	switch {
	case c.Method != MethodPAVA && c.Method != MethodBinned:
		return fielderr.New("method", "%q is not %q or %q", c.Method, MethodPAVA, MethodBinned)
	case c.Bins < 1 || c.Bins > maxBins:
		return fielderr.New("bins", "%d, want 1 to %d", c.Bins, maxBins)
	case c.MinPairs < 0 || c.MinPairs > maxPairs:
		return fielderr.New("min_pairs", "%d, want 0 to %d", c.MinPairs, maxPairs)
	case c.Window < 0 || c.Window > maxPairs:
		return fielderr.New("window", "%d, want 0 (all pairs) to %d", c.Window, maxPairs)
	}
	return nil
}

// Windowed returns the pairs the map is fitted on: the last Window pairs,
// or all of them when Window is 0. The result shares memory with pairs.
func (c Config) Windowed(pairs []Pair) []Pair {
	if c.Window > 0 && len(pairs) > c.Window {
		return pairs[len(pairs)-c.Window:]
	}
	return pairs
}

// Fit returns the calibration map for pairs under cfg: the identity (no
// knots) while the window holds fewer than MinPairs pairs (or none), else the
// isotonic fit of Env on WM over the window, each pair weighted by its
// Weight (all 1 when no pair has one). Pairs must hold finite scores.
func Fit(pairs []Pair, cfg Config) (isotonic.Map, error) {
	if err := cfg.Validate(); err != nil {
		return isotonic.Map{}, fmt.Errorf("debias config: %w", err)
	}
	w := cfg.Windowed(pairs)
	if len(w) == 0 || len(w) < cfg.MinPairs {
		return isotonic.Map{}, nil
	}
	x := make([]float64, len(w))
	y := make([]float64, len(w))
	var wt []float64 // nil: unit weights, the fit of pairs without weights
	for i, p := range w {
		x[i], y[i] = p.WM, p.Env
		if p.W() != 1 && wt == nil {
			wt = make([]float64, len(w))
			for j := range i {
				wt[j] = w[j].W()
			}
		}
		if wt != nil {
			wt[i] = p.W()
		}
	}
	var (
		m   isotonic.Map
		err error
	)
	if cfg.Method == MethodBinned {
		m, err = isotonic.FitBinnedWeighted(x, y, wt, cfg.Bins)
	} else {
		m, err = isotonic.Fit(x, y, wt)
	}
	if err != nil {
		return isotonic.Map{}, fmt.Errorf("fit %s: %w", cfg.Method, err)
	}
	return m, nil
}

// checkPair rejects pairs the fit cannot use.
func checkPair(p Pair) error {
	if math.IsNaN(p.WM) || math.IsInf(p.WM, 0) {
		return fmt.Errorf("wm score %v is not finite", p.WM)
	}
	if math.IsNaN(p.Env) || math.IsInf(p.Env, 0) {
		return fmt.Errorf("env score %v is not finite", p.Env)
	}
	if math.IsNaN(p.Weight) || math.IsInf(p.Weight, 0) || p.Weight < 0 {
		return fmt.Errorf("weight %v is not finite and at least 0", p.Weight)
	}
	return nil
}
