package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/wmrl/wmrl/internal/executor"
)

// Evaluation is one held-out execution: the Sample-th program sampled for a
// held-out task at a step, really executed.
type Evaluation struct {
	Run     string          `json:"run"`
	Step    int             `json:"step"`
	TaskID  string          `json:"task_id"`
	Sample  int             `json:"sample"`
	Program string          `json:"program"`
	Result  executor.Result `json:"result"`
}

// SaveEvaluations stores held-out executions and returns how many were new.
// Like RecordExecutions, the first write of a key wins: a retried
// evaluation's result (other timings) is ignored.
func (s *Store) SaveEvaluations(ctx context.Context, evs []Evaluation) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	rows := make([][]any, len(evs))
	for i, e := range evs {
		if e.Run == "" || e.Step < 0 || e.TaskID == "" || e.Sample < 0 {
			return 0, fmt.Errorf("save evaluations: invalid key %s/step-%d/%s/sample-%d", e.Run, e.Step, e.TaskID, e.Sample)
		}
		if err := checkResult(e.Result); err != nil {
			return 0, fmt.Errorf("save evaluations: %s/step-%d/%s/sample-%d: %w", e.Run, e.Step, e.TaskID, e.Sample, err)
		}
		r := e.Result
		rows[i] = []any{e.Run, e.Step, e.TaskID, e.Sample, e.Program, string(r.Status), r.Score, r.Metric, r.Position,
			r.Detail, r.CPUSeconds, r.WallSeconds}
	}
	t := table{name: "evaluations", key: []string{"run_id", "step", "task_id", "sample"},
		cols: []string{"program", "status", "score", "metric", "position", "detail", "cpu_seconds", "wall_seconds"}}
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := stage(ctx, tx, t, rows); err != nil {
			return err
		}
		var err error
		n, err = insertNew(ctx, tx, t, nil)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("save evaluations: %w", err)
	}
	return n, nil
}

// HeldOut is the held-out score of a step (DESIGN.md): the mean over its
// tasks of the mean leaderboard position of each task's samples, where a
// sample that did not run ok counts 0.
type HeldOut struct {
	Score   float64 `json:"score"`
	Tasks   int     `json:"tasks"`
	Samples int     `json:"samples"`
}

// HeldOutScore returns the held-out score of a step from its stored
// evaluations (zero Tasks when there are none).
func (s *Store) HeldOutScore(ctx context.Context, run string, step int) (HeldOut, error) {
	var h HeldOut
	var score *float64
	err := s.pool.QueryRow(ctx, `SELECT avg(task_mean), count(*), coalesce(sum(n), 0) FROM (
			SELECT avg(CASE WHEN status = 'ok' THEN position ELSE 0 END) AS task_mean, count(*) AS n FROM evaluations
			WHERE run_id = $1 AND step = $2 GROUP BY task_id) t`, run, step).Scan(&score, &h.Tasks, &h.Samples)
	if err != nil {
		return h, fmt.Errorf("held-out score %s step %d: %w", run, step, err)
	}
	h.Score = deref(score)
	return h, nil
}
