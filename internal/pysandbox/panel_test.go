package pysandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/tasks"
)

var panelDir = filepath.Join("..", "..", "deploy", "pytasks", "panel")

// TestPanelFiles: the panel has a dozen solutions or more, each named by a
// first line "# <name>: ...", and all share one common block.
func TestPanelFiles(t *testing.T) {
	panel, err := LoadPanel(panelDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(panel) < 12 {
		t.Errorf("%d panel solutions, want at least 12", len(panel))
	}
	common := func(src string) string {
		_, rest, ok1 := strings.Cut(src, "# --- common:")
		block, _, ok2 := strings.Cut(rest, "# --- end common ---")
		if !ok1 || !ok2 {
			return ""
		}
		return block
	}
	want := common(panel[0].Source)
	for _, p := range panel {
		if !strings.HasPrefix(p.Source, "# "+p.Name+": ") {
			t.Errorf("%s: first line %q, want # %s: ...", p.Name, strings.SplitN(p.Source, "\n", 2)[0], p.Name)
		}
		if got := common(p.Source); got == "" || got != want {
			t.Errorf("%s: its common block differs from %s's", p.Name, panel[0].Name)
		}
	}
}

// prepareReal prepares real tasks (ids; "" for all) with deploy/pytasks/prepare.py, or skips
// when the host's Python lacks what it needs (deploy/pytasks.sh install).
func prepareReal(t *testing.T, ids ...string) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-I", "-c", "import sklearn, statsmodels.api, pandas").CombinedOutput(); err != nil {
		t.Skipf("preparing real tasks needs %s with scikit-learn, statsmodels and pandas (deploy/pytasks.sh install): %s",
			py, bytes.TrimSpace(out))
	}
	out := filepath.Join(t.TempDir(), "tasks")
	script := filepath.Join("..", "..", "deploy", "pytasks", "prepare.py")
	args := []string{"-I", "-B", script, "--seed", "20260101", "--out", out}
	if only := strings.Join(ids, ","); only != "" {
		args = append(args, "--only", only)
	}
	cmd := exec.Command(py, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prepare.py: %v\n%s", err, b)
	}
	return out
}

// TestPanelDeterministic: the panel's randomised solutions (and a
// baseline) run twice on a real task give byte-identical leaderboards,
// which make a task that loads.
func TestPanelDeterministic(t *testing.T) {
	e := newTestEnv(t, Options{})
	dir := prepareReal(t, "iris-species")
	panel, err := LoadPanel(panelDir)
	if err != nil {
		t.Fatal(err)
	}
	panel = slices.DeleteFunc(panel, func(p PanelSolution) bool {
		return !slices.Contains([]string{"constant", "extra-trees-200", "forest-200", "gbm-300", "svm-rbf"}, p.Name)
	})
	if len(panel) != 5 {
		t.Fatalf("%d of the 5 solutions", len(panel))
	}
	task, err := tasks.Load(filepath.Join(dir, "iris-species"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var boards [2][]byte
	for i := range boards {
		board, results, err := e.sb.RunPanel(ctx, task, panel, 2)
		if err != nil {
			t.Fatal(err)
		}
		e.checkClean(t, "")
		for _, r := range results {
			if r.Result.Status != StatusValid {
				t.Errorf("%s: %s: %s", r.Solution, r.Result.Status, r.Result.Detail)
			}
		}
		boards[i] = LeaderboardCSV(board)
	}
	if !bytes.Equal(boards[0], boards[1]) {
		t.Fatalf("two panel runs differ:\n%s\nthen\n%s", boards[0], boards[1])
	}
	t.Logf("%s", boards[0])
	board, err := tasks.Load(task.Dir) // before: a header alone
	if err != nil || len(board.Leaderboard) != 0 {
		t.Fatalf("prepared task: %v, %d leaderboard rows", err, len(board.Leaderboard))
	}
	entries, _, _ := e.sb.RunPanel(ctx, task, panel[:1], 1)
	if err := WriteLeaderboard(task.Dir, entries); err != nil {
		t.Fatal(err)
	}
	loaded, err := tasks.Load(task.Dir)
	if err != nil || len(loaded.Leaderboard) != 1 || loaded.Leaderboard[0].Solution != "constant" {
		t.Fatalf("leaderboard written and read back: %v, %+v", err, loaded)
	}
}

// PanelTestEnv names the environment variable that runs TestPanelAllTasks
// (about 100 s per task on two shared cores): "1".
const PanelTestEnv = "WMRL_PANEL_TEST"

// TestPanelAllTasks: every panel solution is valid on every real task,
// and the leaderboards are written.
func TestPanelAllTasks(t *testing.T) {
	if os.Getenv(PanelTestEnv) != "1" {
		t.Skipf("slow (the whole panel on every real task): set %s=1", PanelTestEnv)
	}
	e := newTestEnv(t, Options{})
	dir := prepareReal(t, "")
	panel, err := LoadPanel(panelDir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		task, err := tasks.Load(filepath.Join(dir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		board, results, err := e.sb.RunPanel(context.Background(), task, panel, 2)
		if err != nil {
			t.Fatal(err)
		}
		e.checkClean(t, "")
		var slowest PanelResult
		for _, r := range results {
			if r.Result.Status != StatusValid {
				t.Errorf("%s on %s: %s: %s", r.Solution, task.Spec.ID, r.Result.Status, r.Result.Detail)
			}
			if r.Result.Run.WallSeconds > slowest.Result.Run.WallSeconds {
				slowest = r
			}
		}
		if err := WriteLeaderboard(task.Dir, board); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%s, %d train rows): panel in %.0f s, slowest %s %.1f s:\n%s", task.Spec.ID, task.Spec.Metric, task.TrainRows,
			time.Since(start).Seconds(), slowest.Solution, slowest.Result.Run.WallSeconds, LeaderboardCSV(board))
	}
}
