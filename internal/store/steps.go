package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wmrl/wmrl/internal/stepsummary"
)

// StepStatus is the state of a training step.
type StepStatus string

// Step states.
const (
	StepRunning   StepStatus = "running"
	StepCompleted StepStatus = "completed"
	StepFailed    StepStatus = "failed"
)

// Step is one training step of a run and, once it ended, its metrics (all
// zero before).
type Step struct {
	Run     string           `json:"run"`
	Step    int              `json:"step"`
	Status  StepStatus       `json:"status"`
	Metrics stepsummary.Step `json:"metrics"`
	// FractionRecorded is false for a step recorded before the metrics
	// carried the anchor fraction (Metrics.AnchorFraction is then 0, not
	// the fraction the step used).
	FractionRecorded bool       `json:"-"`
	StartedAt        time.Time  `json:"started_at"`
	FinishedAt       *time.Time `json:"finished_at,omitempty"`
}

// StartStep records that a step started. It is a no-op if the step is
// already recorded, whatever its status.
func (s *Store) StartStep(ctx context.Context, run string, step int) error {
	if run == "" || step < 0 {
		return fmt.Errorf("start step: invalid run %q step %d", run, step)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO steps (run_id, step, status) VALUES ($1, $2, 'running')
		ON CONFLICT (run_id, step) DO NOTHING`, run, step)
	if err != nil {
		return fmt.Errorf("start step %s/%d: %w", run, step, err)
	}
	return nil
}

// FinishStep records the end of a step (StepCompleted or StepFailed) with
// its metrics, creating the row if StartStep was not called. A finished step
// is final: finishing it again with the same status and metrics is a no-op,
// with others an ErrConflict. Metrics must be finite. They are stored as
// their JSON, the same names as the name → number rows of earlier versions,
// so finishing such a row again with the same values is still a no-op.
func (s *Store) FinishStep(ctx context.Context, run string, step int, status StepStatus, m stepsummary.Step) error {
	if run == "" || step < 0 {
		return fmt.Errorf("finish step: invalid run %q step %d", run, step)
	}
	if status != StepCompleted && status != StepFailed {
		return fmt.Errorf("finish step %s/%d: status %q, want completed or failed", run, step, status)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("finish step %s/%d: %w", run, step, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("finish step %s/%d: %w", run, step, err)
	}
	var ok bool
	err = s.pool.QueryRow(ctx, `INSERT INTO steps AS d (run_id, step, status, metrics, finished_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (run_id, step) DO UPDATE SET status = EXCLUDED.status, metrics = EXCLUDED.metrics,
			finished_at = coalesce(d.finished_at, EXCLUDED.finished_at)
		WHERE d.status = 'running' OR (d.status, d.metrics) = (EXCLUDED.status, EXCLUDED.metrics)
		RETURNING true`, run, step, string(status), b).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("finish step %s/%d: step already finished with other values: %w", run, step, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("finish step %s/%d: %w", run, step, err)
	}
	return nil
}

// Steps returns the steps of a run in order.
func (s *Store) Steps(ctx context.Context, run string) ([]Step, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, step, status, metrics, started_at, finished_at
		FROM steps WHERE run_id = $1 ORDER BY step`, run)
	if err != nil {
		return nil, fmt.Errorf("steps %s: %w", run, err)
	}
	ss, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Step, error) {
		var st Step
		var status string
		var raw []byte
		if err := row.Scan(&st.Run, &st.Step, &status, &raw, &st.StartedAt, &st.FinishedAt); err != nil {
			return st, err
		}
		st.Status = StepStatus(status)
		if err := decodeMetrics(raw, &st); err != nil {
			return st, fmt.Errorf("decode metrics of step %d: %w", st.Step, err)
		}
		return st, nil
	})
	if err != nil {
		return nil, fmt.Errorf("steps %s: %w", run, err)
	}
	return ss, nil
}

// decodeMetrics reads a step's stored metrics: stepsummary.Step's JSON, or the
// name → number object of earlier versions (same names; whole numbers for
// the counts), where a missing name reads as 0. '{}' is a step that has not
// completed.
func decodeMetrics(raw []byte, st *Step) error {
	var recorded struct {
		AnchorFraction *float64 `json:"anchor_fraction"`
	}
	if err := json.Unmarshal(raw, &st.Metrics); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &recorded); err != nil {
		return err
	}
	st.FractionRecorded = recorded.AnchorFraction != nil
	return nil
}

// LastCompletedStep returns the highest completed step of a run; ok is false
// when none is completed.
func (s *Store) LastCompletedStep(ctx context.Context, run string) (step int, ok bool, err error) {
	var last *int
	err = s.pool.QueryRow(ctx, `SELECT max(step) FROM steps WHERE run_id = $1 AND status = 'completed'`, run).Scan(&last)
	if err != nil {
		return 0, false, fmt.Errorf("last completed step %s: %w", run, err)
	}
	if last == nil {
		return 0, false, nil
	}
	return *last, true, nil
}

// Counts is the number of rows a run has in each table.
type Counts struct {
	Steps        int `json:"steps"`
	Trajectories int `json:"trajectories"`
	Executed     int `json:"executed"` // trajectories with an execution result
	Anchors      int `json:"anchors"`  // trajectories marked as anchors
	AnchorPairs  int `json:"anchor_pairs"`
	Calibrations int `json:"calibrations"`
	FusionStates int `json:"fusion_states"`
	Checkpoints  int `json:"checkpoints"`
	Evaluations  int `json:"evaluations"`
}

// Count returns how many rows a run has in each table.
func (s *Store) Count(ctx context.Context, run string) (Counts, error) {
	var c Counts
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM steps WHERE run_id = $1),
		(SELECT count(*) FROM trajectories WHERE run_id = $1),
		(SELECT count(*) FROM trajectories WHERE run_id = $1 AND status IS NOT NULL),
		(SELECT count(*) FROM trajectories WHERE run_id = $1 AND anchor),
		(SELECT count(*) FROM anchor_pairs WHERE run_id = $1),
		(SELECT count(*) FROM calibration_maps WHERE run_id = $1),
		(SELECT count(*) FROM fusion_states WHERE run_id = $1),
		(SELECT count(*) FROM checkpoints WHERE run_id = $1),
		(SELECT count(*) FROM evaluations WHERE run_id = $1)`, run).
		Scan(&c.Steps, &c.Trajectories, &c.Executed, &c.Anchors, &c.AnchorPairs, &c.Calibrations,
			&c.FusionStates, &c.Checkpoints, &c.Evaluations)
	if err != nil {
		return c, fmt.Errorf("count %s: %w", run, err)
	}
	return c, nil
}
