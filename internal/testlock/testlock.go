// Package testlock coordinates tests in different test binaries that share a
// machine-wide resource. `go test ./...` runs packages in parallel, so a test
// in one package that removes Docker images can pull an image from under a
// test of another package that is building or running it.
//
// Tests that use executor images take the shared lock; a test that removes
// images it did not create takes the exclusive lock.
package testlock

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// DockerImages takes the machine-wide lock on executor images until the test
// ends: shared when exclusive is false, exclusive otherwise.
func DockerImages(t testing.TB, exclusive bool) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "wmrl-test-docker-images.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("open test lock: %v", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
