package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/realtasks"
	"github.com/wmrl/wmrl/internal/pyrender"
	"github.com/wmrl/wmrl/internal/pysandbox"
	"github.com/wmrl/wmrl/internal/runconfig"
	storepkg "github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tasks"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// pythonImage returns the wmrl-python image the Python loop test runs
// ($WMRL_PYTHON_IMAGE, else the newest the engine has), or skips without
// an engine or an image; in CI with $WMRL_PYTHON_IMAGE set it fails
// instead.
func pythonImage(t *testing.T) string {
	t.Helper()
	skip := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" && os.Getenv("WMRL_PYTHON_IMAGE") != "" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		skip("no Docker client: " + err.Error())
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		skip("no Docker engine answers: " + err.Error())
	}
	if im := os.Getenv("WMRL_PYTHON_IMAGE"); im != "" {
		return im
	}
	im, err := pysandbox.LatestImage(ctx, cli)
	if err != nil {
		skip(err.Error())
	}
	return im
}

// TestPythonDemoLoop runs a small python-demo (tasks: store, sandbox.kind
// python, the built-in policy) through Temporal with workers in this
// process: real tasks prepared by deploy/pytasks/prepare.py, a leaderboard
// from part of the reference panel, imported into the data directory's
// store; the policy's programs rendered as scikit-learn scripts and run in
// the Python sandbox. The run completes with a held-out score on the
// store's held-out task, and its executions really ran Python, 3 turns per
// trajectory, each observing the sandbox's feedback.
func TestPythonDemoLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python executions for minutes; not with -short")
	}
	image := pythonImage(t)
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-I", "-c", "import sklearn, statsmodels.api, pandas").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" && os.Getenv("WMRL_PYTHON_IMAGE") != "" {
			t.Fatalf("preparing real tasks needs %s with scikit-learn, statsmodels and pandas: %s", py, out)
		}
		t.Skipf("preparing real tasks needs %s with scikit-learn, statsmodels and pandas (deploy/pytasks.sh install): %s",
			py, bytes.TrimSpace(out))
	}
	ctx := t.Context()
	prepared := filepath.Join(t.TempDir(), "tasks")
	ids := []string{"cancer-counts", "engel-food", "grunfeld-invest", "iris-species"}
	cmd := exec.Command(py, "-I", "-B", filepath.Join("..", "deploy", "pytasks", "prepare.py"), "--seed", "20260101",
		"--out", prepared, "--only", strings.Join(ids, ","))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prepare.py: %v\n%s", err, b)
	}
	sb, err := pysandbox.New(ctx, pysandbox.Options{Image: image, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	panel, err := pysandbox.LoadPanel(filepath.Join("..", "deploy", "pytasks", "panel"))
	if err != nil {
		t.Fatal(err)
	}
	// The cheap part of the panel, to keep the test short.
	panel = slices.DeleteFunc(panel, func(p pysandbox.PanelSolution) bool {
		return !slices.Contains([]string{"constant", "majority", "linear", "knn-5", "tree-4"}, p.Name)
	})
	dataDir := t.TempDir()
	store := tasks.Store{Dir: tasks.StoreDir(dataDir)}
	for _, id := range ids {
		dir := filepath.Join(prepared, id)
		task, err := tasks.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		board, _, err := sb.RunPanel(ctx, task, panel, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(board) < 2 {
			t.Fatalf("%s: leaderboard %v", id, board)
		}
		if err := pysandbox.WriteLeaderboard(dir, board); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Import(dir, false); err != nil {
			t.Fatal(err)
		}
	}
	held, err := (&realtasks.Source{Store: store}).Tasks(ctx, 0, backend.HeldOut)
	if err != nil || len(held) != 1 {
		t.Fatalf("held-out tasks %v: %v", held, err)
	}

	ns := uniqueName("wmrl-pyloop")
	e := stack(t, ns, func(a *activities.Activities) {
		g := &pysandbox.Grader{Sandbox: sb, Tasks: store}
		a.DataDir = dataDir
		a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindGrader, Name: backend.Python, Adapter: g},
			backend.Entry{Kind: backend.KindProgramGrader, Name: backend.Python, Adapter: &pyrender.Grader{Python: g}},
			backend.Entry{Kind: backend.KindTasks, Name: backend.TaskStore, Adapter: &realtasks.Source{Store: store}})
	})
	name := e.runName(t, "pyloop")
	small := writeFile(t, "small.yaml", "steps: 2\ngroups: 3\nsamples: 2\nanchors:\n  fraction: 0.34\n  min: 1\n"+
		"eval:\n  samples: 2\ncontinue_as_new_every: 1\n")
	out, err := e.wmrl(t, "run", "--preset", "python-demo", "--config", small, "--name", name, "--poll", "200ms")
	t.Logf("wmrl run --preset python-demo:\n%s", out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	s := e.status(t, name)
	if s.State != "completed" || s.Step != 2 || s.HeldOut == nil || s.HeldOut.Tasks != 1 {
		t.Fatalf("status %+v", s)
	}
	var in inspectReport
	e.wmrlJSON(t, &in, "inspect", name, "--step", "1")
	ran, turned := 0, 0
	for _, tr := range in.Trajectories {
		// The preset's 3 turns: an executed trajectory's turns are real
		// executions whose observation is the sandbox's own feedback.
		if tr.Real != nil {
			if len(tr.Turns) != 3 {
				t.Errorf("executed trajectory with %d turns, want 3: %+v", len(tr.Turns), tr)
			}
			for _, tu := range tr.Turns {
				if tu.Source != storepkg.SourceReal || !strings.Contains(tu.Observation, "=== Execution result ===") {
					t.Errorf("turn %d: %+v", tu.Turn, tu)
				}
				// The sandbox's feedback, not the ladder's description:
				// its paper status line (valid:, runtime_err:, ...).
				if strings.Contains(tu.Observation, "\nvalid: ") || strings.Contains(tu.Observation, "_err: ") ||
					strings.Contains(tu.Observation, "ran_no_sub: ") || strings.Contains(tu.Observation, "invalid_program: ") {
					turned++
				}
				t.Logf("turn %d (%s %v):\n%s", tu.Turn, tu.Status, tu.Reward, tu.Observation)
			}
		}
		if !slices.Contains(ids, tr.TaskID) {
			t.Errorf("trajectory of task %q, not a store task", tr.TaskID)
		}
		if tr.Real != nil {
			ran++
			if tr.Status == "" {
				t.Errorf("executed trajectory without a status: %+v", tr)
			}
			t.Logf("task %s program %q: %s %v", tr.TaskID, tr.Program, tr.Status, *tr.Real)
		}
	}
	if ran == 0 {
		t.Errorf("step 1: no executed trajectory: %+v", in.Trajectories)
	}
	if turned != 3*ran {
		t.Errorf("%d of %d real turns observed the sandbox's feedback", turned, 3*ran)
	}
	initial, final := heldOutAgainstInitial(t, e.acts, name)
	t.Logf("held-out score of %s: initial policy %.4f (%d tasks, %d samples), after %d steps %.4f (%d tasks, %d samples)",
		name, initial.Score, initial.Tasks, initial.Samples, s.Step, final.Score, final.Tasks, final.Samples)
	if initial.Tasks != 1 || initial.Samples != 2 || final.Tasks != 1 {
		t.Errorf("initial %+v, final %+v", initial, final)
	}
}

// heldOutAgainstInitial evaluates checkpoint 0 (the initial policy) of a
// completed run as the run evaluates its last checkpoint (the same
// held-out tasks, samples, seed and limits, through the Evaluate activity
// of acts, stored as the evaluations of step 0), and returns its held-out
// score and the last checkpoint's.
func heldOutAgainstInitial(t *testing.T, acts *activities.Activities, run string) (initial, final activities.HeldOutScoreResponse) {
	t.Helper()
	ctx := t.Context()
	r, err := acts.Store.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var cfg runconfig.Config
	if err := json.Unmarshal(r.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	ck, err := acts.Store.Checkpoint(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	held, err := acts.HeldOutTasks(ctx, activities.HeldOutTasksRequest{RunID: run, SuiteSeed: cfg.SuiteSeed, Limit: cfg.Eval.Tasks})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range held.TaskIDs {
		_, err := acts.Evaluate(ctx, activities.EvaluateRequest{RunID: run, Checkpoint: activities.CheckpointRef{Version: 0, Hash: ck.Hash},
			TaskID: id, Samples: cfg.Eval.Samples, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed, Limits: cfg.Sandbox.Limits(),
			Budget: cfg.Sandbox.Budget})
		if err != nil {
			t.Fatal(err)
		}
	}
	if initial, err = acts.HeldOutScore(ctx, activities.HeldOutScoreRequest{RunID: run, Version: 0}); err != nil {
		t.Fatal(err)
	}
	if final, err = acts.HeldOutScore(ctx, activities.HeldOutScoreRequest{RunID: run, Version: cfg.Steps}); err != nil {
		t.Fatal(err)
	}
	return initial, final
}

// TestPythonDemoInitialScore measures, for a python-demo run made with
// wmrl run against a real worker, the held-out score of its initial
// policy against its last checkpoint's (heldOutAgainstInitial). It runs
// only when asked: WMRL_PYLOOP_RUN names the run, WMRL_DATABASE_URL its
// database and WMRL_DATA_DIR the worker's data directory (checkpoints and
// task store); the Python image as for TestPythonDemoLoop.
func TestPythonDemoInitialScore(t *testing.T) {
	run, dsn, dataDir := os.Getenv("WMRL_PYLOOP_RUN"), os.Getenv("WMRL_DATABASE_URL"), os.Getenv("WMRL_DATA_DIR")
	if run == "" || dsn == "" || dataDir == "" {
		t.Skip("set WMRL_PYLOOP_RUN, WMRL_DATABASE_URL and WMRL_DATA_DIR to measure a python-demo run's initial policy")
	}
	image := pythonImage(t)
	ctx := t.Context()
	st, err := storepkg.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sb, err := pysandbox.New(ctx, pysandbox.Options{Image: image, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	b := builtin.New(&builtin.SuiteCache{Load: suite.Load}, wm, nil)
	ts := tasks.Store{Dir: tasks.StoreDir(dataDir)}
	g := &pysandbox.Grader{Sandbox: sb, Tasks: ts}
	acts := &activities.Activities{Store: st, Tasks: b.Tasks, Policy: b.Policy, WorldModel: b.WorldModel, DataDir: dataDir,
		Backends: backend.MustRegistry(backend.Entry{Kind: backend.KindGrader, Name: backend.Python, Adapter: g},
			backend.Entry{Kind: backend.KindProgramGrader, Name: backend.Python, Adapter: &pyrender.Grader{Python: g}},
			backend.Entry{Kind: backend.KindTasks, Name: backend.TaskStore, Adapter: &realtasks.Source{Store: ts}})}
	initial, final := heldOutAgainstInitial(t, acts, run)
	t.Logf("held-out score of %s: initial policy %.4f (%d tasks, %d samples); last checkpoint %.4f (%d tasks, %d samples)",
		run, initial.Score, initial.Tasks, initial.Samples, final.Score, final.Tasks, final.Samples)
}
