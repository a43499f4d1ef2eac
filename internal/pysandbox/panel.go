package pysandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/tasks"
)

// PanelSolution is one reference solution: deploy/pytasks/panel/<Name>.py.
type PanelSolution struct {
	Name   string
	Source string
}

// LoadPanel reads the reference panel: every <name>.py in dir, by name.
// A name must be a task id-like word (tasks.CheckID), since it is a
// leaderboard row.
func LoadPanel(dir string) ([]PanelSolution, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.py"))
	if err != nil {
		return nil, fmt.Errorf("panel: %w", err)
	}
	slices.Sort(paths)
	var panel []PanelSolution
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".py")
		if err := tasks.CheckID(name); err != nil {
			return nil, fmt.Errorf("panel %s: name: %w", p, err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("panel: %w", err)
		}
		panel = append(panel, PanelSolution{Name: name, Source: string(b)})
	}
	if len(panel) == 0 {
		return nil, fmt.Errorf("panel: no solutions (*.py) in %s", dir)
	}
	return panel, nil
}

// PanelPids bounds the processes and threads of a panel solution.
const PanelPids = 256

// PanelLimits are the limits a panel solution runs under on t: the task's
// own time limit, memory limit and CPUs.
func PanelLimits(t *tasks.Task) backend.Limits {
	return backend.Limits{MemoryBytes: t.Spec.MemoryLimit, CPUs: t.Spec.CPUs, Pids: PanelPids, Deadline: t.Spec.TimeLimit}
}

// PanelResult is one panel solution's result on a task.
type PanelResult struct {
	Solution string
	Result   Result
}

// RunPanel runs every panel solution on t under PanelLimits, at most
// parallel at a time, and returns the leaderboard (the valid solutions'
// metrics, best first by the task's direction, ties by name) and every
// result, in panel order. A solution that is not valid gets no row. Its
// seed is 0: the panel's solutions fix their own random states, so the
// leaderboard depends only on the task, the panel and the image.
func (s *Sandbox) RunPanel(ctx context.Context, t *tasks.Task, panel []PanelSolution, parallel int) ([]tasks.Entry, []PanelResult, error) {
	lim := PanelLimits(t)
	results := make([]PanelResult, len(panel))
	errs := make([]error, len(panel))
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for i, sol := range panel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := s.Grade(ctx, t, sol.Source, lim, 0)
			results[i], errs[i] = PanelResult{Solution: sol.Name, Result: r}, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("panel %s on %s: %w", panel[i].Name, t.Spec.ID, err)
		}
	}
	var board []tasks.Entry
	for _, r := range results {
		if r.Result.Status == StatusValid {
			board = append(board, tasks.Entry{Solution: r.Solution, Score: r.Result.Metric})
		}
	}
	dir := t.Spec.Metric.Direction()
	slices.SortStableFunc(board, func(a, b tasks.Entry) int {
		switch {
		case dir.Better(a.Score, b.Score):
			return -1
		case dir.Better(b.Score, a.Score):
			return 1
		}
		return strings.Compare(a.Solution, b.Solution)
	})
	return board, results, nil
}

// LeaderboardCSV is leaderboard.csv for entries (best first): a header
// solution,score, then one row each, scores in the shortest form that
// reads back to the same float64.
func LeaderboardCSV(entries []tasks.Entry) []byte {
	var b strings.Builder
	b.WriteString("solution,score\n")
	for _, e := range entries {
		b.WriteString(e.Solution + "," + strconv.FormatFloat(e.Score, 'g', -1, 64) + "\n")
	}
	return []byte(b.String())
}

// WriteLeaderboard writes entries to the leaderboard.csv of the task
// directory dir (as prepared, before it is imported: the store's copies
// are never changed), and checks that the task still loads.
func WriteLeaderboard(dir string, entries []tasks.Entry) error {
	p := filepath.Join(dir, tasks.FileLeaderboard)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, LeaderboardCSV(entries), 0o644); err != nil {
		return fmt.Errorf("write leaderboard: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write leaderboard: %w", err)
	}
	if _, err := tasks.Load(dir); err != nil {
		return fmt.Errorf("write leaderboard: the task no longer loads: %w", err)
	}
	return nil
}
