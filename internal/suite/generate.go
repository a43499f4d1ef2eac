package suite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/wmrl/wmrl/internal/seed"
	"github.com/wmrl/wmrl/internal/tabular"
)

// Options fix everything a suite is generated from. Two suites built from
// equal options are identical, byte for byte.
type Options struct {
	Seed    uint64 `json:"seed"`
	Train   int    `json:"train"`   // number of training tasks
	HeldOut int    `json:"heldout"` // number of held-out tasks
	// MinRows and MaxRows bound a task's total rows (train + test); the
	// count is drawn log-uniformly between them.
	MinRows int `json:"min_rows"`
	MaxRows int `json:"max_rows"`
	// MaxFeatures caps every family's feature range (4 to 64).
	MaxFeatures int `json:"max_features"`
	// PanelSize is how many reference programs per kind build each
	// leaderboard: the first PanelSize of the panel; 0 means all of it.
	PanelSize int `json:"panel_size"`
}

// Default sizes of the built-in suite.
const (
	DefaultTrain   = 48
	DefaultHeldOut = 16
	DefaultMinRows = 300
	DefaultMaxRows = 2400
)

// DefaultOptions returns the options of the built-in suite for a seed.
func DefaultOptions(suiteSeed uint64) Options {
	return Options{
		Seed:        suiteSeed,
		Train:       DefaultTrain,
		HeldOut:     DefaultHeldOut,
		MinRows:     DefaultMinRows,
		MaxRows:     DefaultMaxRows,
		MaxFeatures: 64,
	}
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Train < 0 || o.HeldOut < 0 || o.Train+o.HeldOut == 0:
		return fmt.Errorf("need a positive number of tasks, got %d train and %d held-out", o.Train, o.HeldOut)
	case o.Train+o.HeldOut > 1000:
		return fmt.Errorf("at most 1000 tasks, got %d", o.Train+o.HeldOut)
	case o.MinRows < 2*minTestRows || o.MaxRows < o.MinRows || o.MaxRows > 100000:
		return fmt.Errorf("rows must satisfy %d <= min_rows <= max_rows <= 100000, got %d and %d", 2*minTestRows, o.MinRows, o.MaxRows)
	case o.MaxFeatures < 4 || o.MaxFeatures > 64:
		return fmt.Errorf("max_features must be in [4, 64], got %d", o.MaxFeatures)
	case o.PanelSize < 0 || o.PanelSize > panelLen():
		return fmt.Errorf("panel_size must be in [0, %d], got %d", panelLen(), o.PanelSize)
	}
	return nil
}

// Purposes of derived seeds, so that seeds for different uses never
// collide.
const (
	purposeTask  uint64 = 1
	purposePanel uint64 = 2
)

// TaskSeed is the seed of task index i of a suite: a hash of the suite seed
// and the index.
func TaskSeed(suiteSeed uint64, i int) uint64 {
	return seed.Derive(suiteSeed, purposeTask, uint64(i))
}

// scoreFunc fits program text on d's train split and returns the metric on
// its test split.
type scoreFunc func(ctx context.Context, prog string, d *tabular.Dataset, seed uint64) (float64, error)

// progressFunc is told each time a task is finished.
type progressFunc func(done, total int)

// Generate builds the suite for opts: data, cards, questions, and the
// leaderboards, which take real fits of the reference panel (tens of
// seconds for the default suite). Tasks are built in parallel on
// GOMAXPROCS goroutines; the result does not depend on their number.
func Generate(ctx context.Context, opts Options) (*Suite, error) {
	return generate(ctx, opts, engineScore, runtime.GOMAXPROCS(0), nil)
}

func generate(ctx context.Context, opts Options, score scoreFunc, workers int, progress progressFunc) (*Suite, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("suite options: %w", err)
	}
	total := opts.Train + opts.HeldOut
	tasks := make([]*Task, total)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var (
		mu       sync.Mutex
		done     int
		firstErr error // the first failure in time, not a later cancellation
		wg       sync.WaitGroup
	)
	for range max(1, min(workers, total)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t, err := buildTask(ctx, opts, i, score)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					cancel()
				} else {
					tasks[i] = t
					done++
					if progress != nil {
						progress(done, total)
					}
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range total {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("generate suite: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("generate suite: %w", err)
	}
	s := &Suite{Options: opts, Tasks: tasks}
	s.Hash = hashSuite(s)
	return s, nil
}

// comboFor returns the (kind, family) of task index i: training tasks and
// held-out tasks each cycle through every combination in a fixed order, so
// both splits span the same families.
func comboFor(opts Options, i int) (combo, Split) {
	if i < opts.Train {
		return combos[i%len(combos)], Train
	}
	return combos[(i-opts.Train)%len(combos)], HeldOut
}

// taskID is the readable id of a task, e.g. reg-sparse-007.
func taskID(c combo, i int) string {
	prefix := "reg"
	if c.kind == tabular.Classification {
		prefix = "clf"
	}
	return fmt.Sprintf("%s-%s-%03d", prefix, c.family, i)
}

func buildTask(ctx context.Context, opts Options, i int, score scoreFunc) (*Task, error) {
	c, split := comboFor(opts, i)
	ts := TaskSeed(opts.Seed, i)
	r := newRNG(ts)
	lo, hi := featureRange(c.family)
	hi = min(hi, opts.MaxFeatures)
	lo = min(lo, hi)
	d := min(hi, int(r.logUniform(float64(lo), float64(hi+1))))
	n := min(opts.MaxRows, int(r.logUniform(float64(opts.MinRows), float64(opts.MaxRows+1))))
	id := taskID(c, i)
	data, info, err := generateData(r, c, n, d)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	card := NewCard(data)
	t := &Task{
		ID:       id,
		Index:    i,
		Split:    split,
		Kind:     c.kind,
		Family:   c.family,
		Seed:     ts,
		Question: question(r, c, card.TrainRows, d, info),
		Metric:   MetricFor(c.kind),
		Card:     card,
		Data:     data,
	}
	if err := t.buildLeaderboard(ctx, opts, score); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return t, nil
}

// buildLeaderboard scores every reference program of the task's kind. A
// reference that fails by its own fault (a numerical breakdown, non-finite
// predictions) is left off the leaderboard; at most a tenth of the panel
// may fail. Any other error (a bug, a cancelled context) stops the build.
func (t *Task) buildLeaderboard(ctx context.Context, opts Options, score scoreFunc) error {
	progs := panelFor(t.Kind, opts.PanelSize)
	scores := make([]float64, 0, len(progs))
	best, bestScore := -1, math.Inf(-1)
	var failures []string
	for j, p := range progs {
		v, err := score(ctx, p, t.Data, panelSeed(t.Seed, j))
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = fmt.Errorf("%w: score %g", tabular.ErrNonFinite, v)
		}
		if err != nil {
			if ctx.Err() != nil || !(tabular.IsSolutionError(err) || errors.Is(err, tabular.ErrNonFinite)) {
				return fmt.Errorf("reference program %q: %w", p, err)
			}
			failures = append(failures, fmt.Sprintf("%q: %v", p, err))
			continue
		}
		scores = append(scores, v)
		if v > bestScore {
			best, bestScore = j, v
		}
	}
	if len(failures) > len(progs)/10 {
		return fmt.Errorf("%d of %d reference programs failed, first %s", len(failures), len(progs), failures[0])
	}
	t.Leaderboard = sortedDesc(scores)
	t.ExampleProgram = progs[best]
	return nil
}
