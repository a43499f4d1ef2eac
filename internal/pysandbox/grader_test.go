package pysandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/tasks"
)

// TestReward: the ladder's rewards, and the same rewards as the executor
// statuses Grade maps them to.
func TestReward(t *testing.T) {
	cases := []struct {
		give    Result
		want    float64
		wantExe executor.Status
	}{
		{Result{Status: StatusMalformed}, 0, executor.StatusInvalidProgram},
		{Result{Status: StatusSyntaxErr}, 0, executor.StatusInvalidProgram},
		{Result{Status: StatusRuntimeErr, Failure: FailureExit}, 0.1, executor.StatusRuntimeError},
		{Result{Status: StatusRuntimeErr, Failure: FailureSignal}, 0.1, executor.StatusRuntimeError},
		{Result{Status: StatusRuntimeErr, Failure: FailureTimeout}, 0.1, executor.StatusTimeout},
		{Result{Status: StatusRuntimeErr, Failure: FailureMemory}, 0.1, executor.StatusMemory},
		{Result{Status: StatusRanNoSub}, 0.2, executor.StatusInvalidOutput},
		{Result{Status: StatusValid, Position: 0}, 0.5, executor.StatusOK},
		{Result{Status: StatusValid, Position: 0.5}, 0.75, executor.StatusOK},
		{Result{Status: StatusValid, Position: 1}, 1, executor.StatusOK},
	}
	for _, c := range cases {
		got := Reward(c.give.Status, c.give.Position)
		if !near(got, c.want) {
			t.Errorf("Reward(%s, %v) = %v, want %v", c.give.Status, c.give.Position, got, c.want)
		}
		c.give.Score = got
		g := c.give.Grade()
		if g.Status != string(c.wantExe) || !g.Graded || !strings.HasPrefix(g.Detail, string(c.give.Status)+": ") {
			t.Errorf("%s (%s): grade %+v, want status %s", c.give.Status, c.give.Failure, g, c.wantExe)
		}
		if exe := executor.Reward(executor.Status(g.Status), c.give.Position); !near(exe, got) {
			t.Errorf("%s: executor reward %v, ladder %v", c.give.Status, exe, got)
		}
	}
}

// TestPosition: the leaderboard position as the suite computes it, with
// the scores negated for a metric to minimise.
func TestPosition(t *testing.T) {
	max := &tasks.Task{Spec: tasks.Spec{Direction: tasks.Maximize},
		Leaderboard: []tasks.Entry{{Score: 0.9}, {Score: 0.8}, {Score: 0.5}, {Score: 0.4}}}
	min := &tasks.Task{Spec: tasks.Spec{Direction: tasks.Minimize},
		Leaderboard: []tasks.Entry{{Score: 1}, {Score: 2}, {Score: 3}, {Score: 4}}}
	cases := []struct {
		task  *tasks.Task
		give  float64
		want  float64
		label string
	}{
		{max, 0.95, 1, "above the best"},
		{max, 0.9, 1, "tied with the best"},
		{max, 0.85, 0.75, "second"},
		{max, 0.1, 0.25, "below the worst"},
		{min, 0.5, 1, "lowest error"},
		{min, 2.5, 0.5, "third"},
		{min, 9, 0.25, "worst error"},
		{&tasks.Task{}, 0.7, 0, "empty leaderboard"},
	}
	for _, c := range cases {
		if got := Position(c.task, c.give); !near(got, c.want) {
			t.Errorf("%s: Position(%v) = %v, want %v", c.label, c.give, got, c.want)
		}
	}
}

// TestGrader: the backend.Grader adapter grades items in order, with the
// store's tasks, and refuses an unknown task for good.
func TestGrader(t *testing.T) {
	e := newTestEnv(t, Options{})
	g := &Grader{Sandbox: e.sb, Tasks: e.store}
	ctx := context.Background()
	lim := testLimits(finishDeadline)
	got, err := g.Grade(ctx, backend.GradeRequest{Limits: lim, Items: []backend.GradeItem{
		{Task: backend.Task{ID: "synth-a"}, Solution: logistic, Seed: 1},
		{Task: backend.Task{ID: "synth-b"}, Solution: "", Seed: 3},
		{Task: backend.Task{ID: "synth-a"}, Solution: "import os\nprint(os.environ['WMRL_SEED'])\n", Seed: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	timeout, err := g.Grade(ctx, backend.GradeRequest{Limits: testLimits(2 * time.Second), Items: []backend.GradeItem{
		{Task: backend.Task{ID: "synth-b"}, Solution: "import time\ntime.sleep(60)\n", Seed: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got[:1], append(timeout, got[1:]...)...)
	e.checkClean(t, "")
	want := []string{"ok", "timeout", "invalid_program", "invalid_output"}
	if len(got) != len(want) {
		t.Fatalf("%d grades", len(got))
	}
	for i, g := range got {
		if g.Status != want[i] || !g.Graded {
			t.Errorf("item %d: %+v, want %s", i, g, want[i])
		}
	}
	if got[0].Score < 0.5 || got[0].Metric < 0.8 || got[0].CPUSeconds <= 0 || got[0].WallSeconds <= 0 {
		t.Errorf("good solution: %+v", got[0])
	}

	_, err = g.Grade(ctx, backend.GradeRequest{Limits: lim, Items: []backend.GradeItem{{Task: backend.Task{ID: "no-such-task"}, Solution: logistic}}})
	if !backend.IsPermanent(err) || !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("unknown task: %v, want a permanent not-found error", err)
	}
	if err := g.Preflight(ctx, lim); err != nil {
		t.Errorf("preflight: %v", err)
	}
}

// TestSeedReachesSolution: the item's seed is $WMRL_SEED.
func TestSeedReachesSolution(t *testing.T) {
	e := newTestEnv(t, Options{})
	r, err := e.sb.Grade(context.Background(), e.a, "import os\nprint(os.environ['WMRL_SEED'])\n", testLimits(finishDeadline), 12345)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(r.Run.Stdout)) != "12345" {
		t.Errorf("stdout %q, want the seed", r.Run.Stdout)
	}
}

// TestPreflight: limits that cannot be met are *backend.LimitErrors naming
// their field; a missing image is the sandbox's own error.
func TestPreflight(t *testing.T) {
	e := newTestEnv(t, Options{})
	ctx := context.Background()
	if err := e.sb.Preflight(ctx, testLimits(10*time.Second)); err != nil {
		t.Fatalf("good limits: %v", err)
	}
	cases := []struct {
		name  string
		give  func(*backend.Limits)
		field string
	}{
		{"cpus", func(l *backend.Limits) { l.CPUs = 1000 }, backend.FieldCPUs},
		{"memory-low", func(l *backend.Limits) { l.MemoryBytes = 64 << 20 }, backend.FieldMemory},
		{"memory-high", func(l *backend.Limits) { l.MemoryBytes = 1 << 40 }, backend.FieldMemory},
		{"pids", func(l *backend.Limits) { l.Pids = 10 }, backend.FieldPids},
		{"deadline", func(l *backend.Limits) { l.Deadline = 0 }, backend.FieldDeadline},
	}
	for _, c := range cases {
		l := testLimits(10 * time.Second)
		c.give(&l)
		err := e.sb.Preflight(ctx, l)
		var le *backend.LimitError
		if !errors.As(err, &le) || le.Field != c.field {
			t.Errorf("%s: %v, want a *LimitError on %s", c.name, err, c.field)
		}
	}
	bad, err := New(ctx, Options{Image: ImageRepository + ":no-such-tag", StagingDir: e.staging})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Preflight(ctx, testLimits(10*time.Second))
	var le *backend.LimitError
	if err == nil || errors.As(err, &le) || !strings.Contains(err.Error(), "no-such-tag") {
		t.Errorf("missing image: %v, want the sandbox's error naming it", err)
	}
	// Run with the missing image: an error, never a status.
	if r, err := bad.Grade(ctx, e.a, logistic, testLimits(10*time.Second), 1); err == nil {
		t.Errorf("missing image graded %+v, want an error", r)
	}
	e.checkClean(t, "")
	if _, err := New(ctx, Options{}); err == nil {
		t.Error("New without an image: no error")
	}
	if _, err := New(ctx, Options{Image: testImage, Host: "unix://" + filepath.Join(t.TempDir(), "no-engine.sock")}); err == nil ||
		!strings.Contains(err.Error(), "docker engine") {
		t.Errorf("New with no engine: %v, want the engine's error", err)
	}
}

// TestSweep: Sweep removes the sandbox containers whose deadline label has
// passed, and leaves those of executions in progress.
func TestSweep(t *testing.T) {
	e := newTestEnv(t, Options{})
	ctx := context.Background()
	cli := e.sb.Client()
	mk := func(deadline int64) string {
		cfg, hc := e.sb.containerConfig(testLimits(10*time.Second), nil, 0)
		cfg.Labels[sandbox.LabelDeadline] = strconv.FormatInt(deadline, 10)
		id, err := e.sb.create(ctx, cfg, hc)
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Staging directories: a leaked one, a live one, and someone else's.
	oldStage, liveStage, other := filepath.Join(e.staging, stagePrefix+"old"), filepath.Join(e.staging, stagePrefix+"live"),
		filepath.Join(e.staging, "other")
	for _, d := range []string{oldStage, liveStage, other} {
		if err := os.MkdirAll(filepath.Join(d, "code"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-staleStaging - time.Hour)
	for _, d := range []string{oldStage, other} {
		if err := os.Chtimes(d, long, long); err != nil {
			t.Fatal(err)
		}
	}
	leaked := mk(time.Now().Add(-time.Minute).Unix())
	live := mk(time.Now().Add(time.Hour).Unix())
	defer e.sb.remove(ctx, live)
	// Another test process's sweep (or sandbox.Docker.Cleanup) may remove
	// the leaked container first: n is not checked.
	n, err := e.sb.Sweep(ctx)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	t.Logf("Sweep removed %d containers", n)
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelOwner+"="+e.sb.Owner()))})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != live {
		t.Errorf("after the sweep: %v; want only %.12s (leaked %.12s)", list, live, leaked)
	}
	for d, want := range map[string]bool{oldStage: false, liveStage: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v after the sweep, want %v", d, err == nil, want)
		}
	}
	for _, d := range []string{liveStage, other} {
		os.RemoveAll(d)
	}
}
