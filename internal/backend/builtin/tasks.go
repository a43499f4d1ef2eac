package builtin

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/suite"
)

// Suites returns the built-in suite of a suite seed.
type Suites interface {
	Suite(ctx context.Context, suiteSeed uint64) (*suite.Suite, error)
}

// SuiteCache loads each suite once per process.
type SuiteCache struct {
	// Load builds or reads a suite (suite.Load in the worker).
	Load func(ctx context.Context, suiteSeed uint64) (*suite.Suite, error)

	mu     sync.Mutex
	suites map[uint64]*suite.Suite
}

var _ Suites = (*SuiteCache)(nil)

// Suite returns the suite of suiteSeed, loading it on first use. Loads run
// one at a time: the first build of a suite takes a minute of CPU.
func (c *SuiteCache) Suite(ctx context.Context, suiteSeed uint64) (*suite.Suite, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.suites[suiteSeed]; ok {
		return s, nil
	}
	s, err := c.Load(ctx, suiteSeed)
	if err != nil {
		return nil, err
	}
	if c.suites == nil {
		c.suites = map[uint64]*suite.Suite{}
	}
	c.suites[suiteSeed] = s
	return s, nil
}

// Tasks is the built-in suite as a task source.
type Tasks struct {
	Suites Suites
}

var _ backend.TaskSource = (*Tasks)(nil)

// Tasks returns the tasks of a split, in suite order.
func (t *Tasks) Tasks(ctx context.Context, suiteSeed uint64, split backend.Split) ([]backend.Task, error) {
	s, err := t.suite(ctx, suiteSeed)
	if err != nil {
		return nil, err
	}
	ts := s.Split(suite.Split(split))
	out := make([]backend.Task, len(ts))
	for i, x := range ts {
		out[i] = taskOf(suiteSeed, x)
	}
	return out, nil
}

// Task returns one task; an unknown id is a permanent error.
func (t *Tasks) Task(ctx context.Context, suiteSeed uint64, id string) (backend.Task, error) {
	x, err := t.suiteTask(ctx, suiteSeed, id)
	if err != nil {
		return backend.Task{}, err
	}
	return taskOf(suiteSeed, x), nil
}

func taskOf(suiteSeed uint64, t *suite.Task) backend.Task {
	return backend.Task{Suite: suiteSeed, ID: t.ID, Split: backend.Split(t.Split), Features: t.Card.Vector()}
}

func (t *Tasks) suite(ctx context.Context, suiteSeed uint64) (*suite.Suite, error) {
	s, err := t.Suites.Suite(ctx, suiteSeed)
	if err != nil {
		return nil, fmt.Errorf("suite %d: %w", suiteSeed, err)
	}
	return s, nil
}

// suiteTask returns the suite's own task (its data and leaderboard).
func (t *Tasks) suiteTask(ctx context.Context, suiteSeed uint64, id string) (*suite.Task, error) {
	s, err := t.suite(ctx, suiteSeed)
	if err != nil {
		return nil, err
	}
	x, err := s.Task(id)
	if err != nil {
		return nil, backend.Permanent(err)
	}
	return x, nil
}

// DescribeData describes a task's data as the reference's request_info
// answers it: the tables the program sees, their rows and columns, from
// the task's card (the train split only; the test labels stay hidden). A
// built-in task has no files: its program reads the two splits as
// matrices, so the "files" are the splits.
func (t *Tasks) DescribeData(ctx context.Context, suiteSeed uint64, id string) (string, error) {
	x, err := t.suiteTask(ctx, suiteSeed, id)
	if err != nil {
		return "", err
	}
	c := x.Card
	cols := make([]string, len(c.Features))
	for i, f := range c.Features {
		cols[i] = f.Name
	}
	var b strings.Builder
	fmt.Fprintf(&b, "DATA STRUCTURE (read-only info):\n")
	fmt.Fprintf(&b, "Task %s of the built-in suite %d: %s, metric %s (higher is better).\n", x.ID, suiteSeed, c.Kind, c.Metric)
	fmt.Fprintf(&b, "Tables (the built-in suite has no files: a program reads the splits as matrices):\n")
	fmt.Fprintf(&b, "  train (%d rows)\n      columns: %v + target y\n", c.TrainRows, cols)
	fmt.Fprintf(&b, "  test (%d rows)\n      columns: %v (the target is hidden)\n", c.TestRows, cols)
	fmt.Fprintf(&b, "Columns (train split): name, mean, std, corr with y\n")
	for _, f := range c.Features {
		fmt.Fprintf(&b, "  %s  %.4g  %.4g  %.3f\n", f.Name, f.Mean, f.Std, f.CorrTarget)
	}
	fmt.Fprintf(&b, "  y  %.4g  %.4g\n", c.Target.Mean, c.Target.Std)
	return b.String(), nil
}
