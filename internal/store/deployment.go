package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Deployment identifies the database of a wmrl deployment: its name and the
// random id made when it was migrated. Every worker of a deployment reads
// the same values, however it reaches the database (socket, host name or
// address); two databases never share an id.
type Deployment struct {
	Database string `json:"database"`
	ID       string `json:"id"`
}

// Deployment returns the database's identity.
func (s *Store) Deployment(ctx context.Context) (Deployment, error) {
	var d Deployment
	err := s.pool.QueryRow(ctx, `SELECT current_database(), id FROM deployment`).Scan(&d.Database, &d.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("deployment id: %w (run wmrl migrate)", ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("deployment id (run wmrl migrate): %w", err)
	}
	return d, nil
}
