package workflows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

// longOutage is how many of an activity's first calls fail in the unit
// tests of long outages: with backoff from 1 s doubling to 1 min, the
// ninth failure ends 3 min 3 s after the first call, past the 2 minutes
// that once bounded a local activity's retries.
const longOutage = 9

// runStepWith runs step 0 of cfg against f and returns its result, its
// error and how much workflow time it took.
func runStepWith(t *testing.T, cfg runconfig.Config, f *fake) (StepResult, error, time.Duration) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	f.register(env, 0)
	start := env.Now()
	env.ExecuteWorkflow(TrainingStep, stepInput0(cfg))
	took := env.Now().Sub(start)
	var res StepResult
	if err := env.GetWorkflowError(); err != nil {
		return res, err, took
	}
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res, nil, took
}

// TestStepWaitsOutLongOutage: an infrastructure failure of any of a step's
// activities, local (StartStep, AnchorUncertainty, CalibrateAndFuse,
// FinishStep) or on a task queue, that lasts three minutes (longer than
// their 2-minute start-to-close) delays the step and changes nothing in its
// result.
func TestStepWaitsOutLongOutage(t *testing.T) {
	cfg := activeConfig(t) // so the step also asks AnchorUncertainty
	want, err, _ := runStepWith(t, cfg, &fake{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"StartStep", "AnchorUncertainty", "Generate", "ScoreWorldModel", "CalibrateAndFuse",
		"Update", "FinishStep"} {
		t.Run(name, func(t *testing.T) {
			f := &fake{failFirst: map[string]int{name: longOutage}}
			got, err, took := runStepWith(t, cfg, f)
			if err != nil {
				t.Fatalf("step failed: %v", err)
			}
			if took < 3*time.Minute {
				t.Errorf("step took %v of workflow time, want the outage's 3 min or more", took)
			}
			if n := f.n(name); n < longOutage+1 {
				t.Errorf("%s called %d times, want %d or more", name, n, longOutage+1)
			}
			// The stage times see the outage (the step's span ends with its
			// update, before FinishStep); nothing else changes.
			if sec := got.Metrics.Stages.Step.Seconds(); name != "FinishStep" && sec < (3*time.Minute).Seconds() {
				t.Errorf("the step's span is %v s, want the outage's 3 min or more", sec)
			}
			got.Metrics.Stages, want.Metrics.Stages = stepsummary.Stages{}, stepsummary.Stages{}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("result after the outage %+v, without %+v", got, want)
			}
		})
	}
}

// TestStepLocalOutageOutlastsBudget: a local activity's retries are
// bounded by sandbox.retry_hours (here 3 min), not by its start-to-close:
// it is tried after 2 min, and an outage longer than the budget fails the
// step with the outage's error.
func TestStepLocalOutageOutlastsBudget(t *testing.T) {
	cfg := activeConfig(t)
	cfg.Sandbox.RetryHours = 0.05
	for _, name := range []string{"StartStep", "AnchorUncertainty", "CalibrateAndFuse", "FinishStep"} {
		t.Run(name, func(t *testing.T) {
			f := &fake{failFirst: map[string]int{name: 1 << 30}}
			_, err, took := runStepWith(t, cfg, f)
			if err == nil || !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("step error %v, want the outage's", err)
			}
			// Tries at 0, 1, 3, 7, 15, 31, 63 and 123 s; the next, at
			// 183 s, is past the budget.
			if n := f.n(name); n != 8 {
				t.Errorf("%s called %d times, want 8 (the last after 2 min)", name, n)
			}
			if took < 2*time.Minute || took > 3*time.Minute {
				t.Errorf("step failed after %v of workflow time, want within the 3 min budget, past 2 min", took)
			}
			if f.n("Update") > 0 && name != "FinishStep" {
				t.Errorf("step went on after %s failed", name)
			}
		})
	}
}

// The outage tests cut a real wmrl-worker process off Postgres, or off the
// Docker engine, for outageFor in the middle of a step's executions, through
// a testenv.Proxy that only this worker uses; the run must end with the
// final checkpoint of the uninterrupted run and every anchor pair. They run
// with WMRL_FAULT_TEST=1 (CI sets it), like TestFaultWorkerKilled:
//
//	WMRL_FAULT_TEST=1 go test -run 'TestFault' -v ./workflows
//
// WMRL_OUTAGE_SECONDS changes the outage's length (default 30).

func outageFor(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("WMRL_OUTAGE_SECONDS"); v != "" {
		var s float64
		if _, err := fmt.Sscan(v, &s); err != nil || s <= 0 {
			t.Fatalf("WMRL_OUTAGE_SECONDS=%q: want a positive number", v)
		}
		return time.Duration(s * float64(time.Second))
	}
	return 30 * time.Second
}

// outageConfig is the tiny preset on the default suite, 4 steps.
func outageConfig(t *testing.T) runconfig.Config {
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = suite.DefaultSeed
	cfg.Steps, cfg.ContinueAsNewEvery = 4, 2
	cfg.Eval = runconfig.Eval{Every: 0, Samples: 2, Tasks: 1}
	return cfg
}

// checkSameRun compares a run hit by a fault with the uninterrupted one:
// the same final checkpoint, the same row counts, every executed anchor
// trajectory's pair stored.
func checkSameRun(ctx context.Context, t *testing.T, st *store.Store, cfg runconfig.Config, ref, run string,
	refRes, res RunResult) {
	t.Helper()
	if res.Checkpoint != refRes.Checkpoint {
		t.Fatalf("final checkpoint after the outage %+v, uninterrupted %+v", res.Checkpoint, refRes.Checkpoint)
	}
	a, err := st.Count(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Count(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("row counts differ: uninterrupted %+v, with the outage %+v", a, b)
	}
	if b.AnchorPairs != b.Executed || b.Executed != cfg.Steps*cfg.Samples || b.Steps != cfg.Steps {
		t.Fatalf("counts %+v: want %d executed anchor trajectories, each with its pair", b, cfg.Steps*cfg.Samples)
	}
}

// waitScored waits until step s of run has every trajectory scored by the
// world model: the step's executions are next.
func waitScored(ctx context.Context, t *testing.T, st *store.Store, cfg runconfig.Config, run string, s int) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("step %d scored", s), func() bool {
		ts, err := st.StepTrajectories(ctx, run, s)
		if err != nil || len(ts) != cfg.Groups*cfg.Samples {
			return false
		}
		for _, tr := range ts {
			if tr.WMScore == nil {
				return false
			}
		}
		return true
	})
}

// runThroughOutage starts run, waits until its step 1 is scored (its
// executions are next), cuts what cut cuts for outageFor, restores it, and
// returns the run's result once it ends.
func runThroughOutage(ctx context.Context, t *testing.T, c tclient.Client, st *store.Store, cfg runconfig.Config,
	run, what string, cut func(), restore func() error) RunResult {
	t.Helper()
	if _, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: run, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: run, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	waitScored(ctx, t, st, cfg, run, 1)
	d := outageFor(t)
	cut()
	t.Logf("%s cut off from the worker for %v during step 1", what, d)
	time.Sleep(d)
	back := time.Now() // the outage's end: restoring (a cluster's restart) counts in what it costs
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := c.GetWorkflow(ctx, run, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("run ended %v after the end of the outage (%s restored)", time.Since(back).Round(time.Millisecond), what)
	return res
}

func TestFaultPostgresOutage(t *testing.T) {
	c, bin := faultSetup(t)
	st, dsn := testenv.FreshDB(t)
	cfg := outageConfig(t)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	w := startWorker(t, bin, dsn)
	ref := fmt.Sprintf("pg-ref-%d", stamp)
	refRes := runAndWait(ctx, t, c, ref, RunInput{RunID: ref, Config: cfg})
	stopWorker(t, w, syscall.SIGTERM)

	// The worker reaches Postgres through a proxy of its Unix socket, or,
	// with WMRL_CHAOS_PG_CLUSTER=1 (make chaos-local), the whole cluster is
	// stopped and started again (pg_ctlcluster): every other client of the
	// cluster is cut off too, so that form never runs in make test.
	cut, restore := func() {}, func() error { return nil }
	if cluster := os.Getenv("WMRL_CHAOS_PG_CLUSTER") == "1"; cluster {
		version, name := pgCluster(t)
		cut = func() { pgctl(t, version, name, "stop") }
		restore = func() error { pgctl(t, version, name, "start"); return nil }
		startWorker(t, bin, dsn)
	} else {
		sockDir := t.TempDir()
		p, err := testenv.NewProxy("unix", filepath.Join(sockDir, ".s.PGSQL.5432"), "unix", "/var/run/postgresql/.s.PGSQL.5432")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		cut, restore = p.Stop, p.Start
		startWorker(t, bin, dsn+" host="+sockDir)
	}
	run := fmt.Sprintf("pg-outage-%d", stamp)
	res := runThroughOutage(ctx, t, c, st, cfg, run, "postgres", cut, restore)
	checkSameRun(ctx, t, st, cfg, ref, run, refRes, res)
}

func TestFaultDockerOutage(t *testing.T) {
	c, bin := faultSetup(t)
	p := testenv.NewTestDockerProxy(t) // skips without an engine
	st, dsn := testenv.FreshDB(t)
	cfg := outageConfig(t)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	host := "DOCKER_HOST=" + p.Host()

	w := startWorkerWith(t, bin, dsn, "docker", host)
	ref := fmt.Sprintf("docker-ref-%d", stamp)
	refRes := runAndWait(ctx, t, c, ref, RunInput{RunID: ref, Config: cfg})
	stopWorker(t, w, syscall.SIGTERM)

	startWorkerWith(t, bin, dsn, "docker", host)
	run := fmt.Sprintf("docker-outage-%d", stamp)
	res := runThroughOutage(ctx, t, c, st, cfg, run, "the docker engine", p.Stop, p.Start)
	checkSameRun(ctx, t, st, cfg, ref, run, refRes, res)
}

// pgCluster returns the version and name of the one local Postgres cluster
// (pg_lsclusters).
func pgCluster(t *testing.T) (string, string) {
	t.Helper()
	out, err := exec.Command("pg_lsclusters", "--no-header").Output()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 {
		t.Fatalf("pg_lsclusters: want one cluster, got %q", out)
	}
	f := strings.Fields(lines[0])
	if len(f) < 2 {
		t.Fatalf("pg_lsclusters: %q", out)
	}
	return f[0], f[1]
}

func pgctl(t *testing.T, version, name, action string) {
	t.Helper()
	if out, err := exec.Command("pg_ctlcluster", version, name, action).CombinedOutput(); err != nil {
		t.Fatalf("pg_ctlcluster %s %s %s: %v\n%s", version, name, action, err, out)
	}
}

// longOutageFor is how long TestFaultLongOutage holds each outage:
// WMRL_LONG_OUTAGE_SECONDS, default 150 (longer than the 2 minutes a local
// activity's retries were once bounded by).
func longOutageFor(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("WMRL_LONG_OUTAGE_SECONDS"); v != "" {
		var s float64
		if _, err := fmt.Sscan(v, &s); err != nil || s <= 0 {
			t.Fatalf("WMRL_LONG_OUTAGE_SECONDS=%q: want a positive number", v)
		}
		return time.Duration(s * float64(time.Second))
	}
	return 150 * time.Second
}

// mount runs mount(8) with args, skipping the test when it cannot (not
// root, no CAP_SYS_ADMIN), and unmounts target at cleanup.
func mount(t *testing.T, target string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the data directory's faults need root (mount)")
	}
	if out, err := exec.Command("mount", append(args, target)...).CombinedOutput(); err != nil {
		t.Skipf("mount %v %s: %v: %s", args, target, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", target).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", target, err, out)
		}
	})
}

// fill writes a file into dir until its file system is full (ENOSPC) and
// returns the function that removes it.
func fill(t *testing.T, dir string) func() error {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fill %s: %v, want ENOSPC", dir, err)
	}
	return func() error { return os.Remove(path) }
}

// localFailure returns the failure message of the first local activity
// marker in workflow id's history that contains want, or "".
func localFailure(ctx context.Context, c tclient.Client, id, want string) string {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return ""
		}
		if m := e.GetMarkerRecordedEventAttributes().GetFailure().GetMessage(); strings.Contains(m, want) {
			return m
		}
	}
	return ""
}

// pendingFailure returns the last failure of workflow id's pending
// activity of type name once it has been tried twice or more and that
// failure contains want, or "".
func pendingFailure(ctx context.Context, c tclient.Client, id, name, want string) string {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return ""
	}
	for _, p := range d.GetPendingActivities() {
		if m := p.GetLastFailure().GetMessage(); p.GetActivityType().GetName() == name && p.GetAttempt() >= 2 &&
			strings.Contains(m, want) {
			return m
		}
	}
	return ""
}

// waitGenerated waits until step s of run has programs: the step has
// started, the one before it is done, and no activity of step s has
// written to the data directory yet (CalibrateAndFuse is its first
// writer, after every group's executions).
func waitGenerated(ctx context.Context, t *testing.T, st *store.Store, run string, s int) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("step %d generated", s), func() bool {
		ts, err := st.StepTrajectories(ctx, run, s)
		return err == nil && len(ts) > 0
	})
}

// stillRunning fails the test with workflow id's error when it has ended
// (a step that failed in the outage: its run would wait for Postgres to
// record the failure).
func stillRunning(ctx context.Context, t *testing.T, c tclient.Client, id string) {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := d.GetWorkflowExecutionInfo().GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("%s ended during the outage (%v): %v", id, s, c.GetWorkflow(ctx, id, "").Get(ctx, nil))
	}
}

// TestFaultLongOutage holds a real wmrl-worker's Postgres and data
// directory unavailable for longOutageFor (default 150 s) twice in one run,
// once in a local activity and once in a regular one; the run must end
// with the uninterrupted run's final checkpoint and rows:
//
//   - step 1, CalibrateAndFuse (a local activity of the step workflow):
//     the data directory (a tmpfs) is filled once the step has programs;
//     its batch write fails with ENOSPC (the error naming the path and
//     "0 B free"), then Postgres is cut off too;
//   - step 2, Update (gpu queue): the run's checkpoint directory is
//     remounted read-only once the step has programs; its checkpoint
//     write fails with EROFS, then Postgres is cut off too.
//
// It needs root (mount) and runs with WMRL_FAULT_TEST=1; it takes about
// two outages and two runs (6 min with the default):
//
//	WMRL_FAULT_TEST=1 go test -run TestFaultLongOutage -v ./workflows
func TestFaultLongOutage(t *testing.T) {
	c, bin := faultSetup(t)
	d := longOutageFor(t)
	data := filepath.Join(bin.dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	mount(t, data, "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs")
	st, dsn := testenv.FreshDB(t)
	cfg := outageConfig(t)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute+3*d)
	defer cancel()

	w := startWorker(t, bin, dsn)
	ref := fmt.Sprintf("long-ref-%d", stamp)
	refRes := runAndWait(ctx, t, c, ref, RunInput{RunID: ref, Config: cfg})
	stopWorker(t, w, syscall.SIGTERM)

	sockDir := t.TempDir()
	p, err := testenv.NewProxy("unix", filepath.Join(sockDir, ".s.PGSQL.5432"), "unix", "/var/run/postgresql/.s.PGSQL.5432")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	startWorker(t, bin, dsn+" host="+sockDir)
	run := fmt.Sprintf("long-outage-%d", stamp)
	if _, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: run, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: run, Config: cfg}); err != nil {
		t.Fatal(err)
	}

	// outage holds the data directory's fault, begun at start, and once
	// seen fails the activity (seen returns its failure), Postgres too,
	// until d after start; then checks that the step still runs and
	// restores both.
	outage := func(what, step string, start time.Time, seen func() string, restore func() error) {
		t.Helper()
		msg := seen()
		for ; msg == ""; msg = seen() {
			stillRunning(ctx, t, c, step)
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(time.Second):
			}
		}
		t.Logf("%s after %v: %s", what, time.Since(start).Round(time.Second), msg)
		p.Stop()
		t.Logf("postgres cut off too")
		time.Sleep(time.Until(start.Add(d)))
		stillRunning(ctx, t, c, step)
		if err := restore(); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Logf("data directory and postgres back after %v", time.Since(start).Round(time.Second))
	}

	// 1. A local activity: step 1's CalibrateAndFuse on a full data
	// directory, then without Postgres.
	waitGenerated(ctx, t, st, run, 1)
	free := fill(t, data)
	start := time.Now()
	step1 := StepWorkflowID(run, 1)
	outage("CalibrateAndFuse failing on the full data directory", step1, start, func() string {
		if m := pendingFailure(ctx, c, step1, activities.NameUpdate, "no space left on device"); m != "" {
			t.Fatalf("step 1's CalibrateAndFuse ran before the data directory was full; Update failed: %s", m)
		}
		return localFailure(ctx, c, step1, "no space left on device (0 B free of 64.0 MiB on "+data+")")
	}, free)

	// 2. A regular activity: step 2's Update on a read-only checkpoint
	// directory, then without Postgres.
	waitGenerated(ctx, t, st, run, 2)
	cp, err := st.Checkpoint(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	cpDir := filepath.Dir(cp.Location)
	mount(t, cpDir, "--bind", cpDir)
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", cpDir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s read-only: %v: %s", cpDir, err, out)
	}
	start = time.Now()
	step2 := StepWorkflowID(run, 2)
	outage("Update failing on the read-only checkpoint directory", step2, start, func() string {
		return pendingFailure(ctx, c, step2, activities.NameUpdate, "read-only file system (")
	}, func() error {
		if out, err := exec.Command("mount", "-o", "remount,bind,rw", cpDir).CombinedOutput(); err != nil {
			return fmt.Errorf("remount %s read-write: %v: %s", cpDir, err, out)
		}
		return nil
	})

	var res RunResult
	if err := c.GetWorkflow(ctx, run, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("final checkpoint %d %s (uninterrupted: %d %s)", res.Checkpoint.Version, res.Checkpoint.Hash,
		refRes.Checkpoint.Version, refRes.Checkpoint.Hash)
	checkSameRun(ctx, t, st, cfg, ref, run, refRes, res)
}
