package tasks

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// python is Debian's Python, which deploy/pytasks.sh runs prepare.py with.
const python = "/usr/bin/python3"

var prepareScript = filepath.Join("..", "..", "deploy", "pytasks", "prepare.py")

// needPrepare skips the test unless Debian's Python has scikit-learn,
// statsmodels and pandas (deploy/pytasks.sh install), and fails under CI,
// which installs them.
func needPrepare(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-I", "-c", "import sklearn, statsmodels.api, pandas").CombinedOutput()
	if err == nil {
		return
	}
	msg := "needs " + python + " with scikit-learn, statsmodels and pandas (deploy/pytasks.sh install): " + string(bytes.TrimSpace(out))
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func prepare(t *testing.T, seed string, args ...string) string {
	t.Helper()
	return startPrepare(t, seed, args...)()
}

// startPrepare starts prepare.py; the function it returns waits for it and
// gives its output directory.
func startPrepare(t *testing.T, seed string, args ...string) func() string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tasks")
	cmd := exec.Command(python, append([]string{"-I", "-B", prepareScript, "--seed", seed, "--out", out}, args...)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("prepare.py: %v", err)
	}
	return func() string {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("prepare.py --seed %s: %v\n%s", seed, err, log.Bytes())
		}
		return out
	}
}

// readTree reads every file under dir, by path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestPrepare: prepare.py writes at least 12 valid tasks of both kinds and
// several metrics, byte-identical for the same seed; another seed splits
// differently.
func TestPrepare(t *testing.T) {
	needPrepare(t)
	// Two runs at once: the machine's cores are used, and neither sees the
	// other's files.
	waitA, waitB := startPrepare(t, "7"), startPrepare(t, "7")
	a, b := waitA(), waitB()
	fa, fb := readTree(t, a), readTree(t, b)
	if len(fa) != len(fb) {
		t.Fatalf("%d files, then %d", len(fa), len(fb))
	}
	for p, x := range fa {
		if !bytes.Equal(x, fb[p]) {
			t.Errorf("%s differs between two runs with seed 7", p)
		}
	}
	entries, err := os.ReadDir(a)
	if err != nil {
		t.Fatal(err)
	}
	kinds, metrics := map[Kind]int{}, map[Metric]int{}
	for _, e := range entries {
		task, err := Load(filepath.Join(a, e.Name()))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if task.Spec.ID != e.Name() || task.Spec.Seed == nil || *task.Spec.Seed != 7 || task.TestRows < 30 {
			t.Errorf("%s: id %s, seed %v, %d test rows", e.Name(), task.Spec.ID, task.Spec.Seed, task.TestRows)
		}
		kinds[task.Spec.Kind]++
		metrics[task.Spec.Metric]++
	}
	if len(entries) < 12 || kinds[Classification] < 4 || kinds[Regression] < 4 || len(metrics) < 5 {
		t.Errorf("%d tasks, kinds %v, metrics %v; want at least 12, both kinds, 5 metrics", len(entries), kinds, metrics)
	}
	// Another seed: another split (a task's split depends on the seed and
	// its id only, so --only gives the same files as the full run).
	c := prepare(t, "8", "--only", "iris-species,engel-food")
	fc := readTree(t, c)
	if len(fc) != 2*7 {
		t.Fatalf("--only: %d files, want 14", len(fc))
	}
	for _, p := range []string{"iris-species/private/answers.csv", "engel-food/public/train.csv"} {
		if bytes.Equal(fa[p], fc[p]) {
			t.Errorf("%s: the same for seeds 7 and 8", p)
		}
	}
	d := prepare(t, "7", "--only", "engel-food")
	for p, x := range readTree(t, d) {
		if !bytes.Equal(x, fa[p]) {
			t.Errorf("%s: --only differs from the full run", p)
		}
	}
}
