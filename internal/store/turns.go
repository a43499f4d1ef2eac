package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TurnKey identifies turn Turn (counted from 1) of a trajectory.
type TurnKey struct {
	Key
	Turn int `json:"turn"`
}

func (k TurnKey) String() string { return fmt.Sprintf("%s/turn-%d", k.Key, k.Turn) }

func (k TurnKey) validate() error {
	if err := k.Key.validate(); err != nil {
		return err
	}
	if k.Turn < 1 {
		return fmt.Errorf("invalid key %s: turns count from 1", k)
	}
	return nil
}

// Source is who answers a group's turns, for all of them.
type Source string

const (
	// SourceReal is the real grader (the executed groups).
	SourceReal Source = "real"
	// SourceWorldModel is the world model (the others).
	SourceWorldModel Source = "world_model"
)

func (s Source) valid() bool { return s == SourceReal || s == SourceWorldModel }

// TurnAction is what Generate of a turn produces: the policy's action.
type TurnAction struct {
	TurnKey
	// Action is the program, or a language model's whole completion.
	Action string `json:"action"`
	// Completion holds the action's token ids and sampling logprobs, when
	// the policy backend gave them.
	Completion *Completion `json:"completion,omitempty"`
	Source     Source      `json:"source"`
}

// Answer is an environment's answer to one turn.
type Answer struct {
	// Observation is the text the policy sees next (turns.Render).
	Observation string `json:"observation"`
	Status      string `json:"status"`
	// Reward is the turn's reward in [0,1]; nil when the answer holds no
	// score (an ungraded verdict).
	Reward *float64 `json:"reward,omitempty"`
	// CPUSeconds and WallSeconds are an execution's; WMTokens a
	// world-model call's.
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	WMTokens    int     `json:"wm_tokens"`
	// Unexecuted marks an answer given without an execution or a
	// world-model call: a request_info or malformed turn's, whichever
	// source answers its group. It costs nothing and counts as neither.
	Unexecuted bool `json:"unexecuted,omitempty"`
}

func (a Answer) check() error {
	switch {
	case a.Status == "":
		return errors.New("answer without a status")
	case a.Reward != nil && (!finite(*a.Reward) || *a.Reward < 0 || *a.Reward > 1):
		return fmt.Errorf("reward %v: want [0,1] or none", *a.Reward)
	case !finite(a.CPUSeconds) || !finite(a.WallSeconds) || a.CPUSeconds < 0 || a.WallSeconds < 0:
		return fmt.Errorf("cost (cpu %v s, wall %v s): want finite and >= 0", a.CPUSeconds, a.WallSeconds)
	case a.WMTokens < 0:
		return fmt.Errorf("world-model tokens %d: want >= 0", a.WMTokens)
	case a.Unexecuted && (a.CPUSeconds != 0 || a.WallSeconds != 0 || a.WMTokens != 0):
		return fmt.Errorf("unexecuted answer with a cost (cpu %v s, wall %v s, %d world-model tokens): want none",
			a.CPUSeconds, a.WallSeconds, a.WMTokens)
	}
	return nil
}

// TurnAnswer is the answer to one turn.
type TurnAnswer struct {
	TurnKey
	Answer
}

// TurnWM is the world model's grade of a real turn.
type TurnWM struct {
	TurnKey
	WM float64 `json:"wm"`
}

// Turn is a stored turn with every stage filled in so far.
type Turn struct {
	TurnAction
	// Answer is nil until the turn is answered.
	Answer *Answer `json:"answer,omitempty"`
	// WMReward is the world model's grade of a real turn, when it has one.
	WMReward   *float64   `json:"wm_reward,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
}

// turnBatch starts a batch keyed like turns: the key arrays of keys, then
// the given columns, SQL types and arrays. It fails on a key that is
// invalid or given twice.
func turnBatch(keys []TurnKey, cols, types []string, args ...any) (batch, error) {
	if k, dup := firstDup(keys); dup {
		return batch{}, fmt.Errorf("key %s twice in one batch", k)
	}
	n := len(keys)
	runs, steps, groups, samples, turns := make([]string, n), make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	for i, k := range keys {
		if err := k.validate(); err != nil {
			return batch{}, err
		}
		runs[i], steps[i], groups[i], samples[i], turns[i] = k.Run, k.Step, k.Group, k.Sample, k.Turn
	}
	return batch{
		table: "turns",
		key:   []string{"run_id", "step", "grp", "sample", "turn"},
		cols:  cols,
		types: append([]string{"text", "int", "int", "int", "int"}, types...),
		args:  append([]any{runs, steps, groups, samples, turns}, args...),
	}, nil
}

// InsertTurns stores the actions of turns and returns how many were new. A
// turn stored before with the same action and source is skipped (a
// retried Generate); with another action or source it is an ErrConflict.
// The trajectory must be stored (ErrNotFound otherwise), and turn t > 1
// needs turn t−1 of the trajectory answered, from the same source (the
// action of turn t is conditioned on that answer; one source answers all
// of a group's turns): otherwise ErrNotFound or ErrConflict. Nothing is
// stored when any turn fails.
func (s *Store) InsertTurns(ctx context.Context, acts []TurnAction) (int, error) {
	if len(acts) == 0 {
		return 0, nil
	}
	n := len(acts)
	keys, actions, sources, completions := make([]TurnKey, n), make([]string, n), make([]string, n), make([]*string, n)
	for i, a := range acts {
		if !a.Source.valid() {
			return 0, fmt.Errorf("insert turns: %s: source %q: want %q or %q", a.TurnKey, a.Source, SourceReal, SourceWorldModel)
		}
		keys[i], actions[i], sources[i] = a.TurnKey, a.Action, string(a.Source)
		if a.Completion == nil {
			continue
		}
		if err := a.Completion.check(); err != nil {
			return 0, fmt.Errorf("insert turns: %s: %w", a.TurnKey, err)
		}
		raw, err := json.Marshal(a.Completion)
		if err != nil {
			return 0, fmt.Errorf("insert turns: %s: %w", a.TurnKey, err)
		}
		js := string(raw)
		completions[i] = &js
	}
	b, err := turnBatch(keys, []string{"action", "source", "completion"}, []string{"text", "text", "jsonb"},
		actions, sources, completions)
	if err != nil {
		return 0, fmt.Errorf("insert turns: %w", err)
	}
	var inserted int
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := turnsHaveTrajectories(ctx, tx, b); err != nil {
			return err
		}
		if err := previousAnswered(ctx, tx, b); err != nil {
			return err
		}
		var err error
		// The completion is not compared: first write wins, as for
		// trajectories.
		inserted, err = insertNew(ctx, tx, b, []string{"action", "source"})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("insert turns: %w", err)
	}
	return inserted, nil
}

// turnsHaveTrajectories fails with ErrNotFound naming the first turn of the
// batch whose trajectory is not stored.
func turnsHaveTrajectories(ctx context.Context, tx pgx.Tx, b batch) error {
	q := `SELECT ` + b.sKey() + ` FROM ` + b.source() + ` WHERE NOT EXISTS (SELECT 1 FROM trajectories d
		WHERE d.run_id = s.run_id AND d.step = s.step AND d.grp = s.grp AND d.sample = s.sample)
		ORDER BY ` + b.sKey() + ` LIMIT 1`
	k, err := firstKey(ctx, tx, len(b.key), q, b.args...)
	if err != nil {
		return fmt.Errorf("look up trajectories: %w", err)
	}
	if k != "" {
		return fmt.Errorf("trajectory of turn %s: %w", k, ErrNotFound)
	}
	return nil
}

// previousAnswered fails naming the first turn t > 1 of the batch whose
// turn t−1 is not stored and answered (ErrNotFound), or was answered by
// another source (ErrConflict).
func previousAnswered(ctx context.Context, tx pgx.Tx, b batch) error {
	prev := `SELECT 1 FROM turns d WHERE d.run_id = s.run_id AND d.step = s.step AND d.grp = s.grp
		AND d.sample = s.sample AND d.turn = s.turn - 1`
	q := `SELECT ` + b.sKey() + ` FROM ` + b.source() + ` WHERE s.turn > 1 AND NOT EXISTS (` + prev +
		` AND d.status IS NOT NULL) ORDER BY ` + b.sKey() + ` LIMIT 1`
	k, err := firstKey(ctx, tx, len(b.key), q, b.args...)
	if err != nil {
		return fmt.Errorf("look up previous turns: %w", err)
	}
	if k != "" {
		return fmt.Errorf("turn %s: the turn before it is not answered: %w", k, ErrNotFound)
	}
	q = `SELECT ` + b.sKey() + ` FROM ` + b.source() + ` WHERE s.turn > 1 AND EXISTS (` + prev +
		` AND d.source <> s.source) ORDER BY ` + b.sKey() + ` LIMIT 1`
	if k, err = firstKey(ctx, tx, len(b.key), q, b.args...); err != nil {
		return fmt.Errorf("look up previous turns: %w", err)
	}
	if k != "" {
		return fmt.Errorf("turn %s: another source than the turn before it: %w", k, ErrConflict)
	}
	return nil
}

// AnswerTurns stores the answers of stored turns and returns the stored
// answers, in the order given. The first write of a turn wins: a later
// answer (a retried Execute, with other timings) is ignored and the stored
// one returned. An unknown turn is an ErrNotFound and nothing is stored.
func (s *Store) AnswerTurns(ctx context.Context, answers []TurnAnswer) ([]TurnAnswer, error) {
	if len(answers) == 0 {
		return nil, nil
	}
	n := len(answers)
	keys, obs, status, reward := make([]TurnKey, n), make([]string, n), make([]string, n), make([]*float64, n)
	cpu, wall, tokens, unexec := make([]float64, n), make([]float64, n), make([]int, n), make([]bool, n)
	for i, a := range answers {
		if err := a.check(); err != nil {
			return nil, fmt.Errorf("answer turns: %s: %w", a.TurnKey, err)
		}
		keys[i], obs[i], status[i], reward[i] = a.TurnKey, a.Observation, a.Status, a.Reward
		cpu[i], wall[i], tokens[i], unexec[i] = a.CPUSeconds, a.WallSeconds, a.WMTokens, a.Unexecuted
	}
	b, err := turnBatch(keys, []string{"observation", "status", "reward", "cpu_seconds", "wall_seconds", "wm_tokens", "unexecuted"},
		[]string{"text", "text", "float8", "float8", "float8", "int", "bool"}, obs, status, reward, cpu, wall, tokens, unexec)
	if err != nil {
		return nil, fmt.Errorf("answer turns: %w", err)
	}
	out := make([]TurnAnswer, n)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := missing(ctx, tx, b, "turns"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE turns d SET observation = s.observation, status = s.status, reward = s.reward,
			cpu_seconds = s.cpu_seconds, wall_seconds = s.wall_seconds, wm_tokens = s.wm_tokens, unexecuted = s.unexecuted,
			answered_at = now()
			FROM `+b.source()+` WHERE `+b.joinOn()+` AND d.status IS NULL`, b.args...)
		if err != nil {
			return fmt.Errorf("update turns: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT d.run_id, d.step, d.grp, d.sample, d.turn, d.observation, d.status,
			d.reward, d.cpu_seconds, d.wall_seconds, d.wm_tokens, d.unexecuted
			FROM `+b.source()+` JOIN turns d ON `+b.joinOn(), b.args...)
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		stored := make(map[TurnKey]Answer, n)
		var k TurnKey
		var a Answer
		_, err = pgx.ForEachRow(rows, []any{&k.Run, &k.Step, &k.Group, &k.Sample, &k.Turn, &a.Observation, &a.Status,
			&a.Reward, &a.CPUSeconds, &a.WallSeconds, &a.WMTokens, &a.Unexecuted}, func() error {
			stored[k] = a
			return nil
		})
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		for i, x := range answers {
			out[i] = TurnAnswer{TurnKey: x.TurnKey, Answer: stored[x.TurnKey]}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("answer turns: %w", err)
	}
	return out, nil
}

// SetTurnWMRewards records the world model's grades of stored real turns.
// A grade already stored with the same value is a no-op, another value an
// ErrConflict (a frozen world model grades the same turn the same); an
// unknown turn is an ErrNotFound, a world-model turn an ErrConflict (its
// answer is the world model's grade already).
func (s *Store) SetTurnWMRewards(ctx context.Context, grades []TurnWM) error {
	if len(grades) == 0 {
		return nil
	}
	keys, wm := make([]TurnKey, len(grades)), make([]float64, len(grades))
	for i, g := range grades {
		if !finite(g.WM) || g.WM < 0 || g.WM > 1 {
			return fmt.Errorf("set turn wm rewards: %s: grade %v: want [0,1]", g.TurnKey, g.WM)
		}
		keys[i], wm[i] = g.TurnKey, g.WM
	}
	b, err := turnBatch(keys, []string{"wm_reward"}, []string{"float8"}, wm)
	if err != nil {
		return fmt.Errorf("set turn wm rewards: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := missing(ctx, tx, b, "turns"); err != nil {
			return err
		}
		k, err := firstKey(ctx, tx, len(b.key), `SELECT `+b.sKey()+` FROM `+b.source()+` JOIN turns d ON `+b.joinOn()+
			` WHERE d.source <> 'real' ORDER BY `+b.sKey()+` LIMIT 1`, b.args...)
		if err != nil {
			return fmt.Errorf("look up sources: %w", err)
		}
		if k != "" {
			return fmt.Errorf("turn %s is answered by the world model, not executed: %w", k, ErrConflict)
		}
		if _, err := tx.Exec(ctx, `UPDATE turns d SET wm_reward = s.wm_reward FROM `+b.source()+`
			WHERE `+b.joinOn()+` AND d.wm_reward IS NULL`, b.args...); err != nil {
			return fmt.Errorf("update turns: %w", err)
		}
		return checkSame(ctx, tx, b, b.cols)
	})
	if err != nil {
		return fmt.Errorf("set turn wm rewards: %w", err)
	}
	return nil
}

const turnColumns = `run_id, step, grp, sample, turn, action, completion, source, observation, status, reward,
	wm_reward, cpu_seconds, wall_seconds, wm_tokens, answered_at, unexecuted`

func scanTurn(row pgx.CollectableRow) (Turn, error) {
	var t Turn
	var obs, status *string
	var reward, cpu, wall *float64
	var tokens *int
	var unexecuted bool
	err := row.Scan(&t.Run, &t.Step, &t.Group, &t.Sample, &t.Turn, &t.Action, &t.Completion, &t.Source, &obs, &status,
		&reward, &t.WMReward, &cpu, &wall, &tokens, &t.AnsweredAt, &unexecuted)
	if err != nil {
		return t, err
	}
	if status != nil {
		t.Answer = &Answer{Observation: derefString(obs), Status: *status, Reward: reward, CPUSeconds: deref(cpu),
			WallSeconds: deref(wall), Unexecuted: unexecuted}
		if tokens != nil {
			t.Answer.WMTokens = *tokens
		}
	}
	return t, nil
}

// StepTurns returns the turns of a step in (group, sample, turn) order.
func (s *Store) StepTurns(ctx context.Context, run string, step int) ([]Turn, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE run_id = $1 AND step = $2 ORDER BY grp, sample, turn`, run, step)
	if err != nil {
		return nil, fmt.Errorf("step turns: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("step turns: %w", err)
	}
	return ts, nil
}

// TrajectoryTurns returns the turns of one trajectory in turn order (none
// for a single-shot trajectory).
func (s *Store) TrajectoryTurns(ctx context.Context, k Key) ([]Turn, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE run_id = $1 AND step = $2 AND grp = $3 AND sample = $4 ORDER BY turn`, k.Run, k.Step, k.Group, k.Sample)
	if err != nil {
		return nil, fmt.Errorf("turns of %s: %w", k, err)
	}
	ts, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("turns of %s: %w", k, err)
	}
	return ts, nil
}

// GroupTurns returns the turns of one group of a step in (sample, turn)
// order.
func (s *Store) GroupTurns(ctx context.Context, run string, step, group int) ([]Turn, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE run_id = $1 AND step = $2 AND grp = $3 ORDER BY sample, turn`, run, step, group)
	if err != nil {
		return nil, fmt.Errorf("turns of %s step %d group %d: %w", run, step, group, err)
	}
	ts, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("turns of %s step %d group %d: %w", run, step, group, err)
	}
	return ts, nil
}

// TurnIndexStats summarises the turns of one turn index and source: how
// many there are, how many are answered, how many of those were answered
// without an execution or a world-model call (Unexecuted: request_info and
// malformed turns) and how many have a reward, their mean reward, and how
// many real turns the world model also graded, and what they cost.
type TurnIndexStats struct {
	Turn     int    `json:"turn"`
	Source   Source `json:"source"`
	Turns    int    `json:"turns"`
	Answered int    `json:"answered"`
	// Unexecuted counts the answered turns that executed nothing (store
	// Answer.Unexecuted): Answered − Unexecuted are the executions of a
	// real source's turns, the world model's answers of the other's.
	Unexecuted int `json:"unexecuted"`
	Rewarded   int `json:"rewarded"`
	// MeanReward is the mean over the rewarded turns (0 when none).
	MeanReward float64 `json:"mean_reward"`
	WMGraded   int     `json:"wm_graded"`
	// CPUSeconds and WallSeconds sum the turns' executions (real turns);
	// WMTokens the world model's tokens of its answers (world-model turns).
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	WMTokens    int     `json:"wm_tokens"`
}

// TurnImprovement counts, for one source, the trajectories whose first
// turn and at least one later turn have a reward (Compared), and those of
// them whose best later reward is above the first turn's (Improved).
type TurnImprovement struct {
	Source   Source `json:"source"`
	Compared int    `json:"compared"`
	Improved int    `json:"improved"`
}

// turnSteps restricts turns d to step (>= 0) or, for step < 0, to the
// run's completed steps.
func turnSteps(step int) string {
	if step >= 0 {
		return `d.run_id = $1 AND d.step = $2`
	}
	return `d.run_id = $1 AND $2::int < 0 AND EXISTS (SELECT 1 FROM steps s WHERE s.run_id = d.run_id
		AND s.step = d.step AND s.status = 'completed')`
}

// TurnsByIndex summarises the turns of a step (or, for step < 0, of every
// completed step of the run) by turn index and source, in (turn, source)
// order; none for a single-shot run.
func (s *Store) TurnsByIndex(ctx context.Context, run string, step int) ([]TurnIndexStats, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.turn, d.source, count(*), count(d.status), count(*) FILTER (WHERE d.unexecuted),
		count(d.reward),
		coalesce(avg(d.reward), 0), count(d.wm_reward), coalesce(sum(d.cpu_seconds), 0),
		coalesce(sum(d.wall_seconds), 0), coalesce(sum(d.wm_tokens), 0)::int FROM turns d WHERE `+turnSteps(step)+`
		GROUP BY d.turn, d.source ORDER BY d.turn, d.source`, run, step)
	if err != nil {
		return nil, fmt.Errorf("turns by index of %s: %w", run, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TurnIndexStats, error) {
		var x TurnIndexStats
		err := row.Scan(&x.Turn, &x.Source, &x.Turns, &x.Answered, &x.Unexecuted, &x.Rewarded, &x.MeanReward, &x.WMGraded,
			&x.CPUSeconds, &x.WallSeconds, &x.WMTokens)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("turns by index of %s: %w", run, err)
	}
	return out, nil
}

// TurnImprovements counts, by source, the trajectories of a step (or, for
// step < 0, of every completed step) that improved after their first turn
// (TurnImprovement), in source order; none for a single-shot run.
func (s *Store) TurnImprovements(ctx context.Context, run string, step int) ([]TurnImprovement, error) {
	rows, err := s.pool.Query(ctx, `SELECT source, count(*), count(*) FILTER (WHERE later > first) FROM (
		SELECT min(d.source) AS source, max(d.reward) FILTER (WHERE d.turn = 1) AS first,
			max(d.reward) FILTER (WHERE d.turn > 1) AS later
		FROM turns d WHERE `+turnSteps(step)+` GROUP BY d.step, d.grp, d.sample) x
		WHERE first IS NOT NULL AND later IS NOT NULL GROUP BY source ORDER BY source`, run, step)
	if err != nil {
		return nil, fmt.Errorf("turn improvements of %s: %w", run, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TurnImprovement, error) {
		var x TurnImprovement
		err := row.Scan(&x.Source, &x.Compared, &x.Improved)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("turn improvements of %s: %w", run, err)
	}
	return out, nil
}

// TurnPair is the per-turn anchor pair of a real turn the world model also
// graded: its world-model grade and its real reward.
type TurnPair struct {
	TurnKey
	WM  float64 `json:"wm"`
	Env float64 `json:"env"`
}

// TurnPairs returns the per-turn anchor pairs of a run (the real turns
// with both a reward and a world-model grade) in (step, group, sample,
// turn) order; none for a single-shot run.
func (s *Store) TurnPairs(ctx context.Context, run string) ([]TurnPair, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, step, grp, sample, turn, wm_reward, reward FROM turns
		WHERE run_id = $1 AND source = 'real' AND reward IS NOT NULL AND wm_reward IS NOT NULL
		ORDER BY step, grp, sample, turn`, run)
	if err != nil {
		return nil, fmt.Errorf("turn pairs of %s: %w", run, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TurnPair, error) {
		var p TurnPair
		err := row.Scan(&p.Run, &p.Step, &p.Group, &p.Sample, &p.Turn, &p.WM, &p.Env)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("turn pairs of %s: %w", run, err)
	}
	return out, nil
}

// AnchorTurn is one executed turn of a run that the world model also
// graded: the turn's action and its real reward, with the trajectory's task.
type AnchorTurn struct {
	TurnKey
	TaskID string
	Action string
	Reward float64
}

// AnchorTurns returns the run's executed turns that hold a real reward and
// the world model's grade (the per-turn anchor pairs), with their actions,
// in (step, group, sample, turn) order: what a refresh of a multi-turn
// run's world model learns from.
func (s *Store) AnchorTurns(ctx context.Context, run string) ([]AnchorTurn, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.run_id, d.step, d.grp, d.sample, d.turn, t.task_id, d.action, d.reward
		FROM turns d JOIN trajectories t ON t.run_id = d.run_id AND t.step = d.step AND t.grp = d.grp AND t.sample = d.sample
		WHERE d.run_id = $1 AND d.source = 'real' AND d.reward IS NOT NULL AND d.wm_reward IS NOT NULL
		ORDER BY d.step, d.grp, d.sample, d.turn`, run)
	if err != nil {
		return nil, fmt.Errorf("anchor turns of %s: %w", run, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnchorTurn, error) {
		var a AnchorTurn
		err := row.Scan(&a.Run, &a.Step, &a.Group, &a.Sample, &a.Turn, &a.TaskID, &a.Action, &a.Reward)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("anchor turns of %s: %w", run, err)
	}
	return out, nil
}
