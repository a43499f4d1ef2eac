package worldmodel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/seed"
	"github.com/wmrl/wmrl/internal/suite"
)

// RunFunc really executes program text on a task with a pipeline seed and
// returns its score on the reward ladder. A solution's failure is a score,
// not an error; an error means the execution itself could not be carried
// out, and stops the collection.
type RunFunc func(ctx context.Context, t *suite.Task, prog string, seed uint64) (float64, error)

// Record is one logged execution.
type Record struct {
	Task    string  `json:"task"`
	Program string  `json:"program"`
	Score   float64 `json:"score"`
}

// Purposes of derived seeds.
const (
	purposeProgram uint64 = 1
	purposeExec    uint64 = 2
)

// SampleProgram draws a random valid program by walking the token grammar
// of package program: from BOS, a uniformly random legal token at every
// position until EOS. Every program it returns is valid.
func SampleProgram(r *rand.Rand) program.Program {
	toks := []int{program.BOS}
	for {
		legal := program.Legal(toks)
		if len(legal) == 0 {
			panic("worldmodel: token grammar has no legal continuation")
		}
		tok := legal[r.IntN(len(legal))]
		toks = append(toks, tok)
		if tok == program.EOS {
			break
		}
	}
	p, err := program.Decode(toks)
	if err != nil {
		panic(fmt.Sprintf("worldmodel: decode sampled tokens: %v", err))
	}
	return p
}

// programRand is the random source of sample j on the task at suite index
// ti: a pure function of (seed, ti, j).
func programRand(s uint64, ti, j int) *rand.Rand {
	h := seed.Derive(s, purposeProgram, uint64(ti), uint64(j))
	return rand.New(rand.NewPCG(h, seed.Mix(h)))
}

// Collect samples perTask random valid programs for every task (sample j of
// task t from seed (s, t.Index, j)), executes each with run, and returns the
// records in (task, sample) order. Executions run on up to workers
// goroutines (GOMAXPROCS when workers <= 0); the result does not depend on
// their number.
func Collect(ctx context.Context, tasks []*suite.Task, perTask int, s uint64, run RunFunc, workers int) ([]Record, error) {
	if perTask <= 0 {
		return nil, fmt.Errorf("samples per task must be positive, got %d", perTask)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	recs := make([]Record, len(tasks)*perTask)
	for ti, t := range tasks {
		for j := range perTask {
			recs[ti*perTask+j] = Record{Task: t.ID, Program: SampleProgram(programRand(s, t.Index, j)).String()}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	for range min(workers, len(recs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t := tasks[i/perTask]
				es := seed.Derive(s, purposeExec, uint64(t.Index), uint64(i%perTask))
				score, err := run(ctx, t, recs[i].Program, es)
				if err != nil {
					errs[i] = fmt.Errorf("execute %q on %s: %w", recs[i].Program, t.ID, err)
					cancel()
					continue
				}
				recs[i].Score = score
			}
		}()
	}
feed:
	for i := range recs {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}
