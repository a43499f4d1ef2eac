package diskspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wmrl/wmrl/internal/testenv"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		give uint64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{64 << 20, "64.0 MiB"}, {1 << 30, "1.0 GiB"}, {3 << 40, "3.0 TiB"}, {5 << 60, "5120.0 PiB"},
	}
	for _, tt := range tests {
		if got := Bytes(tt.give); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// TestAnnotate: a full or read-only file system's error names its path and
// the space left, keeps its errno and is annotated once; others are left
// as they are.
func TestAnnotate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "runs", "r", "batches", ".step-00000001.json.1.tmp") // its directories do not exist
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS} {
		werr := fmt.Errorf("write batch: %w", &fs.PathError{Op: "write", Path: file, Err: errno})
		got := Annotate(werr, "")
		var e *Error
		if !errors.As(got, &e) {
			t.Fatalf("%v: not annotated: %v", errno, got)
		}
		if !errors.Is(got, errno) {
			t.Errorf("%v: annotated error lost its errno: %v", errno, got)
		}
		if e.Total == 0 || e.Free > e.Total || !strings.HasPrefix(dir, e.Mount) {
			t.Errorf("%v: %+v: want the space of the file system of %s", errno, e, dir)
		}
		want := fmt.Sprintf("write batch: write %s: %s (%s free of %s on %s)", file, errno, Bytes(e.Free), Bytes(e.Total), e.Mount)
		if got.Error() != want {
			t.Errorf("got %q\nwant %q", got, want)
		}
		if again := Annotate(fmt.Errorf("calibrate and fuse: %w", got), ""); strings.Count(again.Error(), " free of ") != 1 {
			t.Errorf("annotated twice: %v", again)
		}
	}
	// Without a path in the error, the caller's path.
	if got := Annotate(syscall.ENOSPC, file); !strings.Contains(got.Error(), " free of ") {
		t.Errorf("Annotate(ENOSPC, %s) = %v, want the space", file, got)
	}
	for _, err := range []error{nil, errors.New("connection refused"),
		&fs.PathError{Op: "open", Path: file, Err: syscall.ENOENT}} {
		if got := Annotate(err, file); got != err {
			t.Errorf("Annotate(%v) = %v, want it as it is", err, got)
		}
	}
}

// TestAnnotateFullTmpfs fills a real file system (a 1 MiB tmpfs; needs
// root, skipped otherwise) and reads the error of the write that found it
// full, then the error of a write once it is remounted read-only.
func TestAnnotateFullTmpfs(t *testing.T) {
	dir := testenv.Tmpfs(t, "1m")
	err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 2<<20), 0o644)
	got := Annotate(err, dir)
	var e *Error
	if !errors.As(got, &e) || !errors.Is(got, syscall.ENOSPC) {
		t.Fatalf("write of 2 MiB on a 1 MiB tmpfs: %v, want an annotated ENOSPC", got)
	}
	if e.Mount != dir || e.Free != 0 || e.Total != 1<<20 {
		t.Errorf("%+v: want 0 B free of 1 MiB on %s", e, dir)
	}
	if want := "(0 B free of 1.0 MiB on " + dir + ")"; !strings.HasSuffix(got.Error(), want) {
		t.Errorf("%q: want it to end with %q", got, want)
	}
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v: %s", err, out)
	}
	_, err = os.CreateTemp(dir, "x")
	got = Annotate(err, dir)
	if !errors.As(got, &e) || !errors.Is(got, syscall.EROFS) || e.Free != 1<<20 {
		t.Errorf("create on a read-only tmpfs: %v, want an annotated EROFS with 1 MiB free", got)
	}
}
