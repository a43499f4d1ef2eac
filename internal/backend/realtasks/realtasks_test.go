package realtasks

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tasks"
)

// writeTask writes a valid task directory: train rows as CSV lines (after
// the header "id,<cols>,y"), two test rows.
func writeTask(t *testing.T, root, id, kind, labels string, cols []string, train []string) string {
	t.Helper()
	dir := filepath.Join(root, id)
	metric, dir2, testY := "rmse", "minimize", "0"
	if kind == "classification" {
		metric, dir2 = "accuracy", "maximize"
		testY = strings.Split(strings.Trim(labels, "[]"), ", ")[0]
	}
	spec := fmt.Sprintf("id: %s\ntitle: t\nkind: %s\nmetric: %s\ndirection: %s\ntime_limit: 1m\nmemory_limit: 1GiB\ncpus: 1\n"+
		"id_column: id\ntarget: y\nsource: the tests\n", id, kind, metric, dir2)
	if labels != "" {
		spec += "labels: " + labels + "\n"
	}
	var trainCSV strings.Builder
	trainCSV.WriteString("id," + strings.Join(cols, ",") + ",y\n")
	for i, r := range train {
		fmt.Fprintf(&trainCSV, "%d,%s\n", i, r)
	}
	n := len(train)
	blank := strings.Repeat(",1", len(cols))
	files := map[string]string{
		"task.yaml":                    spec,
		"description.md":               "Predict y of " + id + ".\n",
		"public/train.csv":             trainCSV.String(),
		"public/test.csv":              fmt.Sprintf("id,%s\n%d%s\n%d%s\n", strings.Join(cols, ","), n, blank, n+1, blank),
		"public/sample_submission.csv": fmt.Sprintf("id,y\n%d,%s\n%d,%s\n", n, testY, n+1, testY),
		"private/answers.csv":          fmt.Sprintf("id,y\n%d,%s\n%d,%s\n", n, testY, n+1, testY),
		"leaderboard.csv":              "solution,score\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newStore(t *testing.T, n int) tasks.Store {
	t.Helper()
	src := t.TempDir()
	s := tasks.Store{Dir: filepath.Join(t.TempDir(), "tasks")}
	for i := range n {
		dir := writeTask(t, src, fmt.Sprintf("task-%02d", i), "regression", "", []string{"a", "b"},
			[]string{"1,2,3", "2,1,5", "3,5,7.5", "4,3,9", "5,4,11"})
		if _, err := s.Import(dir, false); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestSplit: id order within a split, a quarter (rounded up) held out, the
// same answer from a second source, and Task agrees with Tasks.
func TestSplit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 14)
	src := &Source{Store: s}
	train, err := src.Tasks(ctx, 7, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	held, err := src.Tasks(ctx, 7, backend.HeldOut)
	if err != nil {
		t.Fatal(err)
	}
	if len(train) != 10 || len(held) != 4 {
		t.Fatalf("%d train and %d held-out tasks, want 10 and 4", len(train), len(held))
	}
	for _, ts := range [][]backend.Task{train, held} {
		if !slices.IsSortedFunc(ts, func(a, b backend.Task) int { return strings.Compare(a.ID, b.ID) }) {
			t.Errorf("not in id order: %v", ts)
		}
	}
	again, _ := (&Source{Store: s}).Tasks(ctx, 7, backend.HeldOut)
	for i := range held {
		if again[i].ID != held[i].ID {
			t.Fatalf("held-out split differs between sources: %s vs %s", again[i].ID, held[i].ID)
		}
	}
	for _, want := range append(slices.Clone(train), held...) {
		got, err := src.Task(ctx, 7, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Split != want.Split || got.Suite != 7 || got.Prompt != "Predict y of "+want.ID+".\n" ||
			len(got.Features) != suite.VectorLen || !slices.Equal(got.Features, want.Features) {
			t.Errorf("Task(%s) = %+v, want %+v", want.ID, got, want)
		}
	}
	if _, err := src.Task(ctx, 7, "nope"); !backend.IsPermanent(err) {
		t.Errorf("unknown id: %v, want a permanent error", err)
	}
	if _, err := (&Source{Store: tasks.Store{Dir: t.TempDir()}}).Tasks(ctx, 7, backend.Train); !backend.IsPermanent(err) {
		t.Errorf("empty store: %v, want a permanent error", err)
	}
	one, _ := (&Source{Store: newStore(t, 1)}).Tasks(ctx, 7, backend.Train)
	if len(one) != 1 {
		t.Errorf("a single task: %d train tasks, want 1", len(one))
	}
}

// TestCard: the card's quantities from train.csv: kind, rows, features,
// the positive share of a binary task (labels[1]), the majority rule of a
// multiclass one, a categorical column coded by rank, a missing cell by the
// median.
func TestCard(t *testing.T) {
	src := t.TempDir()
	binary := writeTask(t, src, "bin", "classification", "[no, yes]", []string{"x", "c"},
		[]string{"1,a,yes", "2,b,no", "3,a,yes", "4,b,yes"})
	multi := writeTask(t, src, "multi", "classification", "[r, g, b]", []string{"x"},
		[]string{"1,g", "2,g", "3,r", "4,b", "5,g", "6,r"})
	reg := writeTask(t, src, "reg", "regression", "", []string{"x", "z"},
		[]string{"1,,2", "2,10,4", "3,30,6.5"})
	load := func(dir string) *tasks.Task {
		tk, err := tasks.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	c, err := Card(load(binary))
	if err != nil {
		t.Fatal(err)
	}
	v := c.Vector()
	near("binary kind", v[0], 1)
	near("binary positive share", v[4], 0.75)
	near("binary rows", v[1], math.Log10(4)/4)
	near("binary features", v[2], math.Log2(2)/6)
	d, _ := Dataset(load(binary))
	if got := []float64{d.XTrain.At(0, 1), d.XTrain.At(1, 1)}; !slices.Equal(got, []float64{0, 1}) {
		t.Errorf("categorical column coded %v, want ranks [0 1]", got)
	}
	if c.TestRows != 2 || c.Metric != "accuracy" {
		t.Errorf("test rows %d metric %q", c.TestRows, c.Metric)
	}

	c, err = Card(load(multi))
	if err != nil {
		t.Fatal(err)
	}
	near("multiclass positive share (not the majority g)", c.Vector()[4], 0.5)

	d, err = Dataset(load(reg))
	if err != nil {
		t.Fatal(err)
	}
	if d.XTrain.At(0, 1) != 20 || d.YTrain[2] != 6.5 {
		t.Errorf("missing cell %v (want the median 20), target %v", d.XTrain.At(0, 1), d.YTrain)
	}
	c, _ = Card(load(reg))
	near("regression kind", c.Vector()[0], 0)
	if len(c.Vector()) != suite.VectorLen {
		t.Errorf("vector length %d, want %d", len(c.Vector()), suite.VectorLen)
	}
}

// TestDescribeData: a real task's public files with their CSV columns and
// row counts; private/ is never listed; an unknown id is permanent.
func TestDescribeData(t *testing.T) {
	s := &Source{Store: newStore(t, 1)}
	got, err := s.DescribeData(t.Context(), 0, "task-00")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Task task-00: regression, metric rmse (minimize), id column id, target y.",
		"train.csv (", "5 rows, columns: [id a b y]", "test.csv (", "2 rows, columns: [id a b]",
		"sample_submission.csv (", "2 rows, columns: [id y]"} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "answers") || strings.Contains(got, "private") {
		t.Errorf("description shows private files:\n%s", got)
	}
	if _, err := s.DescribeData(t.Context(), 0, "nope"); !backend.IsPermanent(err) {
		t.Errorf("unknown task: %v", err)
	}
}
