package grpoloop

import (
	"context"
	"errors"
	"fmt"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/seed"
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
	Result    executor.Result `json:"result"`
	Advantage float64         `json:"advantage"`
	Weight    float64         `json:"weight"`
}

// StepResult is what one step did.
type StepResult struct {
	// Step is the loop step: the samples were drawn at this step and the
	// policy's update counter advanced by one if Updated.
	Step         uint64       `json:"step"`
	Trajectories []Trajectory `json:"trajectories"`
	// MeanScore is the mean reward over all trajectories.
	MeanScore float64 `json:"mean_score"`
	// SkippedGroups counts groups left out of the update (fewer than
	// Advantage.MinGraded graded trajectories).
	SkippedGroups int                `json:"skipped_groups"`
	Updated       bool               `json:"updated"`
	Update        policy.UpdateStats `json:"update"`
	Cost          Cost               `json:"cost"`
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
// taskIDs, in that order, starting at step p.Step().
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
// (s·G + g) mod len(tasks), so consecutive steps cycle through the list.
func (l *Loop) TaskOf(step uint64, g int) int {
	return int((step*uint64(l.cfg.Groups) + uint64(g)) % uint64(len(l.tasks)))
}

// Step samples, executes and grades G×n programs and updates the policy
// once. On error the policy is unchanged and the step is not consumed.
func (l *Loop) Step(ctx context.Context) (StepResult, error) {
	g, n := l.cfg.Groups, l.cfg.Samples
	res := StepResult{Step: l.step, Trajectories: make([]Trajectory, 0, g*n)}
	jobs := make([]*executor.Job, 0, g*n)
	for gi := range g {
		ti := l.TaskOf(l.step, gi)
		t := l.tasks[ti]
		for si := range n {
			sd := policy.SampleSeed(l.cfg.Seed, l.step, uint64(gi), uint64(si))
			tr, err := SampleProgram(l.pol, l.cards[ti], sd)
			if err != nil {
				return StepResult{}, fmt.Errorf("step %d group %d sample %d: %w", l.step, gi, si, err)
			}
			tr.Group, tr.Sample, tr.TaskID = gi, si, t.ID
			res.Trajectories = append(res.Trajectories, tr)
			jobs = append(jobs, executor.NewJob(t, tr.Program, ExecSeed(sd)))
		}
	}
	results, cost, err := Execute(ctx, l.cfg.Exec, jobs)
	if err != nil {
		return StepResult{}, fmt.Errorf("step %d: %w", l.step, err)
	}
	res.Cost = cost
	var batch []policy.Example
	var sum float64
	for gi := range g {
		trs := res.Trajectories[gi*n : (gi+1)*n]
		rewards := make([]float64, n)
		for si := range trs {
			trs[si].Result = results[gi*n+si]
			rewards[si] = trs[si].Result.Score
			sum += rewards[si]
		}
		adv, ok := advantage.Group(rewards, nil, l.cfg.Advantage)
		if !ok {
			res.SkippedGroups++
			continue
		}
		for si := range trs {
			trs[si].Advantage, trs[si].Weight = adv[si], 1
			batch = append(batch, policy.Example{
				Card: l.cards[l.TaskOf(l.step, gi)], Tokens: trs[si].Tokens, Advantage: adv[si], Weight: 1,
			})
		}
	}
	res.MeanScore = sum / float64(g*n)
	if len(batch) > 0 {
		st, err := l.pol.Update(batch)
		if err != nil {
			return StepResult{}, fmt.Errorf("step %d: %w", l.step, err)
		}
		res.Update, res.Updated = st, true
	}
	l.total.Add(cost)
	l.step++
	return res, nil
}

// execTag separates execution seeds from the sample seeds they derive from.
const execTag = "wmrl/grpoloop/exec"

// ExecSeed is the seed of the pipeline run for the trajectory with sample
// seed sd (it drives random features and the like).
func ExecSeed(sd uint64) uint64 { return seed.Derive(seed.String(execTag), sd) }

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
