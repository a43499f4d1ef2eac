package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wmrl/wmrl/internal/deployenv"
)

var (
	// ErrNotFound is returned (wrapped) when a requested row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned (wrapped) when a key is written again with
	// values different from the stored ones.
	ErrConflict = errors.New("conflicting values for an existing key")
)

// Store is a handle on the wmrl database. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects to the database at dsn (a libpq keyword/value string such as
// "host=/var/run/postgresql user=postgres dbname=wmrl" or a postgres:// URL)
// and checks that it answers.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s on %s: %w", cfg.ConnConfig.Database, where(cfg), err)
	}
	return &Store{pool: pool}, nil
}

func where(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	if len(c.Host) > 0 && c.Host[0] == '/' {
		return fmt.Sprintf("socket %s/.s.PGSQL.%d", c.Host, c.Port)
	}
	return fmt.Sprintf("%s:%d", c.Host, c.Port)
}

// Close releases the connections.
func (s *Store) Close() { s.pool.Close() }

// querier is what both a pool, a connection and a transaction can do.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ querier = (*pgxpool.Pool)(nil)
	_ querier = (*pgxpool.Conn)(nil)
	_ querier = (pgx.Tx)(nil)
)

// DefaultDSN is the database of the local stack that deploy/postgres.sh
// creates: the Debian cluster's Unix socket, database wmrl.
const DefaultDSN = deployenv.DefaultDatabaseURL

// Pool is the store's connection pool, for a service that keeps its own
// tables in the same database (the built-in Tinker server).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
