package grpoloop

import (
	"context"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/fusion"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/plan"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/suite"
)

// Config is the setting of a GRPO loop.
type Config struct {
	// Seed is the run seed every trajectory seed is derived from.
	Seed uint64 `json:"seed"`
	// Groups is G, the number of groups (tasks) per step.
	Groups int `json:"groups"`
	// Samples is n, the number of trajectories per group (at least 2).
	Samples   int              `json:"samples"`
	Advantage advantage.Config `json:"advantage"`
	Exec      ExecConfig       `json:"exec"`
}

// DefaultConfig returns a loop of 4 groups of 8 samples with the default
// advantages and execution settings.
func DefaultConfig(runSeed uint64) Config {
	return Config{Seed: runSeed, Groups: 4, Samples: 8, Advantage: advantage.Default(), Exec: DefaultExecConfig()}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Groups < 1 || c.Groups > 1<<12:
		return fmt.Errorf("groups %d: want 1..%d", c.Groups, 1<<12)
	case c.Samples < 2 || c.Samples > 1<<12:
		return fmt.Errorf("samples %d: want 2..%d", c.Samples, 1<<12)
	}
	if err := c.Advantage.Validate(); err != nil {
		return fmt.Errorf("advantage: %w", err)
	}
	if err := c.Exec.Validate(); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

// Trajectory is one sampled, executed and graded program.
type Trajectory struct {
	Group  int    `json:"group"`
	Sample int    `json:"sample"`
	TaskID string `json:"task_id"`
	// Seed is the sampling seed, policy.SampleSeed(run, step, group, sample).
	Seed    uint64  `json:"seed"`
	Tokens  []int   `json:"tokens"`
	Program string  `json:"program"`
	LogProb float64 `json:"log_prob"`
	// Result is the real execution; Result.Score is the reward.
	Result executor.Result `json:"result"`
	// Advantage and Weight are the trajectory's GRPO advantage and its
	// normalised weight in the update (1/(G·n) for every trajectory, as in
	// the orchestrated path's grpo mode).
	Advantage float64 `json:"advantage"`
	Weight    float64 `json:"weight"`
}

// StepResult is what one step did.
type StepResult struct {
	// Step is the loop step: the samples were drawn at this step and the
	// policy's update counter advanced by one if Updated.
	Step         uint64       `json:"step"`
	Trajectories []Trajectory `json:"trajectories"`
	// MeanScore is the mean reward over all trajectories.
	MeanScore float64 `json:"mean_score"`
	// SkippedGroups counts groups with fewer than Advantage.MinGraded
	// graded trajectories: their advantages are 0, but their trajectories
	// keep their weight (and their KL term), as in the orchestrated path.
	SkippedGroups int `json:"skipped_groups"`
	// Updated is true after every successful step: a step whose advantages
	// are all 0 still applies its (KL-only or zero) gradient and advances
	// the policy's step, as the orchestrated path's Update does.
	Updated bool               `json:"updated"`
	Update  policy.UpdateStats `json:"update"`
	Cost    Cost               `json:"cost"`
}

// Loop runs GRPO steps with real executions on a fixed list of training
// tasks. It is not safe for concurrent use.
type Loop struct {
	cfg   Config
	pol   *policy.Policy
	tasks []*suite.Task
	cards [][]float64
	step  uint64
	total Cost
}

// New returns a loop that trains p (in place) on the tasks of s named by
// taskIDs, starting at step p.Step(); group g of step s works on the task
// TaskOf(s, g) of that list. With the suite's training tasks in suite order
// (s.Split(suite.Train)) and a policy from InitPolicy, the loop takes the
// orchestrated path's grpo steps.
func New(s *suite.Suite, p *policy.Policy, taskIDs []string, cfg Config) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("grpo config: %w", err)
	}
	if len(taskIDs) == 0 {
		return nil, errors.New("grpo: no training tasks")
	}
	l := &Loop{cfg: cfg, pol: p, step: p.Step()}
	for _, id := range taskIDs {
		t, err := s.Task(id)
		if err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
		l.tasks = append(l.tasks, t)
		l.cards = append(l.cards, t.Card.Vector())
	}
	return l, nil
}

// Policy returns the policy being trained.
func (l *Loop) Policy() *policy.Policy { return l.pol }

// NextStep returns the step the next call of Step will run.
func (l *Loop) NextStep() uint64 { return l.step }

// Cost returns the cost of every execution the loop has run so far.
func (l *Loop) Cost() Cost { return l.total }

// TaskOf returns the index into the loop's tasks of group g at step s:
// plan.TaskIndex(run seed, s, g, len(tasks)), the orchestrated path's
// choice when the tasks are the suite's training tasks in suite order.
func (l *Loop) TaskOf(step uint64, g int) int {
	return plan.TaskIndex(l.cfg.Seed, int(step), g, len(l.tasks))
}

// Step samples, executes and grades G×n programs, fuses them as the
// orchestrated path's grpo mode does (fusion.Step, fusion.Examples) and
// updates the policy once. On error the policy is unchanged and the step is
// not consumed.
func (l *Loop) Step(ctx context.Context) (StepResult, error) {
	g, n := l.cfg.Groups, l.cfg.Samples
	res := StepResult{Step: l.step, Trajectories: make([]Trajectory, 0, g*n)}
	jobs := make([]*executor.Job, 0, g*n)
	cards := make(map[string][]float64, g)
	for gi := range g {
		ti := l.TaskOf(l.step, gi)
		t := l.tasks[ti]
		cards[t.ID] = l.cards[ti]
		for si := range n {
			sd := policy.SampleSeed(l.cfg.Seed, l.step, uint64(gi), uint64(si))
			tr, err := SampleProgram(l.pol, l.cards[ti], sd)
			if err != nil {
				return StepResult{}, fmt.Errorf("step %d group %d sample %d: %w", l.step, gi, si, err)
			}
			tr.Group, tr.Sample, tr.TaskID = gi, si, t.ID
			res.Trajectories = append(res.Trajectories, tr)
			jobs = append(jobs, executor.NewJob(t, tr.Program, plan.ExecSeed(l.cfg.Seed, int(l.step), gi, si)))
		}
	}
	results, cost, err := Execute(ctx, l.cfg.Exec, jobs)
	if err != nil {
		return StepResult{}, fmt.Errorf("step %d: %w", l.step, err)
	}
	res.Cost = cost
	fts := make([]fusion.Trajectory, len(res.Trajectories))
	for i := range res.Trajectories {
		tr := &res.Trajectories[i]
		tr.Result = results[i]
		fts[i] = fusion.Trajectory{Group: tr.Group, Sample: tr.Sample, TaskID: tr.TaskID, Program: tr.Program,
			Env: &tr.Result.Score}
	}
	batch, _, stats := fusion.Step(fts, mode.GRPO, nil, isotonic.Map{}, denoise.State{}, denoise.Config{}, l.cfg.Advantage)
	for i, it := range batch.Items {
		res.Trajectories[i].Advantage, res.Trajectories[i].Weight = it.Advantage, it.Weight
	}
	res.MeanScore, res.SkippedGroups = stats.MeanReward, stats.SkippedGroups
	examples, err := fusion.Examples(batch, func(taskID string) ([]float64, error) { return cards[taskID], nil })
	if err != nil {
		return StepResult{}, fmt.Errorf("step %d: %w", l.step, err)
	}
	st, err := l.pol.Update(examples)
	if err != nil {
		return StepResult{}, fmt.Errorf("step %d: %w", l.step, err)
	}
	res.Update, res.Updated = st, true
	l.total.Add(cost)
	l.step++
	return res, nil
}

// InitPolicy returns the initial policy of a run with seed runSeed, as the
// orchestrated path's CreateRun makes checkpoint 0: cfg over
// policy.ProgramGrammar, initialised from plan.InitSeed(runSeed).
func InitPolicy(cfg policy.Config, runSeed uint64) (*policy.Policy, error) {
	return policy.Init(cfg, policy.ProgramGrammar{}, plan.InitSeed(runSeed))
}

// SampleProgram draws one program from p for a task with card vector card
// and sample seed sd: the tokens, their log-probability and the decoded
// program text (the other fields of the Trajectory are left zero).
func SampleProgram(p *policy.Policy, card []float64, sd uint64) (Trajectory, error) {
	smp, text, err := p.SampleProgram(card, sd)
	if err != nil {
		return Trajectory{}, err
	}
	return Trajectory{Seed: sd, Tokens: smp.Tokens, Program: text, LogProb: smp.LogProb}, nil
}
