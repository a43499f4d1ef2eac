package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/isotonic"
)

// AnchorPair is the world model's score and the real score of one executed
// anchor trajectory.
type AnchorPair struct {
	Key
	WM  float64 `json:"wm"`
	Env float64 `json:"env"`
	// Weight is the pair's weight in the calibration (debias.Pair.Weight):
	// 0 means 1, is stored as 1, and a stored 1 reads back as 0, so pairs
	// of uniform selection read (and encode) as they did before weights.
	Weight float64 `json:"weight,omitempty"`
}

// Pair returns p as a calibration pair; its group names the step and group
// ("3/7"), so that groups of different steps stay apart. A weight of 1 is
// left out (debias.Pair's 0).
func (p AnchorPair) Pair() debias.Pair {
	d := debias.Pair{WM: p.WM, Env: p.Env, Group: fmt.Sprintf("%d/%d", p.Step, p.Group)}
	if p.Weight != 1 {
		d.Weight = p.Weight
	}
	return d
}

// RecordAnchorPairs stores anchor pairs and returns how many were new. A
// pair stored before with the same scores and weight is skipped; with
// different ones it is an ErrConflict and nothing is stored. Each pair's
// trajectory must be stored. Scores must be finite; a weight 0 means 1,
// otherwise it must be finite and positive.
func (s *Store) RecordAnchorPairs(ctx context.Context, pairs []AnchorPair) (int, error) {
	if len(pairs) == 0 {
		return 0, nil
	}
	keys, wm, env := make([]Key, len(pairs)), make([]float64, len(pairs)), make([]float64, len(pairs))
	weight := make([]float64, len(pairs))
	for i, p := range pairs {
		if !finite(p.WM) || !finite(p.Env) {
			return 0, fmt.Errorf("record anchor pairs: %s: non-finite score (wm %v, env %v)", p.Key, p.WM, p.Env)
		}
		if !finite(p.Weight) || p.Weight < 0 {
			return 0, fmt.Errorf("record anchor pairs: %s: weight %v, want 0 (1) or a finite positive value", p.Key, p.Weight)
		}
		keys[i], wm[i], env[i], weight[i] = p.Key, p.WM, p.Env, p.Weight
		if weight[i] == 0 {
			weight[i] = 1
		}
	}
	b, err := keyBatch("anchor_pairs", keys, []string{"wm", "env", "weight"}, []string{"float8", "float8", "float8"},
		wm, env, weight)
	if err != nil {
		return 0, fmt.Errorf("record anchor pairs: %w", err)
	}
	var n int
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := missing(ctx, tx, b, "trajectories"); err != nil {
			return err
		}
		var err error
		n, err = insertNew(ctx, tx, b, b.cols)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record anchor pairs: %w", err)
	}
	return n, nil
}

// AnchorPairs returns the calibration window of a run at step upTo: its
// anchor pairs of steps 0..upTo, limited to the most recent window pairs
// when window > 0 (first in, first out), in (step, group, sample) order.
// The same stored pairs always give the same slice.
func (s *Store) AnchorPairs(ctx context.Context, run string, upTo, window int) ([]AnchorPair, error) {
	return s.AnchorPairsFrom(ctx, run, 0, upTo, window)
}

// StepAnchorPairs returns the anchor pairs recorded at one step, in (group,
// sample) order.
func (s *Store) StepAnchorPairs(ctx context.Context, run string, step int) ([]AnchorPair, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, step, grp, sample, wm, env, weight FROM anchor_pairs
		WHERE run_id = $1 AND step = $2 ORDER BY grp, sample`, run, step)
	if err != nil {
		return nil, fmt.Errorf("step anchor pairs %s step %d: %w", run, step, err)
	}
	ps, err := pgx.CollectRows(rows, scanPair)
	if err != nil {
		return nil, fmt.Errorf("step anchor pairs %s step %d: %w", run, step, err)
	}
	return ps, nil
}

func scanPair(r pgx.CollectableRow) (AnchorPair, error) {
	var p AnchorPair
	err := r.Scan(&p.Run, &p.Step, &p.Group, &p.Sample, &p.WM, &p.Env, &p.Weight)
	if p.Weight == 1 {
		p.Weight = 0
	}
	return p, err
}

// Calibration is the calibration map fitted at a step.
type Calibration struct {
	Run  string       `json:"run"`
	Step int          `json:"step"`
	Map  isotonic.Map `json:"map"`
	// NPairs is the number of anchor pairs the map was fitted on.
	NPairs int `json:"n_pairs"`
	// BiasBefore and BiasAfter are the window's mean bias before and after
	// the map, nil when undefined.
	BiasBefore *float64 `json:"bias_before,omitempty"`
	BiasAfter  *float64 `json:"bias_after,omitempty"`
}

// SaveCalibration stores the map of a step: a no-op if the same values are
// stored, an ErrConflict if different ones are. The map must be valid.
func (s *Store) SaveCalibration(ctx context.Context, c Calibration) error {
	if c.Run == "" || c.Step < 0 || c.NPairs < 0 {
		return fmt.Errorf("save calibration: invalid run %q step %d pairs %d", c.Run, c.Step, c.NPairs)
	}
	if err := c.Map.Validate(); err != nil {
		return fmt.Errorf("save calibration %s step %d: %w", c.Run, c.Step, err)
	}
	for _, b := range []*float64{c.BiasBefore, c.BiasAfter} {
		if b != nil && !finite(*b) {
			return fmt.Errorf("save calibration %s step %d: non-finite bias %v", c.Run, c.Step, *b)
		}
	}
	knots, err := json.Marshal(c.Map)
	if err != nil {
		return fmt.Errorf("save calibration %s step %d: %w", c.Run, c.Step, err)
	}
	err = insertOne(ctx, s.pool, `INSERT INTO calibration_maps (run_id, step, knots, n_pairs, bias_before, bias_after)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, step) DO NOTHING`,
		`SELECT (knots, n_pairs, bias_before, bias_after) IS NOT DISTINCT FROM ($3::jsonb, $4::int, $5::float8, $6::float8)
		FROM calibration_maps WHERE run_id = $1 AND step = $2`,
		c.Run, c.Step, knots, c.NPairs, c.BiasBefore, c.BiasAfter)
	if err != nil {
		return fmt.Errorf("save calibration %s step %d: %w", c.Run, c.Step, err)
	}
	return nil
}

// Calibration returns the map stored for a step, or an error wrapping
// ErrNotFound.
func (s *Store) Calibration(ctx context.Context, run string, step int) (Calibration, error) {
	c, err := s.calibration(ctx, `WHERE run_id = $1 AND step = $2`, run, step)
	if err != nil {
		return c, fmt.Errorf("calibration %s step %d: %w", run, step, err)
	}
	return c, nil
}

// LatestCalibration returns the map of the latest step at or before upTo
// that has one (what a run resumed after step upTo starts from), or an error
// wrapping ErrNotFound.
func (s *Store) LatestCalibration(ctx context.Context, run string, upTo int) (Calibration, error) {
	c, err := s.calibration(ctx, `WHERE run_id = $1 AND step <= $2 ORDER BY step DESC LIMIT 1`, run, upTo)
	if err != nil {
		return c, fmt.Errorf("latest calibration %s up to step %d: %w", run, upTo, err)
	}
	return c, nil
}

// Calibrations returns every map stored for a run, in step order, in one
// query.
func (s *Store) Calibrations(ctx context.Context, run string) ([]Calibration, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, step, knots, n_pairs, bias_before, bias_after
		FROM calibration_maps WHERE run_id = $1 ORDER BY step`, run)
	if err != nil {
		return nil, fmt.Errorf("calibrations %s: %w", run, err)
	}
	cs, err := pgx.CollectRows(rows, scanCalibration)
	if err != nil {
		return nil, fmt.Errorf("calibrations %s: %w", run, err)
	}
	return cs, nil
}

func scanCalibration(row pgx.CollectableRow) (Calibration, error) {
	var c Calibration
	var knots []byte
	if err := row.Scan(&c.Run, &c.Step, &knots, &c.NPairs, &c.BiasBefore, &c.BiasAfter); err != nil {
		return c, err
	}
	if err := json.Unmarshal(knots, &c.Map); err != nil {
		return c, fmt.Errorf("step %d: decode knots: %w", c.Step, err)
	}
	return c, nil
}

func (s *Store) calibration(ctx context.Context, where string, args ...any) (Calibration, error) {
	var c Calibration
	var knots []byte
	err := s.pool.QueryRow(ctx, `SELECT run_id, step, knots, n_pairs, bias_before, bias_after
		FROM calibration_maps `+where, args...).Scan(&c.Run, &c.Step, &knots, &c.NPairs, &c.BiasBefore, &c.BiasAfter)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNotFound
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(knots, &c.Map); err != nil {
		return c, fmt.Errorf("decode knots: %w", err)
	}
	return c, nil
}

// FusionState is the denoiser's state after a step and the rho it gave.
type FusionState struct {
	Run   string        `json:"run"`
	Step  int           `json:"step"`
	State denoise.State `json:"state"`
	Rho   float64       `json:"rho"`
}

// SaveFusionState stores the fusion state of a step: a no-op if the same
// values are stored, an ErrConflict if different ones are.
func (s *Store) SaveFusionState(ctx context.Context, f FusionState) error {
	if f.Run == "" || f.Step < 0 {
		return fmt.Errorf("save fusion state: invalid run %q step %d", f.Run, f.Step)
	}
	if !finite(f.Rho) || !finite(f.State.Eta2) || !finite(f.State.Eta2Cal) {
		return fmt.Errorf("save fusion state %s step %d: non-finite value", f.Run, f.Step)
	}
	state, err := json.Marshal(f.State)
	if err != nil {
		return fmt.Errorf("save fusion state %s step %d: %w", f.Run, f.Step, err)
	}
	err = insertOne(ctx, s.pool, `INSERT INTO fusion_states (run_id, step, state, rho)
		VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, step) DO NOTHING`,
		`SELECT (state, rho) IS NOT DISTINCT FROM ($3::jsonb, $4::float8)
		FROM fusion_states WHERE run_id = $1 AND step = $2`,
		f.Run, f.Step, state, f.Rho)
	if err != nil {
		return fmt.Errorf("save fusion state %s step %d: %w", f.Run, f.Step, err)
	}
	return nil
}

// FusionState returns the fusion state stored for a step, or an error
// wrapping ErrNotFound.
func (s *Store) FusionState(ctx context.Context, run string, step int) (FusionState, error) {
	f, err := s.fusionState(ctx, `WHERE run_id = $1 AND step = $2`, run, step)
	if err != nil {
		return f, fmt.Errorf("fusion state %s step %d: %w", run, step, err)
	}
	return f, nil
}

// LatestFusionState returns the fusion state of the latest step at or
// before upTo that has one, or an error wrapping ErrNotFound.
func (s *Store) LatestFusionState(ctx context.Context, run string, upTo int) (FusionState, error) {
	f, err := s.fusionState(ctx, `WHERE run_id = $1 AND step <= $2 ORDER BY step DESC LIMIT 1`, run, upTo)
	if err != nil {
		return f, fmt.Errorf("latest fusion state %s up to step %d: %w", run, upTo, err)
	}
	return f, nil
}

func (s *Store) fusionState(ctx context.Context, where string, args ...any) (FusionState, error) {
	var f FusionState
	var state []byte
	err := s.pool.QueryRow(ctx, `SELECT run_id, step, state, rho FROM fusion_states `+where, args...).
		Scan(&f.Run, &f.Step, &state, &f.Rho)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, ErrNotFound
	}
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(state, &f.State); err != nil {
		return f, fmt.Errorf("decode state: %w", err)
	}
	return f, nil
}
