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
	// Executions counts the sample's attempts: its turns in a multi-turn
	// policy's evaluation (Unexecuted of them executed nothing), its
	// attempts under eval.best_of; 0
	// means 1 (a single-shot sample; Evaluations reads 1 back as 0, so its
	// JSON is as before). Program and Result are the attempt
	// the evaluation's reduction chose, with the CPU and wall seconds of
	// all of them.
	Executions int `json:"executions,omitempty"`
	// Unexecuted counts the turns of Executions that executed nothing (a
	// multi-turn sample's request_info and malformed turns, answered
	// without the grader): the sample's real executions are Executions −
	// Unexecuted.
	Unexecuted int `json:"unexecuted,omitempty"`
}

// SaveEvaluations stores held-out executions and returns how many were new.
// Like RecordExecutions, the first write of a key wins: a retried
// evaluation's result (other timings) is ignored.
func (s *Store) SaveEvaluations(ctx context.Context, evs []Evaluation) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	type evalKey struct {
		run    string
		step   int
		task   string
		sample int
	}
	n := len(evs)
	keys := make([]evalKey, n)
	runs, steps, tasks, samples, programs := make([]string, n), make([]int, n), make([]string, n), make([]int, n), make([]string, n)
	status, score, metric, position := make([]string, n), make([]float64, n), make([]float64, n), make([]float64, n)
	detail, cpu, wall, execs := make([]string, n), make([]float64, n), make([]float64, n), make([]int, n)
	unexec := make([]int, n)
	for i, e := range evs {
		name := fmt.Sprintf("%s/step-%d/%s/sample-%d", e.Run, e.Step, e.TaskID, e.Sample)
		if e.Run == "" || e.Step < 0 || e.TaskID == "" || e.Sample < 0 {
			return 0, fmt.Errorf("save evaluations: invalid key %s", name)
		}
		if err := checkResult(e.Result); err != nil {
			return 0, fmt.Errorf("save evaluations: %s: %w", name, err)
		}
		if e.Executions < 0 {
			return 0, fmt.Errorf("save evaluations: %s: %d executions", name, e.Executions)
		}
		execs[i] = max(1, e.Executions)
		if e.Unexecuted < 0 || e.Unexecuted > execs[i] {
			return 0, fmt.Errorf("save evaluations: %s: %d unexecuted of %d executions", name, e.Unexecuted, execs[i])
		}
		unexec[i] = e.Unexecuted
		r := e.Result
		keys[i] = evalKey{e.Run, e.Step, e.TaskID, e.Sample}
		runs[i], steps[i], tasks[i], samples[i], programs[i] = e.Run, e.Step, e.TaskID, e.Sample, e.Program
		status[i], score[i], metric[i], position[i] = string(r.Status), r.Score, r.Metric, r.Position
		detail[i], cpu[i], wall[i] = r.Detail, r.CPUSeconds, r.WallSeconds
	}
	if k, dup := firstDup(keys); dup {
		return 0, fmt.Errorf("save evaluations: key %s/step-%d/%s/sample-%d twice in one batch", k.run, k.step, k.task, k.sample)
	}
	b := batch{table: "evaluations", key: []string{"run_id", "step", "task_id", "sample"},
		cols:  []string{"program", "status", "score", "metric", "position", "detail", "cpu_seconds", "wall_seconds", "executions", "unexecuted"},
		types: []string{"text", "int", "text", "int", "text", "text", "float8", "float8", "float8", "text", "float8", "float8", "int", "int"},
		args:  []any{runs, steps, tasks, samples, programs, status, score, metric, position, detail, cpu, wall, execs, unexec}}
	var inserted int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		inserted, err = insertNew(ctx, tx, b, nil)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("save evaluations: %w", err)
	}
	return inserted, nil
}

// HeldOut is the held-out score of a step (docs/design.md, "Held-out score"):
// the mean over its tasks of the mean leaderboard position of each task's
// samples, where a sample that did not run ok counts 0.
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
	// The means sum in (task, sample) order, not in the order the rows
	// reach the aggregate (which depends on the plan and on the order
	// parallel activities wrote them): a rerun reports the same bits.
	err := s.pool.QueryRow(ctx, `SELECT avg(task_mean ORDER BY task_id), count(*), coalesce(sum(n), 0) FROM (
			SELECT task_id, avg(CASE WHEN status = 'ok' THEN position ELSE 0 END ORDER BY sample) AS task_mean, count(*) AS n
			FROM evaluations WHERE run_id = $1 AND step = $2 GROUP BY task_id) t`, run, step).Scan(&score, &h.Tasks, &h.Samples)
	if err != nil {
		return h, fmt.Errorf("held-out score %s step %d: %w", run, step, err)
	}
	h.Score = deref(score)
	return h, nil
}

// Evaluations returns the held-out executions of a step in (task, sample)
// order.
func (s *Store) Evaluations(ctx context.Context, run string, step int) ([]Evaluation, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, step, task_id, sample, program, status, score, metric, position,
		detail, cpu_seconds, wall_seconds, executions, unexecuted FROM evaluations WHERE run_id = $1 AND step = $2 ORDER BY task_id, sample`, run, step)
	if err != nil {
		return nil, fmt.Errorf("evaluations %s step %d: %w", run, step, err)
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Evaluation, error) {
		var e Evaluation
		r := &e.Result
		err := row.Scan(&e.Run, &e.Step, &e.TaskID, &e.Sample, &e.Program, &r.Status, &r.Score, &r.Metric, &r.Position,
			&r.Detail, &r.CPUSeconds, &r.WallSeconds, &e.Executions, &e.Unexecuted)
		if e.Executions == 1 {
			e.Executions = 0 // a single-shot sample reads back as written
		}
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("evaluations %s step %d: %w", run, step, err)
	}
	return evs, nil
}
