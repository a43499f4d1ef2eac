// Package diskspace explains a write that failed because its file system is
// full (ENOSPC, EDQUOT) or mounted read-only (EROFS): the error keeps the
// path the system call named and adds how much space the file system has
// left, so the person who reads it knows which volume to grow or remount.
// Such an error stays a plain error (an infrastructure failure, retried);
// it is never invalid input.
package diskspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Error is a write's error on a full or read-only file system, with the
// space the file system had left when the write failed.
type Error struct {
	// Err is the error as the write returned it (an *fs.PathError
	// names the path).
	Err error
	// Mount is where the file system is mounted (the topmost directory of
	// Path's device), or the nearest directory of Path that exists.
	Mount string
	// Free is the space an unprivileged writer may still use, Total the
	// file system's size, in bytes.
	Free, Total uint64
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v (%s free of %s on %s)", e.Err, Bytes(e.Free), Bytes(e.Total), e.Mount)
}

func (e *Error) Unwrap() error { return e.Err }

// Full reports whether err is a file system's refusal to store more: no
// space, quota exceeded or read-only.
func Full(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}

// Annotate returns err as an *Error when it is a full or read-only file
// system's (Full), with the space left on the file system of the path the
// error names (of path when it names none); any other error, nil, or an
// error annotated already, as it is. When the space cannot be read, err
// is returned as it is.
func Annotate(err error, path string) error {
	if err == nil || !Full(err) {
		return err
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		path = pe.Path
	case errors.As(err, &le):
		path = le.New
	}
	dir := existing(path)
	if dir == "" {
		return err
	}
	free, total, ok := space(dir)
	if !ok {
		return err
	}
	return &Error{Err: err, Mount: mountPoint(dir), Free: free, Total: total}
}

// existing returns path, or its nearest parent, that exists; "" if none.
func existing(path string) string {
	if path == "" {
		return ""
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return ""
		}
		p = parent
	}
}

// mountPoint returns the topmost directory above path (included) on the
// same device as path: where its file system is mounted. A bind mount of a
// directory of the same file system is not told apart from it.
func mountPoint(path string) string {
	d, ok := device(path)
	if !ok {
		return path
	}
	for {
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		if pd, ok := device(parent); !ok || pd != d {
			return path
		}
		path = parent
	}
}

// Bytes formats n bytes in binary units: "0 B", "512 B", "1.0 GiB".
func Bytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, units := float64(n)/1024, []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
