package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/wmrl/wmrl/internal/mode"
)

// RunState is the life-cycle state of a run.
type RunState string

// Run states.
const (
	RunRunning    RunState = "running"
	RunPaused     RunState = "paused"
	RunStopping   RunState = "stopping" // stops after the current step
	RunCompleted  RunState = "completed"
	RunFailed     RunState = "failed"
	RunTerminated RunState = "terminated"
)

// Valid reports whether s is a known state.
func (s RunState) Valid() bool {
	switch s {
	case RunRunning, RunPaused, RunStopping, RunCompleted, RunFailed, RunTerminated:
		return true
	}
	return false
}

// Run is a training run. ID, Name, Mode, Config, Seed, Steps and the resume
// origin are fixed when the run is created; State changes.
type Run struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Mode   mode.Mode       `json:"mode"`
	Config json.RawMessage `json:"config"` // the validated run configuration
	Seed   uint64          `json:"seed"`
	Steps  int             `json:"steps"` // planned number of steps
	State  RunState        `json:"state"`
	// ResumedFrom and ResumedStep name the run and its last completed step
	// this run was started from ("" when it was started fresh).
	ResumedFrom string `json:"resumed_from,omitempty"`
	ResumedStep int    `json:"resumed_step,omitempty"`
	// Termination is set when the run was terminated (TerminateRun).
	Termination *Termination `json:"termination,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
}

// Termination records why and when a run was terminated.
type Termination struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// UpsertRun creates the run or, if it exists with the same fixed fields,
// sets its state (a terminated run stays terminated). An existing run with other fixed fields is an ErrConflict.
// CreatedAt and UpdatedAt are set by the database.
func (s *Store) UpsertRun(ctx context.Context, r Run) error {
	return upsertRun(ctx, s.pool, r)
}

func upsertRun(ctx context.Context, q querier, r Run) error {
	if r.ID == "" {
		return fmt.Errorf("upsert run: empty id")
	}
	if _, err := mode.Parse(string(r.Mode)); err != nil {
		return fmt.Errorf("upsert run %s: %w", r.ID, err)
	}
	if !r.State.Valid() {
		return fmt.Errorf("upsert run %s: unknown state %q", r.ID, r.State)
	}
	if r.Steps < 0 || r.ResumedStep < 0 || (r.ResumedFrom == "" && r.ResumedStep != 0) {
		return fmt.Errorf("upsert run %s: invalid steps %d or resume step %d", r.ID, r.Steps, r.ResumedStep)
	}
	if !json.Valid(r.Config) {
		return fmt.Errorf("upsert run %s: config is not valid JSON", r.ID)
	}
	var from *string
	var fromStep *int
	if r.ResumedFrom != "" {
		from, fromStep = &r.ResumedFrom, &r.ResumedStep
	}
	// The update applies only when the fixed fields match; no row back
	// means they do not.
	var id string
	err := q.QueryRow(ctx, `INSERT INTO runs (id, name, mode, config, seed, steps, state, resumed_from, resumed_step)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (id) DO UPDATE SET
			state = CASE WHEN runs.state = 'terminated' THEN runs.state ELSE EXCLUDED.state END,
			updated_at = CASE WHEN runs.state IN (EXCLUDED.state, 'terminated') THEN runs.updated_at ELSE now() END
		WHERE (runs.name, runs.mode, runs.config, runs.seed, runs.steps, runs.resumed_from, runs.resumed_step)
			IS NOT DISTINCT FROM (EXCLUDED.name, EXCLUDED.mode, EXCLUDED.config, EXCLUDED.seed, EXCLUDED.steps,
			EXCLUDED.resumed_from, EXCLUDED.resumed_step)
		RETURNING id`,
		r.ID, r.Name, string(r.Mode), []byte(r.Config), int64(r.Seed), r.Steps, string(r.State), from, fromStep).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("upsert run %s: stored run has other fixed fields: %w", r.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("upsert run %s: %w", r.ID, err)
	}
	return nil
}

// SetRunState sets the state of an existing run. A terminated run stays
// terminated: an activity of its workflow that was still running when the
// workflow was terminated cannot undo the termination.
func (s *Store) SetRunState(ctx context.Context, id string, state RunState) error {
	if !state.Valid() {
		return fmt.Errorf("set run state %s: unknown state %q", id, state)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET
		state = CASE WHEN state = 'terminated' THEN state ELSE $2 END,
		updated_at = CASE WHEN state = $2 OR state = 'terminated' THEN updated_at ELSE now() END
		WHERE id = $1`, id, string(state))
	if err != nil {
		return fmt.Errorf("set run state %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set run state %s: %w", id, ErrNotFound)
	}
	return nil
}

// runsFrom and runColumns select runs with their terminations.
const (
	runsFrom   = `runs LEFT JOIN run_terminations t ON t.run_id = runs.id`
	runColumns = `id, name, mode, config, seed, steps, state, coalesce(resumed_from, ''), coalesce(resumed_step, 0),
		t.reason, t.terminated_at, created_at, updated_at`
)

func scanRun(row pgx.CollectableRow) (Run, error) {
	var r Run
	var m, state string
	var seed int64
	var config []byte
	var reason *string
	var at *time.Time
	err := row.Scan(&r.ID, &r.Name, &m, &config, &seed, &r.Steps, &state, &r.ResumedFrom, &r.ResumedStep,
		&reason, &at, &r.CreatedAt, &r.UpdatedAt)
	r.Mode, r.State, r.Seed, r.Config = mode.Mode(m), RunState(state), uint64(seed), json.RawMessage(config)
	if reason != nil && at != nil {
		r.Termination = &Termination{Reason: *reason, At: *at}
	}
	return r, err
}

// Run returns a run, or an error wrapping ErrNotFound.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM `+runsFrom+` WHERE id = $1`, id)
	if err != nil {
		return Run{}, fmt.Errorf("run %s: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("run %s: %w", id, err)
	}
	return r, nil
}

// Runs returns up to limit runs, newest first (all when limit <= 0).
func (s *Store) Runs(ctx context.Context, limit int) ([]Run, error) {
	var lim any // LIMIT NULL is no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM `+runsFrom+` ORDER BY created_at DESC, id LIMIT $1`, lim)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	rs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return rs, nil
}

// TerminateRun records that run id was terminated, and why: its state
// becomes terminated and its termination is stored with the time. A run
// already terminated keeps its first termination, which is returned;
// otherwise the new one is.
func (s *Store) TerminateRun(ctx context.Context, id, reason string) (Termination, error) {
	var t Termination
	if strings.TrimSpace(reason) == "" {
		return t, fmt.Errorf("terminate run %s: want a reason", id)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE runs SET state = 'terminated',
			updated_at = CASE WHEN state = 'terminated' THEN updated_at ELSE now() END WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		if _, err := tx.Exec(ctx, `INSERT INTO run_terminations (run_id, reason) VALUES ($1, $2)
			ON CONFLICT (run_id) DO NOTHING`, id, reason); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT reason, terminated_at FROM run_terminations WHERE run_id = $1`, id).
			Scan(&t.Reason, &t.At)
	})
	if err != nil {
		return Termination{}, fmt.Errorf("terminate run %s: %w", id, err)
	}
	return t, nil
}
