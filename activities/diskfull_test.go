package activities

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/wmrl/wmrl/internal/testenv"
)

// TestWriteFileFullDataDir: a write to a full data directory (a real
// tmpfs, filled; needs root) fails with an error that names the file and
// the space left, keeps ENOSPC and is no ApplicationError, so Temporal
// retries it; nothing is left behind, and the same write succeeds once
// there is room.
func TestWriteFileFullDataDir(t *testing.T) {
	dir := testenv.Tmpfs(t, "256k")
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 512<<10), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	a := &Activities{DataDir: dir}
	path := a.batchPath("r", 1)
	err := writeJSON(path, map[string]string{"batch": strings.Repeat("x", 8<<10)})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to a full data dir: %v, want ENOSPC", err)
	}
	if want := "(0 B free of 256.0 KiB on " + dir + ")"; !strings.Contains(err.Error(), filepath.Dir(path)) ||
		!strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %q: want the path and %q", err, want)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		t.Errorf("error %v is an ApplicationError (%s): it must stay a plain, retried error", err, app.Type())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(path, map[string]string{"batch": "x"}); err != nil {
		t.Fatalf("write once there is room: %v", err)
	}
}
