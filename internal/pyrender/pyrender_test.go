package pyrender

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/tasks"
)

// python is Debian's interpreter, which has Debian's scikit-learn
// (deploy/pytasks.sh install).
const python = "/usr/bin/python3"

func needSklearn(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import sklearn, pandas").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s has no scikit-learn (deploy/pytasks.sh install): %v", python, err)
		}
		t.Skipf("%s has no scikit-learn (run deploy/pytasks.sh install): %v", python, err)
	}
}

// writeTask writes a synthetic task of 160 train and 60 test rows: three
// numeric features (one with missing values) and a categorical one.
func writeTask(t *testing.T, kind, metric string, labels []string) *tasks.Task {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "task")
	rng := rand.New(rand.NewPCG(1, 2))
	var train, test, answers, sample strings.Builder
	fmt.Fprintln(&train, "id,x1,x2,x3,colour,y")
	fmt.Fprintln(&test, "id,x1,x2,x3,colour")
	fmt.Fprintln(&answers, "id,y")
	fmt.Fprintln(&sample, "id,y")
	colours := []string{"red", "green", "blue"}
	for i := range 220 {
		x1, x2, x3 := rng.NormFloat64(), rng.NormFloat64()*3, rng.Float64()
		c := rng.IntN(3)
		v := 2*x1 - x2/3 + float64(c) + 0.3*rng.NormFloat64()
		var y string
		switch {
		case kind == "regression":
			y = fmt.Sprintf("%.4f", v)
		case len(labels) == 2:
			y = labels[0]
			if v > 0.8 {
				y = labels[1]
			}
		default:
			y = labels[min(2, max(0, int(math.Floor(v/2+1))))]
		}
		x3s := fmt.Sprintf("%.4f", x3)
		if i%17 == 0 {
			x3s = ""
		}
		row := fmt.Sprintf("%d,%.4f,%.4f,%s,%s", i, x1, x2, x3s, colours[c])
		if i < 160 {
			fmt.Fprintf(&train, "%s,%s\n", row, y)
			continue
		}
		fmt.Fprintln(&test, row)
		fmt.Fprintf(&answers, "%d,%s\n", i, y)
		if metric == "roc_auc" || metric == "log_loss" || kind == "regression" {
			fmt.Fprintf(&sample, "%d,0.5\n", i)
		} else {
			fmt.Fprintf(&sample, "%d,%s\n", i, labels[0])
		}
	}
	direction := "maximize"
	if metric == "rmse" || metric == "log_loss" || metric == "mae" {
		direction = "minimize"
	}
	spec := fmt.Sprintf("id: synth\ntitle: Synthetic\nkind: %s\nmetric: %s\ndirection: %s\ntime_limit: 1m\n"+
		"memory_limit: 1GiB\ncpus: 1\nid_column: id\ntarget: y\nsource: written by the test\nseed: 1\n", kind, metric, direction)
	if len(labels) > 0 {
		spec += "labels: [" + strings.Join(labels, ", ") + "]\n"
	}
	for name, text := range map[string]string{"task.yaml": spec, "description.md": "# Synthetic\n",
		"leaderboard.csv": "solution,score\n", "public/train.csv": train.String(), "public/test.csv": test.String(),
		"public/sample_submission.csv": sample.String(), "private/answers.csv": answers.String()} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	task, err := tasks.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// run renders text, runs it on task as the sandbox would (data and work
// directories apart, task.json beside public/) and returns the graded
// score, or the script's failure.
func run(t *testing.T, task *tasks.Task, text string) (float64, error) {
	t.Helper()
	p, err := program.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	script, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	spec, err := json.Marshal(task.Spec)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "task.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(task.Path("public"), filepath.Join(data, "public")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "solution.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "solution.py")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "WMRL_DATA="+data, "WMRL_WORK="+work, "OMP_NUM_THREADS=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	sub, err := os.ReadFile(filepath.Join(work, "submission.csv"))
	if err != nil {
		return 0, err
	}
	score, err := task.Grade(sub)
	if err != nil {
		t.Fatalf("%s: submission refused: %v", text, err)
	}
	return score, nil
}

// Every step and model renders to a script that runs on real CSV data
// (missing values, a categorical column) and writes a submission the grader
// accepts; models that fit the data beat the constant one; a model of the
// wrong kind fails as the engine's does.
func TestRenderedScriptsRun(t *testing.T) {
	needSklearn(t)
	kinds := []struct {
		name, kind, metric string
		labels             []string
		better             func(a, b float64) bool
	}{
		{"regression", "regression", "r2", nil, func(a, b float64) bool { return a > b }},
		{"binary", "classification", "roc_auc", []string{"no", "yes"}, func(a, b float64) bool { return a > b }},
		{"multiclass", "classification", "accuracy", []string{"low", "mid", "high"}, func(a, b float64) bool { return a > b }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			task := writeTask(t, k.kind, k.metric, k.labels)
			base, err := run(t, task, "mean")
			if err != nil {
				t.Fatal(err)
			}
			linear := "ridge alpha=1"
			if k.kind == "classification" {
				linear = "logistic alpha=1 iters=50"
			}
			for _, prog := range []string{
				"standardize | clip z=3 | poly degree=2 | select k=4 | " + linear,
				"log1p | pca k=3 | knn k=5",
				"gbt trees=50 depth=3 lr=0.1",
				"standardize | rff features=64 gamma=1 alpha=1",
				// k beyond the width and the rows is capped: a constant
				// prediction, as the mean's.
				"standardize | pca k=50 | select k=100 | knn k=500",
			} {
				score, err := run(t, task, prog)
				if err != nil {
					t.Errorf("%s: %v", prog, err)
					continue
				}
				t.Logf("%s: %s = %.4f (mean %.4f)", k.name, prog, score, base)
				if !strings.Contains(prog, "knn k=500") && !k.better(score, base) {
					t.Errorf("%s: %s scores %.4f, no better than the constant model's %.4f", k.name, prog, score, base)
				}
			}
			wrong := "logistic alpha=1 iters=50"
			if k.kind == "classification" {
				wrong = "ridge alpha=1"
			}
			if _, err := run(t, task, wrong); err == nil || !strings.Contains(err.Error(), "model and this is a") {
				t.Errorf("%s on a %s task: %v, want the script to fail", wrong, k.kind, err)
			}
		})
	}
}

// The same program renders to the same script, which names the program.
func TestRenderIsStable(t *testing.T) {
	p, err := program.Parse("standardize | gbt trees=100 depth=3 lr=0.1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Render(p)
	if a != b || !strings.Contains(a, "#   "+p.Normalize().String()+"\n") ||
		!strings.Contains(a, "GradientBoostingClassifier(n_estimators=100, max_depth=3, learning_rate=0.1, random_state=0)") {
		t.Errorf("render:\n%s", a)
	}
	if _, err := Render(program.Program{Model: program.Op{Name: "svm"}}); err == nil {
		t.Error("an invalid program rendered")
	}
}
