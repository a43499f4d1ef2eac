package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Checkpoint is a stored policy version: the policy after Version updates,
// whose weights are at Location and hash to Hash.
type Checkpoint struct {
	Run      string `json:"run"`
	Version  int    `json:"version"`
	Hash     string `json:"hash"`
	Location string `json:"location"`
	// State is where the training state to continue from is kept, when
	// the policy keeps it apart from Location (a training service's
	// training weights with their optimiser state); empty otherwise.
	State string `json:"state,omitempty"`
}

// PutCheckpoint records a checkpoint version: a no-op if the same hash and
// location are stored for it, an ErrConflict if others are (an update that
// was applied twice, or differently, would show here).
func (s *Store) PutCheckpoint(ctx context.Context, c Checkpoint) error {
	if c.Run == "" || c.Version < 0 || c.Hash == "" || c.Location == "" {
		return fmt.Errorf("put checkpoint: want a run, a version >= 0, a hash and a location, got %+v", c)
	}
	err := insertOne(ctx, s.pool, `INSERT INTO checkpoints (run_id, version, hash, location, state)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id, version) DO NOTHING`,
		`SELECT (hash, location, state) = ($3::text, $4::text, $5::text) FROM checkpoints WHERE run_id = $1 AND version = $2`,
		c.Run, c.Version, c.Hash, c.Location, c.State)
	if err != nil {
		return fmt.Errorf("put checkpoint %s version %d: %w", c.Run, c.Version, err)
	}
	return nil
}

// Checkpoint returns a version of a run's policy, or an error wrapping
// ErrNotFound.
func (s *Store) Checkpoint(ctx context.Context, run string, version int) (Checkpoint, error) {
	c, err := s.checkpoint(ctx, `WHERE run_id = $1 AND version = $2`, run, version)
	if err != nil {
		return c, fmt.Errorf("checkpoint %s version %d: %w", run, version, err)
	}
	return c, nil
}

// LatestCheckpoint returns the highest version of a run's policy, or an
// error wrapping ErrNotFound.
func (s *Store) LatestCheckpoint(ctx context.Context, run string) (Checkpoint, error) {
	c, err := s.checkpoint(ctx, `WHERE run_id = $1 ORDER BY version DESC LIMIT 1`, run)
	if err != nil {
		return c, fmt.Errorf("latest checkpoint %s: %w", run, err)
	}
	return c, nil
}

func (s *Store) checkpoint(ctx context.Context, where string, args ...any) (Checkpoint, error) {
	var c Checkpoint
	err := s.pool.QueryRow(ctx, `SELECT run_id, version, hash, location, state FROM checkpoints `+where, args...).
		Scan(&c.Run, &c.Version, &c.Hash, &c.Location, &c.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNotFound
	}
	return c, err
}

// Checkpoints returns every checkpoint of a run in version order.
func (s *Store) Checkpoints(ctx context.Context, run string) ([]Checkpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, version, hash, location, state FROM checkpoints
		WHERE run_id = $1 ORDER BY version`, run)
	if err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", run, err)
	}
	cs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Checkpoint])
	if err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", run, err)
	}
	return cs, nil
}
