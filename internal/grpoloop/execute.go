package grpoloop

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/wmrl/wmrl/internal/budget"
	"github.com/wmrl/wmrl/internal/executor"
)

// ExecConfig says how programs are executed.
type ExecConfig struct {
	// Budget is the largest tabular.EstimateCost a program may have to be
	// run; a dearer one is scored as a timeout without running. 0 turns
	// the budget off.
	Budget float64 `json:"budget"`
	// DeadlineSeconds is the safety deadline of one execution (0: none).
	DeadlineSeconds float64 `json:"deadline_seconds"`
	// Workers is the number of executions run at once; 0 means GOMAXPROCS.
	Workers int `json:"workers"`
}

// DefaultExecConfig returns the default budget and deadline, with
// GOMAXPROCS workers.
func DefaultExecConfig() ExecConfig {
	return ExecConfig{Budget: budget.DefaultBudget, DeadlineSeconds: budget.DefaultDeadlineSeconds}
}

// Validate reports the first invalid field.
func (c ExecConfig) Validate() error {
	switch {
	case math.IsNaN(c.Budget) || math.IsInf(c.Budget, 0) || c.Budget < 0:
		return fmt.Errorf("budget %v: want finite and >= 0", c.Budget)
	case math.IsNaN(c.DeadlineSeconds) || math.IsInf(c.DeadlineSeconds, 0) || c.DeadlineSeconds < 0:
		return fmt.Errorf("deadline_seconds %v: want finite and >= 0", c.DeadlineSeconds)
	case c.Workers < 0:
		return fmt.Errorf("workers %d: want >= 0", c.Workers)
	}
	return nil
}

// Cost is what a batch of executions cost.
type Cost struct {
	// Executions counts the programs that were run.
	Executions int `json:"executions"`
	// Refused counts the programs scored as a timeout by the budget
	// without running.
	Refused int `json:"refused"`
	// CPUSeconds is the process CPU time (user + system) spent while the
	// batch ran.
	CPUSeconds float64 `json:"cpu_seconds"`
	// WallSeconds is the batch's wall-clock time.
	WallSeconds float64 `json:"wall_seconds"`
}

// Add adds o to c.
func (c *Cost) Add(o Cost) {
	c.Executions += o.Executions
	c.Refused += o.Refused
	c.CPUSeconds += o.CPUSeconds
	c.WallSeconds += o.WallSeconds
}

// Execute runs every job with executor.Run on cfg.Workers goroutines and
// returns the results in job order. A program over the budget is scored as
// a timeout without running; a solution's failure is a result. The error is
// for failures that are not the solution's (a malformed job) and for a
// cancelled ctx; then no results are returned.
func Execute(ctx context.Context, cfg ExecConfig, jobs []*executor.Job) ([]executor.Result, Cost, error) {
	if err := cfg.Validate(); err != nil {
		return nil, Cost{}, fmt.Errorf("exec config: %w", err)
	}
	results := make([]executor.Result, len(jobs))
	errs := make([]error, len(jobs))
	refused := make([]bool, len(jobs))
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(jobs)))

	cpu0, start := processCPUSeconds(), time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], refused[i], errs[i] = executeOne(ctx, cfg, jobs[i])
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	cost := Cost{CPUSeconds: processCPUSeconds() - cpu0, WallSeconds: time.Since(start).Seconds()}

	if err := ctx.Err(); err != nil {
		return nil, Cost{}, fmt.Errorf("execute: %w", err)
	}
	for i, err := range errs {
		if err != nil {
			return nil, Cost{}, fmt.Errorf("execute job %d: %w", i, err)
		}
		if refused[i] {
			cost.Refused++
		} else {
			cost.Executions++
		}
	}
	return results, cost, nil
}

// executeOne runs one job on the calling goroutine, locked to its thread so
// that the thread's CPU time is the execution's.
func executeOne(ctx context.Context, cfg ExecConfig, job *executor.Job) (executor.Result, bool, error) {
	if est, over := budget.OverBudget(job, cfg.Budget); over {
		return budget.Refusal(est, cfg.Budget), true, nil
	}
	if err := ctx.Err(); err != nil {
		return executor.Result{}, false, err
	}
	runCtx := ctx
	if cfg.DeadlineSeconds > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, time.Duration(cfg.DeadlineSeconds*float64(time.Second)))
		defer cancel()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, start := threadCPUSeconds(), time.Now()
	res, err := executor.Run(runCtx, job)
	if err != nil {
		return executor.Result{}, false, err
	}
	if ctx.Err() != nil { // the caller's cancellation is not the solution's timeout
		return executor.Result{}, false, ctx.Err()
	}
	res.WallSeconds = time.Since(start).Seconds()
	res.CPUSeconds = max(0, threadCPUSeconds()-cpu0)
	return res, false, nil
}
