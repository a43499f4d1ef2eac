package sandbox

import (
	"context"
	"time"

	"fmt"
	"github.com/docker/docker/client"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/tabular"
)

// Set up once for the package's tests.
var (
	fakeBinary string // testdata/fakeexec: misbehaves on demand
	realBinary string // the real wmrl-executor
	// dockerDown says why the Docker tests skip; empty when an engine answers.
	dockerDown string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wmrl-sandbox-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The process sandbox runs its child as an unprivileged user when the
	// tests run as root: it must be able to reach the binaries.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fakeBinary = filepath.Join(dir, "fakeexec")
	if err := buildStatic(fakeBinary, "./testdata/fakeexec"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	realBinary = filepath.Join(dir, "wmrl-executor")
	if err := buildStatic(realBinary, "../executor/wmrl-executor"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dockerDown = pingDocker()
	return m.Run()
}

// pingDocker returns why no Docker engine can be used, or "".
func pingDocker() string {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "no Docker client: " + err.Error()
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return "no Docker engine answers: " + err.Error()
	}
	return ""
}

// buildStatic builds the main package pkg into out as a static binary.
func buildStatic(out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// fakeJob is a small, valid job whose program tells fakeexec what to do.
func fakeJob(t *testing.T, mode string) []byte {
	t.Helper()
	x := mat.NewDense(4, 2, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	job := &executor.Job{
		TaskID:      "fake",
		Program:     "fake " + mode,
		Data:        &tabular.Dataset{Kind: tabular.Regression, XTrain: x, YTrain: []float64{1, 2, 3, 4}, XTest: x, YTest: []float64{1, 2, 3, 4}},
		Leaderboard: []float64{1},
		Seed:        1,
	}
	b, err := job.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
