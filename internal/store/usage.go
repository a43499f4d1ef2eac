package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// StepUsage is what a step's trajectories used: how many there are, how
// many the world model scored, how many were really executed (have a
// result) and the CPU and wall seconds of those executions.
type StepUsage struct {
	Step         int     `json:"step"`
	Trajectories int     `json:"trajectories"`
	WMScored     int     `json:"wm_scored"`
	Executed     int     `json:"executed"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	WallSeconds  float64 `json:"wall_seconds"`
	// TurnExecutions and TurnWMCalls count a multi-turn step's turns: the
	// real turns executed (answered by an execution) and the world model's
	// calls (its answers and its grades of real turns), each turn once;
	// TurnUnexecuted the turns of either source answered without either
	// (request_info and malformed turns, Answer.Unexecuted); 0 for a
	// single-shot step (no turn rows). CPUSeconds and WallSeconds already
	// sum every turn's.
	TurnExecutions int `json:"turn_executions,omitempty"`
	TurnWMCalls    int `json:"turn_wm_calls,omitempty"`
	TurnUnexecuted int `json:"turn_unexecuted,omitempty"`
}

// RunUsage returns the usage of every step of a run that has trajectories,
// in step order, in two queries (trajectories, then turns).
func (s *Store) RunUsage(ctx context.Context, run string) ([]StepUsage, error) {
	rows, err := s.pool.Query(ctx, `SELECT step, count(*), count(wm_score), count(status),
		coalesce(sum(cpu_seconds), 0), coalesce(sum(wall_seconds), 0)
		FROM trajectories WHERE run_id = $1 GROUP BY step ORDER BY step`, run)
	if err != nil {
		return nil, fmt.Errorf("run usage %s: %w", run, err)
	}
	us, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StepUsage, error) {
		var u StepUsage
		err := row.Scan(&u.Step, &u.Trajectories, &u.WMScored, &u.Executed, &u.CPUSeconds, &u.WallSeconds)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("run usage %s: %w", run, err)
	}
	rows, err = s.pool.Query(ctx, `SELECT step, count(*) FILTER (WHERE source = 'real' AND status IS NOT NULL AND NOT unexecuted),
		count(*) FILTER (WHERE source = 'world_model' AND status IS NOT NULL AND NOT unexecuted) + count(wm_reward),
		count(*) FILTER (WHERE unexecuted)
		FROM turns WHERE run_id = $1 GROUP BY step`, run)
	if err != nil {
		return nil, fmt.Errorf("run usage %s: turns: %w", run, err)
	}
	type turnUse struct{ step, execs, wm, unexec int }
	tus, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (turnUse, error) {
		var u turnUse
		err := row.Scan(&u.step, &u.execs, &u.wm, &u.unexec)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("run usage %s: turns: %w", run, err)
	}
	at := make(map[int]int, len(us))
	for i, u := range us {
		at[u.Step] = i
	}
	for _, tu := range tus {
		if i, ok := at[tu.step]; ok {
			us[i].TurnExecutions, us[i].TurnWMCalls, us[i].TurnUnexecuted = tu.execs, tu.wm, tu.unexec
		}
	}
	return us, nil
}

// EvalUsage is one held-out evaluation of a run (Step is the checkpoint
// version evaluated): its executions (a sample's executed turns or best_of
// attempts each count; HeldOut.Samples counts the samples), the turns that
// executed nothing (request_info and malformed turns, Unexecuted), the
// executions' CPU and wall seconds, and its held-out score as HeldOutScore
// computes it.
type EvalUsage struct {
	Step        int     `json:"step"`
	Executions  int     `json:"executions"`
	Unexecuted  int     `json:"unexecuted,omitempty"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	HeldOut     HeldOut `json:"held_out"`
}

// RunEvaluations returns every held-out evaluation of a run in step order,
// in one query.
func (s *Store) RunEvaluations(ctx context.Context, run string) ([]EvalUsage, error) {
	// Every floating-point sum in (task, sample) order, as HeldOutScore's.
	rows, err := s.pool.Query(ctx, `SELECT step, sum(x)::int, sum(u)::int, sum(cpu ORDER BY task_id), sum(wall ORDER BY task_id),
			avg(task_mean ORDER BY task_id), count(*), sum(n)::int FROM (
			SELECT step, task_id, count(*) AS n, sum(executions - unexecuted) AS x, sum(unexecuted) AS u,
				sum(cpu_seconds ORDER BY sample) AS cpu, sum(wall_seconds ORDER BY sample) AS wall,
				avg(CASE WHEN status = 'ok' THEN position ELSE 0 END ORDER BY sample) AS task_mean
			FROM evaluations WHERE run_id = $1 GROUP BY step, task_id) t
		GROUP BY step ORDER BY step`, run)
	if err != nil {
		return nil, fmt.Errorf("run evaluations %s: %w", run, err)
	}
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (EvalUsage, error) {
		var e EvalUsage
		err := row.Scan(&e.Step, &e.Executions, &e.Unexecuted, &e.CPUSeconds, &e.WallSeconds, &e.HeldOut.Score, &e.HeldOut.Tasks,
			&e.HeldOut.Samples)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("run evaluations %s: %w", run, err)
	}
	return es, nil
}
