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
			Detail: "Execution successful. Submission scored: position 0.66 on the leaderboard."},
		{Graded: true, Status: "runtime_error", Score: 0.1, WallSeconds: 3.2, CPUSeconds: 2.5,
			Detail: "Execution failed: Traceback (most recent call last):\n  File \"/tmp/solution.py\", line 12, in <module>\nKeyError: 'target'"},
		{Graded: true, Status: "invalid_program", Score: 0, WallSeconds: 0.4, CPUSeconds: 0.25, Detail: "Execution failed: SyntaxError: invalid syntax"},
		{Graded: true, Status: "invalid_output", Score: 0.2, WallSeconds: 12, CPUSeconds: 11.5, Detail: "Execution successful, but no submission.csv was written."},
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
	if want := []backend.Prediction{{Graded: true, Score: 0.725}, {Graded: true, Score: 0}}; !reflect.DeepEqual(ps, want) {
		t.Errorf("predictions %+v, want %+v", ps, want)
	}
}
