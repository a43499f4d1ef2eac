package workflows

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestFaultWorkerKilled is the fault test of issue 4: a wmrl-worker process
// (the real binary, process sandbox) is killed with SIGKILL in the middle of
// a step and restarted; the run completes, no row is duplicated, checkpoint
// versions are contiguous (no gradient applied twice), and the final
// checkpoint hash equals that of an uninterrupted run with the same seed.
// It needs a Temporal server ($TEMPORAL_ADDRESS) and takes a minute or two
// (the killed worker's activities time out before they are retried), so it
// runs only with WMRL_FAULT_TEST=1:
//
//	WMRL_FAULT_TEST=1 TEMPORAL_ADDRESS=127.0.0.1:7233 go test -run TestFaultWorkerKilled -v ./workflows
func TestFaultWorkerKilled(t *testing.T) {
	faultWorkerKilled(t, faultConfig(t, 2, 0), 1)
}

// TestFaultWorkerKilledPipeline is TestFaultWorkerKilled with the
// asynchronous pipeline (pipeline.max_off_policy 1, continue-as-new every
// 10 so that steps overlap): the worker is killed once step 2 is scored,
// while step 1 may still be fusing or updating; the run ends at the
// uninterrupted run's checkpoint.
//
//	WMRL_FAULT_TEST=1 TEMPORAL_ADDRESS=127.0.0.1:7233 go test -run TestFaultWorkerKilledPipeline -v ./workflows
func TestFaultWorkerKilledPipeline(t *testing.T) {
	faultWorkerKilled(t, faultConfig(t, 10, 1), 2)
}

// TestFaultWorkerKilledPipelineCarry is TestFaultWorkerKilledPipeline with
// continue-as-new every 2 steps (changePipelineCarry): the worker is killed
// once step 2 is scored, in the execution that carries step 1.
//
//	WMRL_FAULT_TEST=1 TEMPORAL_ADDRESS=127.0.0.1:7233 go test -run TestFaultWorkerKilledPipelineCarry -v ./workflows
func TestFaultWorkerKilledPipelineCarry(t *testing.T) {
	faultWorkerKilled(t, faultConfig(t, 2, 1), 2)
}

// faultConfig is the fault tests' run: the tiny preset in wmrl mode on the
// default suite, 4 steps, continue-as-new every k, held-out on one task, and
// pipeline.max_off_policy d.
func faultConfig(t *testing.T, k, d int) runconfig.Config {
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = suite.DefaultSeed
	cfg.Steps, cfg.ContinueAsNewEvery = 4, k
	cfg.Eval = runconfig.Eval{Every: 0, Samples: 2, Tasks: 1}
	cfg.Pipeline.MaxOffPolicy = d
	return cfg
}

// faultWorkerKilled runs cfg once uninterrupted and once with the worker
// killed (SIGKILL) once step at is generated and scored, then restarted,
// and checks both end at the same checkpoint with the same rows.
func faultWorkerKilled(t *testing.T, cfg runconfig.Config, at int) {
	t.Helper()
	c, bin := faultSetup(t)
	st, dsn := testenv.FreshDB(t)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	// The reference: an uninterrupted run.
	w := startWorker(t, bin, dsn)
	ref := fmt.Sprintf("fault-ref-%d", stamp)
	refRes := runAndWait(ctx, t, c, ref, RunInput{RunID: ref, Config: cfg})
	stopWorker(t, w, syscall.SIGTERM)

	// The same seed, with the worker killed once step 1's programs are
	// generated and scored, in the middle of the step's executions.
	w = startWorker(t, bin, dsn)
	run := fmt.Sprintf("fault-kill-%d", stamp)
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: run, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: run, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	waitScored(ctx, t, st, cfg, run, at)
	stopWorker(t, w, syscall.SIGKILL)
	t.Logf("worker killed during step %d", at)
	startWorker(t, bin, dsn)
	var res RunResult
	if err := c.GetWorkflow(ctx, run, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}

	t.Logf("uninterrupted %d %s, crashed %d %s", refRes.Checkpoint.Version, short(refRes.Checkpoint.Hash),
		res.Checkpoint.Version, short(res.Checkpoint.Hash))
	if res.Checkpoint != refRes.Checkpoint {
		t.Fatalf("final checkpoint after a crash %+v, uninterrupted %+v", res.Checkpoint, refRes.Checkpoint)
	}
	for _, id := range []string{ref, run} {
		n, err := st.Count(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Trajectories != cfg.Steps*cfg.Groups*cfg.Samples || n.Checkpoints != cfg.Steps+1 || n.Steps != cfg.Steps ||
			n.AnchorPairs != n.Executed {
			t.Fatalf("%s: counts %+v", id, n)
		}
		cps, err := st.Checkpoints(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for v, cp := range cps {
			if cp.Version != v {
				t.Fatalf("%s: checkpoint versions not contiguous: %+v", id, cps)
			}
		}
	}
	a, _ := st.Count(ctx, ref)
	b, _ := st.Count(ctx, run)
	if a != b {
		t.Fatalf("row counts differ: uninterrupted %+v, crashed %+v", a, b)
	}
}

// faultSetup begins a fault test: it skips unless WMRL_FAULT_TEST=1, runs
// in parallel with the other fault tests (TestMain lets up to
// faultParallel of them run at once), and returns a client of the test's
// own Temporal namespace and the worker binaries set to serve it. The
// fault tests' workers are real wmrl-worker processes that serve wmrl's
// standard queue names: a namespace per test keeps each test's tasks to
// its own workers, so one test's killed or cut-off worker never holds
// another test's work. Most of a fault test is waiting (an activity's
// heartbeat timeout, an outage's length), so they overlap well.
func faultSetup(t *testing.T) (client.Client, binaries) {
	t.Helper()
	if os.Getenv("WMRL_FAULT_TEST") != "1" {
		t.Skip("set WMRL_FAULT_TEST=1 (and start a Temporal server) to run the fault tests")
	}
	t.Parallel()
	ns := testNS() + "-" + strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	c, _ := testenv.Temporal(t, ns, SearchAttributes())
	return c, buildBinaries(t, ns)
}

// binaries is how a fault test starts its worker processes: the shared
// wmrl-worker and executor binaries, the test's directory (its workers'
// data directory and logs) and its Temporal namespace.
type binaries struct{ worker, executor, dir, ns string }

// shared holds the binaries every fault test runs, built once
// (sharedBinaries) and removed by TestMain.
var shared struct {
	once                  sync.Once
	dir, worker, executor string
	err                   error
}

// sharedBinaries builds wmrl-worker and the static executor
// (testenv.BuildExecutorIn) once per test binary, into a directory the
// process sandbox's unprivileged user can read.
func sharedBinaries() (string, string, error) {
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "wmrl-fault-bin-"); shared.err != nil {
			return
		}
		if shared.executor, shared.err = testenv.BuildExecutorIn(shared.dir); shared.err != nil {
			return
		}
		shared.worker = filepath.Join(shared.dir, "wmrl-worker")
		cmd := exec.Command("go", "build", "-o", shared.worker, "../worker")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			shared.err = fmt.Errorf("build ../worker: %v\n%s", err, out)
		}
	})
	return shared.worker, shared.executor, shared.err
}

// buildBinaries returns the shared binaries with a directory of the test's
// own that the process sandbox's unprivileged user can read, removed when
// the test ends, and the namespace ns.
func buildBinaries(t *testing.T, ns string) binaries {
	t.Helper()
	worker, executor, err := sharedBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "wmrl-fault-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return binaries{worker: worker, executor: executor, dir: dir, ns: ns}
}

func startWorker(t *testing.T, b binaries, dsn string) *exec.Cmd {
	t.Helper()
	return startWorkerWith(t, b, dsn, "process")
}

// startWorkerWith starts a worker with the given sandbox kind and extra
// environment ("KEY=value").
func startWorkerWith(t *testing.T, b binaries, dsn, sandbox string, env ...string) *exec.Cmd {
	t.Helper()
	data := filepath.Join(b.dir, "data")
	cmd := exec.Command(b.worker, "--address", deployenv.Read().Address, "--namespace", b.ns, "--database-url", dsn, "--data-dir", data,
		"--sandbox", sandbox, "--executor", b.executor, "--suite-seed", strconv.FormatUint(suite.DefaultSeed, 10))
	cmd.Env = append(os.Environ(), env...)
	log, err := os.Create(filepath.Join(b.dir, fmt.Sprintf("worker-%d.log", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			stopWorker(t, cmd, syscall.SIGTERM)
		}
		log.Close()
	})
	return cmd
}

func stopWorker(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	if cmd.ProcessState != nil {
		return
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

func runAndWait(ctx context.Context, t *testing.T, c client.Client, id string, in RunInput) RunResult {
	t.Helper()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl}, TrainingRun, in); err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
