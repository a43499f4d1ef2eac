package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// WorldModelVersion is one refreshed world model of a run
// (world_model.refresh): trained on the frozen model's data plus the run's
// anchor pairs of steps 0..Step, it scores the steps after Step. The
// artefact is the file at Location, whose sha256 is Hash.
type WorldModelVersion struct {
	Run      string `json:"run"`
	Step     int    `json:"step"`
	Hash     string `json:"hash"`
	Location string `json:"location"`
	// Base is the checksum of the frozen model the version extends.
	Base string `json:"base"`
	// BaseExamples and Pairs count the training examples: the frozen
	// model's own and the run's anchor pairs.
	BaseExamples  int     `json:"base_examples"`
	Pairs         int     `json:"pairs"`
	TrainMSE      float64 `json:"train_mse"`
	TrainSpearman float64 `json:"train_spearman"`
}

// SaveWorldModelVersion records a refreshed world model: a no-op when the
// same version is recorded for (run, step) (wherever its file was written),
// an ErrConflict when another is.
func (s *Store) SaveWorldModelVersion(ctx context.Context, v WorldModelVersion) error {
	switch {
	case v.Run == "" || v.Step < 0 || !sha256Hex.MatchString(v.Hash) || v.Location == "" || v.Base == "":
		return fmt.Errorf("save world model version: invalid %+v", v)
	case v.BaseExamples < 0 || v.Pairs < 0 || !finite(v.TrainMSE) || !finite(v.TrainSpearman):
		return fmt.Errorf("save world model version %s step %d: invalid counts or metrics %+v", v.Run, v.Step, v)
	}
	err := insertOne(ctx, s.pool, `INSERT INTO world_model_versions (run_id, step, hash, location, base, base_examples,
			pairs, train_mse, train_spearman) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (run_id, step) DO NOTHING`,
		`SELECT (hash, base, base_examples, pairs, train_mse, train_spearman) IS NOT DISTINCT FROM
			($3::text, $5::text, $6::int, $7::int, $8::float8, $9::float8)
		FROM world_model_versions WHERE run_id = $1 AND step = $2 AND $4::text IS NOT NULL`,
		v.Run, v.Step, v.Hash, v.Location, v.Base, v.BaseExamples, v.Pairs, v.TrainMSE, v.TrainSpearman)
	if err != nil {
		return fmt.Errorf("save world model version %s step %d: %w", v.Run, v.Step, err)
	}
	return nil
}

const wmVersionColumns = `run_id, step, hash, location, base, base_examples, pairs, train_mse, train_spearman`

func scanWMVersion(r pgx.CollectableRow) (WorldModelVersion, error) {
	var v WorldModelVersion
	err := r.Scan(&v.Run, &v.Step, &v.Hash, &v.Location, &v.Base, &v.BaseExamples, &v.Pairs, &v.TrainMSE, &v.TrainSpearman)
	return v, err
}

// WorldModelVersionAt returns the version refreshed after step of a run,
// or an error wrapping ErrNotFound.
func (s *Store) WorldModelVersionAt(ctx context.Context, run string, step int) (WorldModelVersion, error) {
	return s.wmVersion(ctx, fmt.Sprintf("world model version of %s at step %d", run, step),
		`WHERE run_id = $1 AND step = $2`, run, step)
}

// WorldModelVersionByHash returns a run's version with the given content
// hash (the earliest, should two refreshes give the same model), or an
// error wrapping ErrNotFound.
func (s *Store) WorldModelVersionByHash(ctx context.Context, run, hash string) (WorldModelVersion, error) {
	return s.wmVersion(ctx, fmt.Sprintf("world model %.12s of %s", hash, run),
		`WHERE run_id = $1 AND hash = $2 ORDER BY step LIMIT 1`, run, hash)
}

func (s *Store) wmVersion(ctx context.Context, what, where string, args ...any) (WorldModelVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+wmVersionColumns+` FROM world_model_versions `+where, args...)
	if err != nil {
		return WorldModelVersion{}, fmt.Errorf("%s: %w", what, err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanWMVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// WorldModelVersions returns a run's refreshed world models in step order.
func (s *Store) WorldModelVersions(ctx context.Context, run string) ([]WorldModelVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+wmVersionColumns+` FROM world_model_versions
		WHERE run_id = $1 ORDER BY step`, run)
	if err != nil {
		return nil, fmt.Errorf("world model versions of %s: %w", run, err)
	}
	vs, err := pgx.CollectRows(rows, scanWMVersion)
	if err != nil {
		return nil, fmt.Errorf("world model versions of %s: %w", run, err)
	}
	return vs, nil
}

// AnchorPairsFrom is AnchorPairs restricted to the pairs of steps from..upTo:
// the window of a run whose world model was refreshed after step from−1,
// so that the map is fitted only on pairs the current version scored.
func (s *Store) AnchorPairsFrom(ctx context.Context, run string, from, upTo, window int) ([]AnchorPair, error) {
	if window < 0 || from < 0 {
		return nil, fmt.Errorf("anchor pairs: window %d, from step %d, want both >= 0", window, from)
	}
	limit := any(nil) // LIMIT NULL is no limit
	if window > 0 {
		limit = window
	}
	rows, err := s.pool.Query(ctx, `SELECT run_id, step, grp, sample, wm, env, weight FROM (
			SELECT run_id, step, grp, sample, wm, env, weight FROM anchor_pairs
			WHERE run_id = $1 AND step <= $2 AND step >= $4
			ORDER BY step DESC, grp DESC, sample DESC LIMIT $3) w
		ORDER BY step, grp, sample`, run, upTo, limit, from)
	if err != nil {
		return nil, fmt.Errorf("anchor pairs: %w", err)
	}
	ps, err := pgx.CollectRows(rows, scanPair)
	if err != nil {
		return nil, fmt.Errorf("anchor pairs: %w", err)
	}
	return ps, nil
}
