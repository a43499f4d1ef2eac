package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const validSpec = `id: toy-binary
title: Toy binary task
kind: classification
metric: roc_auc
direction: maximize
time_limit: 10m
memory_limit: 2GiB
cpus: 1
id_column: id
target: label
labels: [no, yes]
source: written by hand for the tests
seed: 7
`

// validFiles is a small valid binary task.
func validFiles() map[string]string {
	return map[string]string{
		FileSpec:             validSpec,
		FileDescription:      "# Toy\n\nPredict label.\n",
		FileLeaderboard:      "solution,score\nforest,0.9\nlogistic,0.8\nprior,0.5\n",
		FileTrain:            "id,x1,x2,label\n0,1.5,a,yes\n1,0.5,b,no\n2,2.5,a,yes\n",
		FileTest:             "id,x1,x2\n3,1.0,a\n4,2.0,b\n",
		FileSampleSubmission: "id,label\n3,0.5\n4,0.5\n",
		FileAnswers:          "id,label\n3,no\n4,yes\n",
	}
}

func writeTask(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadValid(t *testing.T) {
	dir := writeTask(t, t.TempDir(), validFiles())
	task, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := task.Spec
	if s.ID != "toy-binary" || s.Kind != Classification || s.Metric != ROCAUC || s.TimeLimit != 10*time.Minute ||
		s.MemoryLimit != 2<<30 || s.CPUs != 1 || len(s.Labels) != 2 || s.Seed == nil || *s.Seed != 7 {
		t.Errorf("spec %+v", s)
	}
	if task.TrainRows != 3 || task.TestRows != 2 || task.Features != 2 || len(task.Leaderboard) != 3 || len(task.Files) != 7 {
		t.Errorf("rows %d/%d features %d leaderboard %v files %d", task.TrainRows, task.TestRows, task.Features, task.Leaderboard, len(task.Files))
	}
	// The hash depends on the files only, not on where they are.
	again, err := Load(writeTask(t, t.TempDir(), validFiles()))
	if err != nil || again.Hash != task.Hash || len(task.Hash) != 64 {
		t.Errorf("hash %s then %s (%v)", task.Hash, again.Hash, err)
	}
	files := validFiles()
	files[FileDescription] += "more\n"
	other, err := Load(writeTask(t, t.TempDir(), files))
	if err != nil || other.Hash == task.Hash {
		t.Errorf("another description, same hash %s (%v)", other.Hash, err)
	}
}

func TestLoadRegressionAndLabels(t *testing.T) {
	files := map[string]string{
		FileSpec: "id: toy-reg\ntitle: t\nkind: regression\nmetric: rmse\ndirection: minimize\ntime_limit: 90s\n" +
			"memory_limit: 512MiB\nid_column: row\ntarget: y\nsource: s\n",
		FileDescription:          "d",
		FileLeaderboard:          "solution,score\nridge,1.5\nmean,2\n",
		FileTrain:                "row,x,y\na,1,2.5\n",
		FileTest:                 "row,x\nb,3\n",
		FileSampleSubmission:     "row,y\nb,0\n",
		FileAnswers:              "row,y\nb,-1e3\n",
		"public/extra/notes.txt": "extra files in public/ are allowed",
	}
	task, err := Load(writeTask(t, t.TempDir(), files))
	if err != nil {
		t.Fatal(err)
	}
	if task.Spec.CPUs != 1 || task.Spec.Seed != nil || task.Spec.MemoryLimit != 512<<20 {
		t.Errorf("defaults: %+v", task.Spec)
	}
}

// TestLoadInvalid: each malformed task is refused with its file, field
// and (where known) line.
func TestLoadInvalid(t *testing.T) {
	spec := func(old, new string) func(map[string]string) {
		return func(f map[string]string) {
			if !strings.Contains(f[FileSpec], old) {
				panic("no " + old)
			}
			f[FileSpec] = strings.Replace(f[FileSpec], old, new, 1)
		}
	}
	set := func(name, content string) func(map[string]string) {
		return func(f map[string]string) { f[name] = content }
	}
	tests := []struct {
		name string
		give func(map[string]string)
		want string
	}{
		{"no id", spec("id: toy-binary\n", ""), "task.yaml: id: missing"},
		{"bad id", spec("id: toy-binary", "id: Toy Binary"), `task.yaml: id: line 1: a-z, 0-9`},
		{"long id", spec("id: toy-binary", "id: "+strings.Repeat("a", 65)), "task.yaml: id: line 1: at most 64 characters, got 65"},
		{"unknown field", spec("cpus: 1", "cpu: 1"), "task.yaml: cpu: line 8: unknown field"},
		{"repeated field", spec("cpus: 1", "cpus: 1\ncpus: 2"), "task.yaml: cpus: line 9: repeated (first at line 8)"},
		{"unknown metric", spec("metric: roc_auc", "metric: f2"), `task.yaml: metric: line 4: unknown metric "f2"`},
		{"metric for kind", spec("metric: roc_auc", "metric: rmse"), "task.yaml: metric: line 4: rmse is a regression metric, but kind is classification"},
		{"direction", spec("direction: maximize", "direction: minimize"), "task.yaml: direction: line 5: minimize for metric roc_auc, want maximize"},
		{"direction word", spec("direction: maximize", "direction: up"), `task.yaml: direction: line 5: "up": want maximize or minimize`},
		{"kind", spec("kind: classification", "kind: ranking"), `task.yaml: kind: line 3: "ranking": want classification or regression`},
		{"time limit", spec("time_limit: 10m", "time_limit: 48h"), "task.yaml: time_limit: line 6: 48h0m0s: want 1s..24h0m0s"},
		{"time limit word", spec("time_limit: 10m", "time_limit: soon"), `task.yaml: time_limit: line 6: "soon": want a duration`},
		{"memory unit", spec("memory_limit: 2GiB", "memory_limit: 2GB"), `task.yaml: memory_limit: line 7: "2GB": want a whole number with KiB, MiB or GiB`},
		{"memory small", spec("memory_limit: 2GiB", "memory_limit: 1MiB"), "task.yaml: memory_limit: line 7: 1MiB: want at least 16MiB"},
		{"memory huge", spec("memory_limit: 2GiB", "memory_limit: 999999999999GiB"), "task.yaml: memory_limit: line 7: \"999999999999GiB\": more than 256GiB"},
		{"cpus", spec("cpus: 1", "cpus: 0"), `task.yaml: cpus: line 8: "0": want a number in [0.1, 64]`},
		{"cpus NaN", spec("cpus: 1", "cpus: .nan"), `task.yaml: cpus: line 8: ".nan"`},
		{"cpus list", spec("cpus: 1", "cpus: [1]"), "task.yaml: cpus: line 8: want a single value"},
		{"target is id", spec("target: label", "target: id"), `task.yaml: target: line 10: the same column as id_column ("id")`},
		{"target name", spec("target: label", "target: 1abel"), `task.yaml: target: line 10: "1abel": want a column name`},
		{"one label", spec("labels: [no, yes]", "labels: [yes]"), "task.yaml: labels: line 11: 1 labels, want 2..1000"},
		{"repeated label", spec("labels: [no, yes]", "labels: [no, no]"), `task.yaml: labels: line 11: label "no": repeated`},
		{"three labels for auc", spec("labels: [no, yes]", "labels: [a, b, c]"), "task.yaml: labels: line 11: 3 labels; metric roc_auc needs a binary task"},
		{"no labels", spec("labels: [no, yes]\n", ""), "task.yaml: labels: missing: a classification task lists its labels"},
		{"seed", spec("seed: 7", "seed: -7"), `task.yaml: seed: line 13: "-7": want a whole number`},
		{"title newline", spec("title: Toy binary task", "title: \"a\\nb\""), "task.yaml: title: line 2: control character U+000A"},
		{"yaml syntax", spec("kind: classification", "kind: [classification"), "task.yaml: line "},
		{"not a mapping", set(FileSpec, "- a\n- b\n"), "task.yaml: line 1: want a mapping"},
		{"two documents", set(FileSpec, validSpec+"---\nid: x\n"), "task.yaml: line 14: a second YAML document"},
		{"no task.yaml", set(FileSpec, ""), "task.yaml: empty; want a mapping"},
		{"empty description", set(FileDescription, " \n"), "description.md: empty"},
		{"binary description", set(FileDescription, "\xff\xfe"), "description.md: not UTF-8"},
		{"test holds answers", set(FileTest, "id,x1,x2,label\n3,1.0,a,no\n4,2.0,b,yes\n"), "public/test.csv: label: line 1: the target column is the answer"},
		{"test columns", set(FileTest, "id,x2,x1\n3,a,1.0\n4,b,2.0\n"), "public/test.csv: line 1: columns id,x2,x1 differ from public/train.csv's less the target (id,x1,x2)"},
		{"train no target", set(FileTrain, "id,x1,x2\n0,1,a\n"), "public/train.csv: label: line 1: missing column (task.yaml target)"},
		{"train bad label", set(FileTrain, "id,x1,x2,label\n0,1.5,a,yes\n1,0.5,b,maybe\n"), `public/train.csv: label: line 3: "maybe" is not one of the labels (no, yes)`},
		{"train repeated id", set(FileTrain, "id,x1,x2,label\n0,1.5,a,yes\n0,0.5,b,no\n"), `public/train.csv: id: line 3: id "0" repeated (first at line 2)`},
		{"train no id column", set(FileTrain, "key,x1,x2,label\n0,1.5,a,yes\n"), "public/train.csv: id: line 1: missing column (task.yaml id_column)"},
		{"train ragged", set(FileTrain, "id,x1,x2,label\n0,1.5,a,yes\n1,0.5\n"), "public/train.csv: line 3: wrong number of fields"},
		{"train no rows", set(FileTrain, "id,x1,x2,label\n"), "public/train.csv: no rows"},
		{"train empty", set(FileTrain, ""), "public/train.csv: line 1: empty; want a header line"},
		{"train repeated column", set(FileTrain, "id,x1,x1,label\n0,1,2,yes\n"), "public/train.csv: x1: line 1: repeated column"},
		{"answers ids", set(FileAnswers, "id,label\n4,yes\n3,no\n"), `private/answers.csv: id: line 2: id "4" where public/test.csv has "3"`},
		{"answers short", set(FileAnswers, "id,label\n3,no\n"), "private/answers.csv: 1 rows, want one per row of public/test.csv (2)"},
		{"answers columns", set(FileAnswers, "id,label,extra\n3,no,1\n4,yes,1\n"), "private/answers.csv: line 1: columns id,label,extra, want id,label"},
		{"answers value", set(FileAnswers, "id,label\n3,0.2\n4,yes\n"), `private/answers.csv: label: line 2: "0.2" is not one of the labels`},
		{"sample probability", set(FileSampleSubmission, "id,label\n3,1.5\n4,0.5\n"), `public/sample_submission.csv: label: line 2: "1.5": want the probability of "yes", in [0, 1]`},
		{"sample label for auc", set(FileSampleSubmission, "id,label\n3,yes\n4,0.5\n"), `public/sample_submission.csv: label: line 2: "yes": want the probability`},
		{"leaderboard order", set(FileLeaderboard, "solution,score\nprior,0.5\nforest,0.9\n"), "leaderboard.csv: score: line 3: 0.9 is better than the row above (0.5); want best first (maximize)"},
		{"leaderboard NaN", set(FileLeaderboard, "solution,score\nprior,NaN\n"), `leaderboard.csv: score: line 2: "NaN": want a finite number`},
		{"leaderboard name", set(FileLeaderboard, "solution,score\nPrior Model,0.5\n"), "leaderboard.csv: solution: line 2: a-z"},
		{"leaderboard repeated", set(FileLeaderboard, "solution,score\nprior,0.5\nprior,0.5\n"), `leaderboard.csv: solution: line 3: "prior" repeated`},
		{"leaderboard header", set(FileLeaderboard, "name,score\n"), "leaderboard.csv: line 1: columns name,score, want solution,score"},
		{"unexpected file", set("README", "x"), "README: unexpected entry"},
		{"hidden file", set("public/.secret", "x"), "public/.secret: hidden names"},
		{"missing answers", func(f map[string]string) { delete(f, FileAnswers) }, "private/answers.csv: missing"},
		{"missing leaderboard", func(f map[string]string) { delete(f, FileLeaderboard) }, "leaderboard.csv: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := validFiles()
			tt.give(files)
			_, err := Load(writeTask(t, t.TempDir(), files))
			var inv *Invalid
			if !errors.As(err, &inv) {
				t.Fatalf("Load = %v, want *Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nlacks %q", err, tt.want)
			}
		})
	}
}

func TestLoadRefusesLinks(t *testing.T) {
	dir := writeTask(t, t.TempDir(), validFiles())
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "public", "passwd")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "public/passwd: not a regular file") {
		t.Fatalf("Load = %v, want the symlink refused", err)
	}
	// A symlink to a task directory is followed.
	good := writeTask(t, t.TempDir(), validFiles())
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(link); err != nil {
		t.Fatalf("Load(symlink to a task) = %v", err)
	}
}

func TestLoadNotADirectory(t *testing.T) {
	dir := t.TempDir()
	for _, give := range []string{filepath.Join(dir, "none"), writeTask(t, dir, map[string]string{"f": "x"}) + "/f"} {
		if _, err := Load(give); err == nil {
			t.Errorf("Load(%s) = nil", give)
		}
	}
}

func TestStore(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Fatalf("empty store: %v, %v", list, err)
	}
	if _, err := s.Get("toy-binary"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get from empty store = %v", err)
	}
	src := writeTask(t, t.TempDir(), validFiles())
	imp, err := s.Import(src, false)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Unchanged || imp.Previous != "" || imp.Task.Dir != filepath.Join(s.Dir, "objects", imp.Task.Hash) {
		t.Errorf("first import %+v", imp)
	}
	// Again: nothing changes.
	again, err := s.Import(src, false)
	if err != nil || !again.Unchanged || again.Task.Hash != imp.Task.Hash {
		t.Fatalf("second import %+v, %v", again, err)
	}
	// Other files under the same id: refused, then replaced.
	files := validFiles()
	files[FileDescription] = "# Toy, revised\n"
	other := writeTask(t, t.TempDir(), files)
	if _, err := s.Import(other, false); err == nil || !strings.Contains(err.Error(), "already imported with other files") {
		t.Fatalf("import of other files = %v", err)
	}
	rep, err := s.Import(other, true)
	if err != nil || rep.Previous != imp.Task.Hash || rep.Task.Hash == imp.Task.Hash {
		t.Fatalf("replace %+v, %v", rep, err)
	}
	// The old object stays, for runs that recorded it.
	if _, err := Load(filepath.Join(s.Dir, "objects", imp.Task.Hash)); err != nil {
		t.Errorf("old object: %v", err)
	}
	got, err := s.Get("toy-binary")
	if err != nil || got.Hash != rep.Task.Hash || got.Description != "# Toy, revised\n" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	// A second task; List is in id order.
	files = validFiles()
	files[FileSpec] = strings.Replace(validSpec, "id: toy-binary", "id: a-first", 1)
	if _, err := s.Import(writeTask(t, t.TempDir(), files), false); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 || list[0].Spec.ID != "a-first" || list[1].Spec.ID != "toy-binary" {
		t.Fatalf("List = %v, %v", list, err)
	}
	// An invalid task is not imported.
	files = validFiles()
	files[FileSpec] = strings.Replace(validSpec, "id: toy-binary", "id: broken", 1)
	files[FileTest] = "id,x1,x2,label\n3,1,a,no\n4,2,b,yes\n"
	if _, err := s.Import(writeTask(t, t.TempDir(), files), false); err == nil {
		t.Fatal("invalid task imported")
	}
	if _, err := s.Get("broken"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(broken) = %v", err)
	}
	// A damaged object is noticed.
	p := filepath.Join(s.Dir, "objects", rep.Task.Hash, "description.md")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("toy-binary"); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Get(damaged) = %v", err)
	}
	// Importing the same files again repairs it.
	if imp, err := s.Import(other, false); err != nil || imp.Unchanged {
		t.Fatalf("repair = %+v, %v", imp, err)
	}
	if _, err := s.Get("toy-binary"); err != nil {
		t.Fatalf("Get after repair = %v", err)
	}
}

func TestMemory(t *testing.T) {
	tests := []struct {
		give string
		want int64
	}{
		{"16MiB", 16 << 20}, {"2GiB", 2 << 30}, {"1024KiB", 1 << 20}, {"256GiB", 256 << 30},
		{"2G", -1}, {"-1GiB", -1}, {"1.5GiB", -1}, {"", -1}, {"257GiB", -1},
	}
	for _, tt := range tests {
		got, err := ParseMemory(tt.give)
		if (err != nil) != (tt.want < 0) || (err == nil && got != tt.want) {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", tt.give, got, err, tt.want)
		}
		if err == nil {
			if back, _ := ParseMemory(FormatMemory(got)); back != got {
				t.Errorf("FormatMemory(%d) = %q does not parse back", got, FormatMemory(got))
			}
		}
	}
}

// TestTestdata: testdata/toy-binary, which the command tests import, holds
// the files of validFiles.
func TestTestdata(t *testing.T) {
	got, err := Load(filepath.Join("testdata", "toy-binary"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Load(writeTask(t, t.TempDir(), validFiles()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != want.Hash {
		t.Errorf("testdata/toy-binary hash %s, validFiles %s", got.Hash, want.Hash)
	}
}

func TestLoadTooLarge(t *testing.T) {
	dir := writeTask(t, t.TempDir(), validFiles())
	// A sparse file: refused by its size, before it is read.
	p := filepath.Join(dir, "public", "huge.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(p, MaxBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "larger than 1073741824 bytes together") {
		t.Fatalf("Load = %v", err)
	}
}
