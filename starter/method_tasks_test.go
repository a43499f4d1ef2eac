package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const toyTask = "../internal/tasks/testdata/toy-binary"

// runWmrl runs the real command tree in-process.
func runWithStatus(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errOut bytes.Buffer
	status = run(newRootCmd, args, &out, &errOut)
	return out.String(), errOut.String(), status
}

func TestTasksImportListShow(t *testing.T) {
	data := "--data-dir=" + t.TempDir()
	out, errOut, st := runWithStatus(t, "tasks", "list", data)
	if st != exitOK || !strings.Contains(out, "0 tasks in ") {
		t.Fatalf("list of an empty store: %d %q %q", st, out, errOut)
	}
	out, errOut, st = runWithStatus(t, "tasks", "import", toyTask, data)
	if st != exitOK || !strings.HasPrefix(out, "imported toy-binary (") || errOut != "" {
		t.Fatalf("import: %d %q %q", st, out, errOut)
	}
	out, errOut, st = runWithStatus(t, "tasks", "import", toyTask, data, "--json")
	var imported []tasksImportEntry
	if st != exitOK || json.Unmarshal([]byte(out), &imported) != nil || len(imported) != 1 || imported[0].Status != "unchanged" {
		t.Fatalf("import again: %d %q %q", st, out, errOut)
	}

	out, errOut, st = runWithStatus(t, "tasks", "list", data, "--json")
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var list []tasksListEntry
	if st != exitOK || dec.Decode(&list) != nil {
		t.Fatalf("list --json: %d %q %q", st, out, errOut)
	}
	want := tasksListEntry{ID: "toy-binary", Title: "Toy binary task", Kind: "classification", Metric: "roc_auc",
		Direction: "maximize", TrainRows: 3, TestRows: 2, Features: 2, Leaderboard: 3, Hash: imported[0].Hash}
	if len(list) != 1 || list[0] != want {
		t.Errorf("list --json = %+v, want [%+v]", list, want)
	}
	out, _, st = runWithStatus(t, "tasks", "list", data)
	if st != exitOK || !strings.Contains(out, "toy-binary  classification  roc_auc (maximize)") || !strings.Contains(out, "1 tasks in ") {
		t.Errorf("list: %q", out)
	}

	out, errOut, st = runWithStatus(t, "tasks", "show", "toy-binary", data, "--json")
	dec = json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var show tasksShowReport
	if st != exitOK || dec.Decode(&show) != nil {
		t.Fatalf("show --json: %d %q %q", st, out, errOut)
	}
	if show.TimeLimit != "10m0s" || show.MemoryLimit != "2GiB" || len(show.Files) != 7 || len(show.Leaderboard) != 3 ||
		show.Leaderboard[0].Solution != "forest" || show.Seed == nil || *show.Seed != 7 || !strings.HasPrefix(show.Description, "# Toy") {
		t.Errorf("show --json = %+v", show)
	}
	out, _, st = runWithStatus(t, "tasks", "show", "toy-binary", data)
	for _, w := range []string{"task      toy-binary: Toy binary task", "limits    10m0s, 2GiB, 1 CPUs", "labels    no, yes",
		"private/answers.csv", "leaderboard (3 solutions, best first)", "# Toy"} {
		if st != exitOK || !strings.Contains(out, w) {
			t.Errorf("show lacks %q: %q", w, out)
		}
	}

	// Grade: the answers (no, yes) against P(yes).
	sub := filepath.Join(t.TempDir(), "submission.csv")
	if err := os.WriteFile(sub, []byte("id,label\n4,0.7\n3,0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, st = runWithStatus(t, "tasks", "grade", "toy-binary", sub, data, "--json")
	var grade tasksGradeReport
	if st != exitOK || json.Unmarshal([]byte(out), &grade) != nil {
		t.Fatalf("grade --json: %d %q %q", st, out, errOut)
	}
	if grade.Score != 1 || grade.Rank != 1 || grade.Leaderboard != 3 || grade.Metric != "roc_auc" {
		t.Errorf("grade --json = %+v", grade)
	}
	out, _, st = runWithStatus(t, "tasks", "grade", "toy-binary", sub, data)
	if st != exitOK || out != "toy-binary roc_auc 1 (maximize); rank 1 of 3 reference solutions + 1\n" {
		t.Errorf("grade: %d %q", st, out)
	}

	// Other files under the same id: refused, then replaced with --replace.
	other := copyTask(t, map[string]string{"description.md": "# Toy, revised\n"})
	_, errOut, st = runWithStatus(t, "tasks", "import", other, data)
	if st != exitRuntime || !strings.Contains(errOut, "already imported with other files") {
		t.Errorf("import of other files: %d %q", st, errOut)
	}
	out, errOut, st = runWithStatus(t, "tasks", "import", other, data, "--replace")
	if st != exitOK || !strings.HasPrefix(out, "replaced toy-binary") {
		t.Errorf("import --replace: %d %q %q", st, out, errOut)
	}
}

// copyTask copies the toy task into a new directory, changing the files
// given (path: content).
func copyTask(t *testing.T, changes map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(toyTask)); err != nil {
		t.Fatal(err)
	}
	for name, content := range changes {
		p := filepath.Join(dir, filepath.FromSlash(name))
		_ = os.Remove(p)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
