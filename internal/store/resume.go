package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ResumeRun creates run r, started from step r.ResumedStep of run
// r.ResumedFrom, as a copy of that run's history up to that step: its steps,
// trajectories (and their turns), anchor pairs, calibration maps and fusion states of steps
// 0..ResumedStep, its evaluations and checkpoints up to version
// ResumedStep+1 (the same weight files), all in one transaction with the
// new run's row: a resume that fails leaves no run behind. The new
// run then fits its calibration window and continues its checkpoint
// versions exactly as the old one would have. Step ResumedStep of the old
// run must be completed. Calling it again for the same run is a no-op; a
// stored run r.ID with other fixed fields is an ErrConflict.
func (s *Store) ResumeRun(ctx context.Context, r Run) error {
	if r.ResumedFrom == "" || r.ResumedFrom == r.ID {
		return fmt.Errorf("resume run %s: want another run to resume from, got %q", r.ID, r.ResumedFrom)
	}
	from, upTo := r.ResumedFrom, r.ResumedStep
	last, ok, err := s.LastCompletedStep(ctx, from)
	if err != nil {
		return fmt.Errorf("resume run %s: %w", r.ID, err)
	}
	if !ok || last < upTo {
		return fmt.Errorf("resume run %s: step %d of run %s is not completed: %w", r.ID, upTo, from, ErrNotFound)
	}
	copies := []struct{ table, sql string }{
		{"steps", `INSERT INTO steps (run_id, step, status, metrics, started_at, finished_at)
			SELECT $2, step, status, metrics, started_at, finished_at FROM steps
			WHERE run_id = $1 AND step <= $3 AND status = 'completed'
			ON CONFLICT DO NOTHING`},
		{"trajectories", `INSERT INTO trajectories (run_id, step, grp, sample, task_id, program, anchor, wm_score,
				status, env_score, metric, position, detail, cpu_seconds, wall_seconds, created_at, executed_at)
			SELECT $2, step, grp, sample, task_id, program, anchor, wm_score,
				status, env_score, metric, position, detail, cpu_seconds, wall_seconds, created_at, executed_at
			FROM trajectories WHERE run_id = $1 AND step <= $3
			ON CONFLICT DO NOTHING`},
		{"turns", `INSERT INTO turns (run_id, step, grp, sample, turn, action, completion, source, observation, status,
				reward, wm_reward, cpu_seconds, wall_seconds, wm_tokens, unexecuted, created_at, answered_at)
			SELECT $2, step, grp, sample, turn, action, completion, source, observation, status,
				reward, wm_reward, cpu_seconds, wall_seconds, wm_tokens, unexecuted, created_at, answered_at
			FROM turns WHERE run_id = $1 AND step <= $3
			ON CONFLICT DO NOTHING`},
		{"anchor pairs", `INSERT INTO anchor_pairs (run_id, step, grp, sample, wm, env, weight, created_at)
			SELECT $2, step, grp, sample, wm, env, weight, created_at FROM anchor_pairs WHERE run_id = $1 AND step <= $3
			ON CONFLICT DO NOTHING`},
		{"calibration maps", `INSERT INTO calibration_maps (run_id, step, knots, n_pairs, bias_before, bias_after, created_at)
			SELECT $2, step, knots, n_pairs, bias_before, bias_after, created_at FROM calibration_maps
			WHERE run_id = $1 AND step <= $3
			ON CONFLICT DO NOTHING`},
		{"fusion states", `INSERT INTO fusion_states (run_id, step, state, rho, created_at)
			SELECT $2, step, state, rho, created_at FROM fusion_states WHERE run_id = $1 AND step <= $3
			ON CONFLICT DO NOTHING`},
		{"checkpoints", `INSERT INTO checkpoints (run_id, version, hash, location, state, created_at)
			SELECT $2, version, hash, location, state, created_at FROM checkpoints WHERE run_id = $1 AND version <= $3 + 1
			ON CONFLICT DO NOTHING`},
		{"evaluations", `INSERT INTO evaluations (run_id, step, task_id, sample, program, status, score, metric,
				position, detail, cpu_seconds, wall_seconds, executions, unexecuted, created_at)
			SELECT $2, step, task_id, sample, program, status, score, metric,
				position, detail, cpu_seconds, wall_seconds, executions, unexecuted, created_at
			FROM evaluations WHERE run_id = $1 AND step <= $3 + 1
			ON CONFLICT DO NOTHING`},
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := upsertRun(ctx, tx, r); err != nil {
			return err
		}
		for _, c := range copies {
			if _, err := tx.Exec(ctx, c.sql, from, r.ID, upTo); err != nil {
				return fmt.Errorf("copy %s: %w", c.table, err)
			}
		}
		var v int
		err := tx.QueryRow(ctx, `SELECT version FROM checkpoints WHERE run_id = $1 AND version = $2`, r.ID, upTo+1).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("checkpoint %d of run %s: %w", upTo+1, from, ErrNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("resume run %s from %s step %d: %w", r.ID, from, upTo, err)
	}
	return nil
}

// ContinueCheckpoint replaces the checkpoint that ResumeRun copied into
// resumed run c.Run at version resumed_step+1 with c: the same policy state
// in the new run's own model, for a policy whose state a training service
// keeps (policy.backend tinker: the new model loads the old run's training
// weights). It refuses (ErrConflict) any other version and a run that was
// not resumed; writing the same checkpoint again is a no-op.
func (s *Store) ContinueCheckpoint(ctx context.Context, c Checkpoint) error {
	if c.Run == "" || c.Hash == "" || c.Location == "" {
		return fmt.Errorf("continue checkpoint: want a run, a hash and a location, got %+v", c)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE checkpoints SET hash = $3, location = $4, state = $5
		WHERE run_id = $1 AND version = $2
		AND version = (SELECT resumed_step + 1 FROM runs WHERE id = $1 AND resumed_from IS NOT NULL)`,
		c.Run, c.Version, c.Hash, c.Location, c.State)
	if err != nil {
		return fmt.Errorf("continue checkpoint %s version %d: %w", c.Run, c.Version, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("continue checkpoint %s version %d: not the first checkpoint of a resumed run: %w", c.Run, c.Version, ErrConflict)
	}
	return nil
}
