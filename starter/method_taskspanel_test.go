package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/tasks"
)

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTasksPanel: bad flags and arguments are refused before anything
// runs; with an engine and the image, the panel's leaderboard is written
// into the task directory, best first, and the task still loads.
func TestTasksPanel(t *testing.T) {
	panel := filepath.Join("..", "deploy", "pytasks", "panel")
	if _, errOut, st := runWithStatus(t, "tasks", "panel", toyTask, "--parallel", "0"); st != exitUsage ||
		!strings.Contains(errOut, "--parallel") {
		t.Errorf("--parallel 0: status %d, %q", st, errOut)
	}
	if _, errOut, st := runWithStatus(t, "tasks", "panel", toyTask, "--panel", t.TempDir()); st != exitRuntime ||
		!strings.Contains(errOut, "no solutions") {
		t.Errorf("empty panel: status %d, %q", st, errOut)
	}
	if _, errOut, st := runWithStatus(t, "tasks", "panel", t.TempDir(), "--panel", panel); st != exitRuntime ||
		!strings.Contains(errOut, "task.yaml") {
		t.Errorf("not a task: status %d, %q", st, errOut)
	}

	image := pythonImage(t)
	dir := filepath.Join(t.TempDir(), "toy-binary")
	copyDir(t, toyTask, dir)
	small := t.TempDir()
	for _, name := range []string{"constant", "majority"} {
		b, err := os.ReadFile(filepath.Join(panel, name+".py"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(small, name+".py"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, st := runWithStatus(t, "tasks", "panel", dir, "--panel", small, "--image", image, "--json")
	var rep []tasksPanelEntry
	if st != exitOK || json.Unmarshal([]byte(out), &rep) != nil || len(rep) != 1 || rep[0].ID != "toy-binary" {
		t.Fatalf("panel: status %d, %q, %q", st, out, errOut)
	}
	task, err := tasks.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Leaderboard) != len(rep[0].Leaderboard) || len(task.Leaderboard)+len(rep[0].Failed) != 2 {
		t.Errorf("leaderboard.csv %v, report %+v", task.Leaderboard, rep[0])
	}
}
