package debias

import (
	"fmt"

	"github.com/wmrl/wmrl/internal/isotonic"
)

// Debiaser is the online debiaser as one plain value: the configuration, the
// pair window and the current map, JSON-serialisable. With Window > 0 it
// keeps only the most recent Window pairs, so its size is bounded. The
// orchestrated run does not use it: its Calibrate activity reads the pair
// window from Postgres and calls Fit at every step; only tests use it.
type Debiaser struct {
	Config Config       `json:"config"`
	Pairs  []Pair       `json:"pairs"`
	Map    isotonic.Map `json:"map"`
	// Seen counts every pair ever added, including those dropped by the window.
	Seen int `json:"seen"`
	// Steps counts the calls to Step.
	Steps int `json:"steps"`
}

// New returns an empty debiaser (identity map) for a valid cfg.
func New(cfg Config) (*Debiaser, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("debias config: %w", err)
	}
	return &Debiaser{Config: cfg}, nil
}

// Add appends pairs to the window, dropping the oldest beyond Window. It does
// not refit. A pair with a non-finite score is rejected and nothing is added.
func (d *Debiaser) Add(pairs ...Pair) error {
	for i, p := range pairs {
		if err := checkPair(p); err != nil {
			return fmt.Errorf("pair %d: %w", i, err)
		}
	}
	d.Pairs = append(d.Pairs, pairs...)
	d.Seen += len(pairs)
	if w := d.Config.Window; w > 0 && len(d.Pairs) > w {
		n := copy(d.Pairs, d.Pairs[len(d.Pairs)-w:])
		clear(d.Pairs[n:])
		d.Pairs = d.Pairs[:n]
	}
	return nil
}

// Refit recomputes Map from the current window.
func (d *Debiaser) Refit() error {
	m, err := Fit(d.Pairs, d.Config)
	if err != nil {
		return err
	}
	d.Map = m
	return nil
}

// Step is one training step: add the step's new anchor pairs, then refit.
// It returns the new map. On error the debiaser is unchanged.
func (d *Debiaser) Step(pairs []Pair) (isotonic.Map, error) {
	next := *d
	next.Pairs = append([]Pair(nil), d.Pairs...)
	if err := next.Add(pairs...); err != nil {
		return d.Map, fmt.Errorf("debias step: %w", err)
	}
	if err := next.Refit(); err != nil {
		return d.Map, fmt.Errorf("debias step: %w", err)
	}
	next.Steps++
	*d = next
	return d.Map, nil
}

// Apply maps one world-model score through the current map.
func (d *Debiaser) Apply(v float64) float64 { return d.Map.Apply(v) }
