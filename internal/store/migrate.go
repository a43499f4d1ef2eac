package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/wmrl/wmrl/migrations"
)

// migrationLock is the pg_advisory_lock key held while migrating: the bytes
// of "wmrlmigr" as a big-endian int64.
const migrationLock int64 = 0x776d726c6d696772

// Migrate applies the embedded migrations that the database has not applied
// yet and returns them (none when the schema is current). See Apply.
func (s *Store) Migrate(ctx context.Context) ([]migrations.Migration, error) {
	ms, err := migrations.All()
	if err != nil {
		return nil, err
	}
	return s.Apply(ctx, ms)
}

// Apply brings the database to the migrations ms (in version order, as
// returned by migrations.Load) and returns those it applied. It holds a
// session advisory lock for the whole time, so concurrent callers run one
// after the other and each migration is applied once. Every migration runs in
// its own transaction together with its row in schema_migrations. It fails,
// applying nothing, when an applied migration's text changed (checksum
// mismatch) or when the database has a migration that ms lacks.
func (s *Store) Apply(ctx context.Context, ms []migrations.Migration) ([]migrations.Migration, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return nil, fmt.Errorf("migrate: take lock: %w", err)
	}
	defer func() {
		// A failed unlock leaves the lock with this session; closing the
		// connection releases it.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		checksum   text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied, err := readApplied(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	byVersion := make(map[int]migrations.Migration, len(ms))
	for _, m := range ms {
		byVersion[m.Version] = m
	}
	done := make(map[int]bool, len(applied))
	for _, a := range applied {
		m, ok := byVersion[a.Version]
		if !ok {
			return nil, fmt.Errorf("migrate: database has migration %s (version %d) that this binary does not know; use a newer wmrl", a.Name, a.Version)
		}
		if m.Checksum != a.Checksum {
			return nil, fmt.Errorf("migrate: migration %s was changed after it was applied (checksum %.12s, applied %.12s); add a new migration instead", m.Name, m.Checksum, a.Checksum)
		}
		done[a.Version] = true
	}

	var out []migrations.Migration
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		if err := applyOne(ctx, conn.Conn(), m); err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

func applyOne(ctx context.Context, conn *pgx.Conn, m migrations.Migration) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// No arguments: pgx sends the text with the simple protocol, so a
		// file may hold many statements.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
			m.Version, m.Name, m.Checksum)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
	}
	return nil
}

// Applied returns the migrations recorded in the database, in version order
// (SQL is empty). It fails if the database was never migrated.
func (s *Store) Applied(ctx context.Context) ([]migrations.Migration, error) {
	return readApplied(ctx, s.pool)
}

func readApplied(ctx context.Context, q querier) ([]migrations.Migration, error) {
	rows, err := q.Query(ctx, "SELECT version, name, checksum FROM schema_migrations ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (migrations.Migration, error) {
		var m migrations.Migration
		err := r.Scan(&m.Version, &m.Name, &m.Checksum)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	return ms, nil
}
