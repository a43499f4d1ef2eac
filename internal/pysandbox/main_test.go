package pysandbox

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/tasks"
)

// ImageEnv names the environment variable that may say which wmrl-python
// image the tests run; otherwise they take the newest one.
const ImageEnv = "WMRL_PYTHON_IMAGE"

// Set up once: the image the tests run, or why they skip.
var (
	testImage string
	noDocker  string
)

func TestMain(m *testing.M) {
	testImage, noDocker = findImage()
	os.Exit(m.Run())
}

func findImage() (string, string) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", "no Docker client: " + err.Error()
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return "", "no Docker engine answers: " + err.Error()
	}
	if im := os.Getenv(ImageEnv); im != "" {
		return im, ""
	}
	im, err := LatestImage(ctx, cli)
	if err != nil {
		return "", err.Error() + " (or name one in $" + ImageEnv + ")"
	}
	return im, ""
}

// testEnv is a sandbox with its own staging directory and a task store
// holding two synthetic tasks.
type testEnv struct {
	sb      *Sandbox
	staging string
	store   tasks.Store
	a, b    *tasks.Task
}

func newTestEnv(t testing.TB, opts Options) *testEnv {
	t.Helper()
	if noDocker != "" {
		// CI builds the image (.ci/run: deploy/pyimage.sh): there a
		// missing engine or image is a failure, not a reason to skip.
		if os.Getenv("CI") != "" {
			t.Fatal(noDocker)
		}
		t.Skip(noDocker)
	}
	dir := t.TempDir()
	opts.Image = testImage
	opts.StagingDir = filepath.Join(dir, "staging")
	if err := os.Mkdir(opts.StagingDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	e := &testEnv{sb: sb, staging: opts.StagingDir, store: tasks.Store{Dir: filepath.Join(dir, "store")}}
	e.a = e.importTask(t, filepath.Join(dir, "src"), "synth-a", 1)
	e.b = e.importTask(t, filepath.Join(dir, "src"), "synth-b", 2)
	return e
}

// importTask writes a synthetic binary task (accuracy, labels no/yes:
// the label is yes when a noisy linear score of x1..x4 is positive) and
// imports it. Logistic regression gets about 0.9.
func (e *testEnv) importTask(t testing.TB, base, id string, seed uint64) *tasks.Task {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	const nTrain, nTest = 240, 120
	var train, test, sample, answers strings.Builder
	train.WriteString("id,x1,x2,x3,x4,label\n")
	test.WriteString("id,x1,x2,x3,x4\n")
	sample.WriteString("id,label\n")
	answers.WriteString("id,label\n")
	for i := range nTrain + nTest {
		x := [4]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		label := "no"
		if x[0]+0.8*x[1]-0.6*x[2]+0.4*rng.NormFloat64() > 0 {
			label = "yes"
		}
		row := fmt.Sprintf("%d,%.4f,%.4f,%.4f,%.4f", i, x[0], x[1], x[2], x[3])
		if i < nTrain {
			fmt.Fprintf(&train, "%s,%s\n", row, label)
			continue
		}
		fmt.Fprintf(&test, "%s\n", row)
		fmt.Fprintf(&sample, "%d,no\n", i)
		fmt.Fprintf(&answers, "%d,%s\n", i, label)
	}
	files := map[string]string{
		tasks.FileSpec: "id: " + id + `
title: Synthetic binary task
kind: classification
metric: accuracy
direction: maximize
time_limit: 1m
memory_limit: 512MiB
cpus: 1
id_column: id
target: label
labels: [no, yes]
source: written by the pysandbox tests
seed: ` + fmt.Sprint(seed) + "\n",
		tasks.FileDescription:      "# Synthetic\n\nPredict label (no or yes) from x1..x4; metric accuracy.\n",
		tasks.FileLeaderboard:      "solution,score\nforest,0.98\nlogistic,0.9\nknn,0.8\nprior,0.5\n",
		tasks.FileTrain:            train.String(),
		tasks.FileTest:             test.String(),
		tasks.FileSampleSubmission: sample.String(),
		tasks.FileAnswers:          answers.String(),
	}
	dir := filepath.Join(base, id)
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	imp, err := e.store.Import(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return imp.Task
}

// finishDeadline is the deadline of a solution that must finish: how long
// it takes is not what the test checks, and a machine shared with other
// work must meet it (a valid solution was killed at a deadline of 30 s,
// two cores shared with three other engineers' builds and tests).
const finishDeadline = 5 * time.Minute

// testLimits are small limits for the tests.
func testLimits(deadline time.Duration) backend.Limits {
	return backend.Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 64, Deadline: deadline}
}

// grade grades source on task a and checks that nothing is left behind.
func (e *testEnv) grade(t *testing.T, source string, deadline time.Duration) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline+time.Minute)
	defer cancel()
	r, err := e.sb.Grade(ctx, e.a, source, testLimits(deadline), 1)
	if err != nil {
		t.Fatalf("grade: %v", err)
	}
	e.checkClean(t, r.Run.Container)
	return r
}

// checkClean checks that an execution left nothing behind: no container
// of the sandbox, no host process in the container's cgroup, nothing in
// the staging directory, and the task store intact.
func (e *testEnv) checkClean(t *testing.T, id string) {
	t.Helper()
	list, err := e.sb.Client().ContainerList(context.Background(), container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelOwner+"="+e.sb.Owner())),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		t.Errorf("container %.12s (%s) left behind", c.ID, c.State)
	}
	if id != "" {
		if pids := processesOf(t, id); len(pids) > 0 {
			t.Errorf("processes %v of container %.12s left behind", pids, id)
		}
	}
	entries, err := os.ReadDir(e.staging)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		t.Errorf("staging file %s left behind", en.Name())
	}
	for _, task := range []*tasks.Task{e.a, e.b} {
		got, err := e.store.Get(task.Spec.ID)
		if err != nil || got.Hash != task.Hash {
			t.Errorf("task store damaged: %s: %v", task.Spec.ID, err)
		}
	}
}

// processesOf lists the host processes whose cgroup names container id.
func processesOf(t *testing.T, id string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), id) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// near reports whether a and b agree to 1e-9.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
