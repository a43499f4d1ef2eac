package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/wmrl/wmrl/internal/executor"
)

// Key identifies a trajectory: sample Sample of group Group at step Step of
// run Run.
type Key struct {
	Run    string `json:"run"`
	Step   int    `json:"step"`
	Group  int    `json:"group"`
	Sample int    `json:"sample"`
}

func (k Key) String() string {
	return fmt.Sprintf("%s/step-%d/group-%d/sample-%d", k.Run, k.Step, k.Group, k.Sample)
}

func (k Key) validate() error {
	if k.Run == "" || k.Step < 0 || k.Group < 0 || k.Sample < 0 {
		return fmt.Errorf("invalid key %s: want a run id and non-negative step, group and sample", k)
	}
	return nil
}

// Solution is what Generate produces: the program sampled for a task.
type Solution struct {
	Key
	TaskID  string `json:"task_id"`
	Program string `json:"program"`
	// Completion holds the completion's token ids and sampling logprobs,
	// when the policy backend gave them (nil for the built-in policy).
	Completion *Completion `json:"completion,omitempty"`
}

// Completion is a sampled completion's token ids and the sampling logprob
// of each (LogProbs is empty or as long as Tokens).
type Completion struct {
	Tokens   []int     `json:"tokens"`
	LogProbs []float64 `json:"logprobs,omitempty"`
}

// check refuses logprobs that do not match the tokens, or are not finite.
func (c *Completion) check() error {
	if c == nil {
		return nil
	}
	if len(c.LogProbs) != 0 && len(c.LogProbs) != len(c.Tokens) {
		return fmt.Errorf("completion: %d logprobs for %d tokens", len(c.LogProbs), len(c.Tokens))
	}
	for i, lp := range c.LogProbs {
		if !finite(lp) {
			return fmt.Errorf("completion: logprob %d is %v", i, lp)
		}
	}
	return nil
}

// Score is the world model's score of one trajectory.
type Score struct {
	Key
	WM float64 `json:"wm"`
}

// Execution is the result of really executing one trajectory.
type Execution struct {
	Key
	Result executor.Result `json:"result"`
}

// Trajectory is a stored trajectory with every stage filled in so far.
type Trajectory struct {
	Solution
	Anchor     bool             `json:"anchor"`
	WMScore    *float64         `json:"wm_score,omitempty"` // nil until scored
	Exec       *executor.Result `json:"exec,omitempty"`     // nil until executed
	ExecutedAt *time.Time       `json:"executed_at,omitempty"`
}

// keyBatch starts a batch keyed like trajectories: the key arrays of keys,
// then the given column names, SQL types and arrays. It fails on a key that
// is invalid or given twice.
func keyBatch(table string, keys []Key, cols, types []string, args ...any) (batch, error) {
	if k, dup := firstDup(keys); dup {
		return batch{}, fmt.Errorf("key %s twice in one batch", k)
	}
	n := len(keys)
	runs, steps, groups, samples := make([]string, n), make([]int, n), make([]int, n), make([]int, n)
	for i, k := range keys {
		if err := k.validate(); err != nil {
			return batch{}, err
		}
		runs[i], steps[i], groups[i], samples[i] = k.Run, k.Step, k.Group, k.Sample
	}
	return batch{
		table: table,
		key:   []string{"run_id", "step", "grp", "sample"},
		cols:  cols,
		types: append([]string{"text", "int", "int", "int"}, types...),
		args:  append([]any{runs, steps, groups, samples}, args...),
	}, nil
}

// InsertTrajectories stores generated solutions and returns how many were
// new. A key stored before with the same task and program is skipped; with a
// different task or program it is an ErrConflict and nothing is stored. The
// run must exist.
func (s *Store) InsertTrajectories(ctx context.Context, sols []Solution) (int, error) {
	if len(sols) == 0 {
		return 0, nil
	}
	keys, tasks, programs := make([]Key, len(sols)), make([]string, len(sols)), make([]string, len(sols))
	completions := make([]*string, len(sols))
	for i, x := range sols {
		keys[i], tasks[i], programs[i] = x.Key, x.TaskID, x.Program
		if x.Completion == nil {
			continue
		}
		if err := x.Completion.check(); err != nil {
			return 0, fmt.Errorf("insert trajectories: %s: %w", x.Key, err)
		}
		raw, err := json.Marshal(x.Completion)
		if err != nil {
			return 0, fmt.Errorf("insert trajectories: %s: %w", x.Key, err)
		}
		js := string(raw)
		completions[i] = &js
	}
	b, err := keyBatch("trajectories", keys, []string{"task_id", "program", "completion"}, []string{"text", "text", "jsonb"},
		tasks, programs, completions)
	if err != nil {
		return 0, fmt.Errorf("insert trajectories: %w", err)
	}
	var n int
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		// The completion is not compared: first write wins (a remote
		// sampler may not repeat its logprobs bit for bit).
		n, err = insertNew(ctx, tx, b, []string{"task_id", "program"})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("insert trajectories: %w", err)
	}
	return n, nil
}

// SetWMScores records world-model scores of stored trajectories. A score
// already stored with the same value is a no-op; a different stored value is
// an ErrConflict; an unknown key is an ErrNotFound. Scores must be finite.
func (s *Store) SetWMScores(ctx context.Context, scores []Score) error {
	if len(scores) == 0 {
		return nil
	}
	keys, wm := make([]Key, len(scores)), make([]float64, len(scores))
	for i, x := range scores {
		if !finite(x.WM) {
			return fmt.Errorf("set wm scores: %s: score %v is not finite", x.Key, x.WM)
		}
		keys[i], wm[i] = x.Key, x.WM
	}
	b, err := keyBatch("trajectories", keys, []string{"wm_score"}, []string{"float8"}, wm)
	if err != nil {
		return fmt.Errorf("set wm scores: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := missing(ctx, tx, b, "trajectories"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE trajectories d SET wm_score = s.wm_score FROM `+b.source()+`
			WHERE `+b.joinOn()+` AND d.wm_score IS NULL`, b.args...)
		if err != nil {
			return fmt.Errorf("update trajectories: %w", err)
		}
		return checkSame(ctx, tx, b, b.cols)
	})
	if err != nil {
		return fmt.Errorf("set wm scores: %w", err)
	}
	return nil
}

// SetAnchors marks every trajectory of the given groups at a step as an
// anchor. Marking the same groups again is a no-op; if another group of the
// step is already marked, it is an ErrConflict (the deterministic anchor
// choice gave a different answer) and nothing changes. Every group must have
// stored trajectories.
func (s *Store) SetAnchors(ctx context.Context, run string, step int, groups []int) error {
	if run == "" || step < 0 {
		return fmt.Errorf("set anchors: invalid run %q step %d", run, step)
	}
	if groups == nil {
		groups = []int{} // NULL would make "grp <> ALL(...)" unknown for every row
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Lock the step's rows so two concurrent calls cannot both pass the check.
		var other *int
		err := tx.QueryRow(ctx, `SELECT min(grp) FROM (SELECT grp, anchor FROM trajectories
			WHERE run_id = $1 AND step = $2 FOR UPDATE) t WHERE anchor AND grp <> ALL($3)`, run, step, groups).Scan(&other)
		if err != nil {
			return fmt.Errorf("read anchors: %w", err)
		}
		if other != nil {
			return fmt.Errorf("group %d of %s step %d is already an anchor: %w", *other, run, step, ErrConflict)
		}
		var absent *int
		err = tx.QueryRow(ctx, `SELECT min(g) FROM unnest($3::int[]) g WHERE NOT EXISTS
			(SELECT 1 FROM trajectories WHERE run_id = $1 AND step = $2 AND grp = g)`, run, step, groups).Scan(&absent)
		if err != nil {
			return fmt.Errorf("look up groups: %w", err)
		}
		if absent != nil {
			return fmt.Errorf("group %d of %s step %d has no trajectories: %w", *absent, run, step, ErrNotFound)
		}
		_, err = tx.Exec(ctx, `UPDATE trajectories SET anchor = true
			WHERE run_id = $1 AND step = $2 AND grp = ANY($3) AND NOT anchor`, run, step, groups)
		if err != nil {
			return fmt.Errorf("update trajectories: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set anchors: %w", err)
	}
	return nil
}

// RecordExecutions stores execution results of stored trajectories and
// returns the stored results, in the order given. The first write of a key
// wins: a later result for an executed trajectory (a retried execution, with
// other timings) is ignored and the returned result is the stored one. An
// unknown key is an ErrNotFound and nothing is stored.
func (s *Store) RecordExecutions(ctx context.Context, execs []Execution) ([]Execution, error) {
	if len(execs) == 0 {
		return nil, nil
	}
	n := len(execs)
	keys, status, score, metric, position := make([]Key, n), make([]string, n), make([]float64, n), make([]float64, n), make([]float64, n)
	detail, cpu, wall := make([]string, n), make([]float64, n), make([]float64, n)
	for i, x := range execs {
		if err := checkResult(x.Result); err != nil {
			return nil, fmt.Errorf("record executions: %s: %w", x.Key, err)
		}
		r := x.Result
		keys[i], status[i], score[i], metric[i], position[i] = x.Key, string(r.Status), r.Score, r.Metric, r.Position
		detail[i], cpu[i], wall[i] = r.Detail, r.CPUSeconds, r.WallSeconds
	}
	b, err := keyBatch("trajectories", keys,
		[]string{"status", "env_score", "metric", "position", "detail", "cpu_seconds", "wall_seconds"},
		[]string{"text", "float8", "float8", "float8", "text", "float8", "float8"},
		status, score, metric, position, detail, cpu, wall)
	if err != nil {
		return nil, fmt.Errorf("record executions: %w", err)
	}
	out := make([]Execution, len(execs))
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := missing(ctx, tx, b, "trajectories"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE trajectories d SET status = s.status, env_score = s.env_score,
			metric = s.metric, position = s.position, detail = s.detail,
			cpu_seconds = s.cpu_seconds, wall_seconds = s.wall_seconds, executed_at = now()
			FROM `+b.source()+` WHERE `+b.joinOn()+` AND d.status IS NULL`, b.args...)
		if err != nil {
			return fmt.Errorf("update trajectories: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT d.run_id, d.step, d.grp, d.sample, d.status, d.env_score, d.metric,
			d.position, d.detail, d.cpu_seconds, d.wall_seconds
			FROM `+b.source()+` JOIN trajectories d ON `+b.joinOn(), b.args...)
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		stored := make(map[Key]executor.Result, len(execs))
		var k Key
		var r executor.Result
		_, err = pgx.ForEachRow(rows, []any{&k.Run, &k.Step, &k.Group, &k.Sample, &r.Status, &r.Score, &r.Metric,
			&r.Position, &r.Detail, &r.CPUSeconds, &r.WallSeconds}, func() error {
			stored[k] = r
			return nil
		})
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		for i, x := range execs {
			out[i] = Execution{Key: x.Key, Result: stored[x.Key]}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record executions: %w", err)
	}
	return out, nil
}

func checkResult(r executor.Result) error {
	if !r.Status.Valid() {
		return fmt.Errorf("unknown status %q", r.Status)
	}
	for _, v := range []float64{r.Score, r.Metric, r.Position, r.CPUSeconds, r.WallSeconds} {
		if !finite(v) {
			return fmt.Errorf("non-finite value %v in result", v)
		}
	}
	if r.CPUSeconds < 0 || r.WallSeconds < 0 {
		return fmt.Errorf("negative time in result (cpu %v s, wall %v s)", r.CPUSeconds, r.WallSeconds)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

const trajectoryColumns = `run_id, step, grp, sample, task_id, program, anchor, wm_score,
	status, env_score, metric, position, detail, cpu_seconds, wall_seconds, executed_at, completion`

func scanTrajectory(row pgx.CollectableRow) (Trajectory, error) {
	var t Trajectory
	var status, detail *string
	var score, metric, position, cpu, wall *float64
	err := row.Scan(&t.Run, &t.Step, &t.Group, &t.Sample, &t.TaskID, &t.Program, &t.Anchor, &t.WMScore,
		&status, &score, &metric, &position, &detail, &cpu, &wall, &t.ExecutedAt, &t.Completion)
	if err != nil {
		return t, err
	}
	if status != nil {
		t.Exec = &executor.Result{Status: executor.Status(*status), Score: deref(score), Metric: deref(metric),
			Position: deref(position), Detail: derefString(detail), CPUSeconds: deref(cpu), WallSeconds: deref(wall)}
	}
	return t, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// StepTrajectories returns the trajectories of a step in (group, sample) order.
func (s *Store) StepTrajectories(ctx context.Context, run string, step int) ([]Trajectory, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+trajectoryColumns+` FROM trajectories
		WHERE run_id = $1 AND step = $2 ORDER BY grp, sample`, run, step)
	if err != nil {
		return nil, fmt.Errorf("step trajectories: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTrajectory)
	if err != nil {
		return nil, fmt.Errorf("step trajectories: %w", err)
	}
	return ts, nil
}

// AnchorTrajectories returns the anchor trajectories of a run that have both
// a world-model score and a real execution, in (step, group, sample) order.
func (s *Store) AnchorTrajectories(ctx context.Context, run string) ([]Trajectory, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+trajectoryColumns+` FROM trajectories
		WHERE run_id = $1 AND anchor AND wm_score IS NOT NULL AND status IS NOT NULL
		ORDER BY step, grp, sample`, run)
	if err != nil {
		return nil, fmt.Errorf("anchor trajectories: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTrajectory)
	if err != nil {
		return nil, fmt.Errorf("anchor trajectories: %w", err)
	}
	return ts, nil
}

// ExecutedBefore returns the trajectories of a run that have a real
// execution, at steps before step, on the given tasks, in (step, group,
// sample) order: execution memory's record (fusion.Memory).
func (s *Store) ExecutedBefore(ctx context.Context, run string, step int, tasks []string) ([]Trajectory, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+trajectoryColumns+` FROM trajectories
		WHERE run_id = $1 AND step < $2 AND status IS NOT NULL AND task_id = ANY($3)
		ORDER BY step, grp, sample`, run, step, tasks)
	if err != nil {
		return nil, fmt.Errorf("executed before step %d: %w", step, err)
	}
	ts, err := pgx.CollectRows(rows, scanTrajectory)
	if err != nil {
		return nil, fmt.Errorf("executed before step %d: %w", step, err)
	}
	return ts, nil
}

// ExecutedTrajectories returns every trajectory of a run that has a real
// execution, anchor or not, scored by the world model or not, in (step,
// group, sample) order: in grpo every trajectory, in the anchor modes the
// anchor groups'.
func (s *Store) ExecutedTrajectories(ctx context.Context, run string) ([]Trajectory, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+trajectoryColumns+` FROM trajectories
		WHERE run_id = $1 AND status IS NOT NULL
		ORDER BY step, grp, sample`, run)
	if err != nil {
		return nil, fmt.Errorf("executed trajectories: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTrajectory)
	if err != nil {
		return nil, fmt.Errorf("executed trajectories: %w", err)
	}
	return ts, nil
}

// Trajectory returns one trajectory, or an error wrapping ErrNotFound.
func (s *Store) Trajectory(ctx context.Context, k Key) (Trajectory, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+trajectoryColumns+` FROM trajectories
		WHERE run_id = $1 AND step = $2 AND grp = $3 AND sample = $4`, k.Run, k.Step, k.Group, k.Sample)
	if err != nil {
		return Trajectory{}, fmt.Errorf("trajectory %s: %w", k, err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTrajectory)
	if errors.Is(err, pgx.ErrNoRows) {
		return Trajectory{}, fmt.Errorf("trajectory %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return Trajectory{}, fmt.Errorf("trajectory %s: %w", k, err)
	}
	return t, nil
}

// Cost sums the trajectories of a step: how many there are, how many were
// executed, and the CPU and wall seconds their executions took.
type Cost struct {
	Trajectories int     `json:"trajectories"`
	Executed     int     `json:"executed"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	WallSeconds  float64 `json:"wall_seconds"`
}

// StepCost returns the cost of a step's trajectories (zero for an unknown
// step).
func (s *Store) StepCost(ctx context.Context, run string, step int) (Cost, error) {
	var c Cost
	err := s.pool.QueryRow(ctx, `SELECT count(*), count(status), coalesce(sum(cpu_seconds), 0), coalesce(sum(wall_seconds), 0)
		FROM trajectories WHERE run_id = $1 AND step = $2`, run, step).Scan(&c.Trajectories, &c.Executed, &c.CPUSeconds, &c.WallSeconds)
	if err != nil {
		return c, fmt.Errorf("step cost %s step %d: %w", run, step, err)
	}
	return c, nil
}
