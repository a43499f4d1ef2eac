package gradehttp

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
)

var update = flag.Bool("update", false, "rewrite testdata/request.json")

// fixtureService answers /health and /grade with testdata files, and
// keeps the last /grade body.
func fixtureService(t *testing.T, health, grade string) (*httptest.Server, *[]byte) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	h, g := read(health), read(grade)
	var last []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case PathHealth:
			w.Write(h)
		case PathGrade:
			last, _ = io.ReadAll(r.Body)
			w.Write(g)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &last
}

// TestProtocolFixtures reads answers in the shape of the reference
// implementation's sandbox and world-model servers (testdata/README.md),
// and pins the request wmrl sends.
func TestProtocolFixtures(t *testing.T) {
	srv, last := fixtureService(t, "reference_sandbox_health.json", "reference_sandbox_grade.json")
	c := newClient(t, Config{URL: srv.URL})
	if n, err := c.Capacity(t.Context()); err != nil || n != 16 {
		t.Errorf("sandbox capacity %d, %v; want 16", n, err)
	}
	items := gradeItems(4)
	lim := backend.Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 64, Deadline: 120 * time.Second}
	gs, err := c.Grade(t.Context(), backend.GradeRequest{Items: items, Limits: lim, Budget: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Grade{
		{Graded: true, Status: "ok", Score: 0.83, Position: 0.66, WallSeconds: 41.7, CPUSeconds: 39.25,
			Detail: "Execution successful. Submission scored: position 0.66 on the leaderboard.", Feedback: "Execution successful. Submission scored: position 0.66 on the leaderboard."},
		{Graded: true, Status: "runtime_error", Score: 0.1, WallSeconds: 3.2, CPUSeconds: 2.5,
			Detail: "Execution failed: Traceback (most recent call last):\n  File \"/tmp/solution.py\", line 12, in <module>\nKeyError: 'target'", Feedback: "Execution failed: Traceback (most recent call last):\n  File \"/tmp/solution.py\", line 12, in <module>\nKeyError: 'target'"},
		{Graded: true, Status: "invalid_program", Score: 0, WallSeconds: 0.4, CPUSeconds: 0.25, Detail: "Execution failed: SyntaxError: invalid syntax", Feedback: "Execution failed: SyntaxError: invalid syntax"},
		{Graded: true, Status: "invalid_output", Score: 0.2, WallSeconds: 12, CPUSeconds: 11.5, Detail: "Execution successful, but no submission.csv was written.", Feedback: "Execution successful, but no submission.csv was written."},
	}
	if !reflect.DeepEqual(gs, want) {
		t.Errorf("grades\n%+v\nwant\n%+v", gs, want)
	}

	// The request of the first two items, pinned.
	if _, err := c.Grade(t.Context(), backend.GradeRequest{Items: items[:2], Limits: lim, Budget: 5}); err == nil {
		t.Error("4 results for 2 items: no error")
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, *last, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "request.json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pinned, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), pinned) {
		t.Errorf("request body changed (go test -update to accept it):\n%s\nwant\n%s", buf.Bytes(), pinned)
	}

	srv, _ = fixtureService(t, "reference_wm_health.json", "reference_wm_grade.json")
	wm := newClient(t, Config{URL: srv.URL})
	if n, err := wm.Capacity(t.Context()); err != nil || n != 256 {
		t.Errorf("world-model capacity %d, %v; want 256", n, err)
	}
	ps, err := wm.Score(t.Context(), []backend.ScoreItem{{Key: "a"}, {Key: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	// The world model's feedback is its env_feedback as its server cut
	// it (feedback), the predicted observation.
	if want := []backend.Prediction{{Graded: true, Score: 0.725, Status: "ok", Feedback: "Execution successful."},
		{Graded: true, Score: 0, Status: "invalid_program", Feedback: "No valid action found. Emit a ```python``` code block."}}; !reflect.DeepEqual(ps, want) {
		t.Errorf("predictions %+v, want %+v", ps, want)
	}
}

// TestLimitsResolve: the reference's limit keys lower wmrl's limits (the
// stricter wins), unknown keys are ignored, bad values name their key.
func TestLimitsResolve(t *testing.T) {
	def := backend.DefaultLimits() // 512 MiB, 1 CPU, 64 pids, 30 s
	for _, tt := range []struct {
		give    string
		want    backend.Limits
		wantErr string
	}{
		{`{"execution_timeout": 600, "cpu_time_limit": 3000, "memory_limit": 64}`, def, ""},
		{`{"execution_timeout": 5, "memory_limit": 0.25, "gpu_memory_limit": 19, "something_new": 1}`,
			backend.Limits{MemoryBytes: 250_000_000, CPUs: 1, Pids: 64, Deadline: 5 * time.Second}, ""},
		{`{"memory_bytes": 1073741824, "cpus": 2, "pids": 32, "deadline_seconds": 120, "execution_timeout": 60}`,
			backend.Limits{MemoryBytes: 1 << 30, CPUs: 2, Pids: 32, Deadline: 60 * time.Second}, ""},
		{`{"memory_bytes": 1073741824, "cpus": 2, "pids": 32, "deadline_seconds": 120, "execution_timeout": 600}`,
			backend.Limits{MemoryBytes: 1 << 30, CPUs: 2, Pids: 32, Deadline: 120 * time.Second}, ""},
		{`{"execution_timeout": 0}`, backend.Limits{}, "execution_timeout: 0, want a number > 0"},
		{`{"cpu_time_limit": -1}`, backend.Limits{}, "cpu_time_limit: -1, want a number > 0"},
	} {
		var l Limits
		if err := json.Unmarshal([]byte(tt.give), &l); err != nil {
			t.Fatal(err)
		}
		got, err := l.Resolve(def)
		if (err != nil || tt.wantErr != "") && (err == nil || err.Error() != tt.wantErr) {
			t.Errorf("%s: error %v, want %q", tt.give, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.give, got, tt.want)
		}
	}
}

// TestOverviewAlwaysSent: an item of a task without a prompt still
// carries an overview (the reference's world model asserts it).
func TestOverviewAlwaysSent(t *testing.T) {
	task := backend.Task{Suite: 7, ID: "reg-linear-000", Split: backend.Train}
	b, err := json.Marshal(Item{Task: task.ID, Overview: Overview(task)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"overview":"Task reg-linear-000 of the built-in suite 7 (train split)."`)) {
		t.Errorf("item %s: no overview", b)
	}
	if got := Overview(backend.Task{Prompt: "predict y"}); got != "predict y" {
		t.Errorf("overview of a prompted task: %q", got)
	}
}
