package suite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCacheRoundTrip(t *testing.T) {
	ctx := context.Background()
	var log bytes.Buffer
	l := Loader{Dir: t.TempDir(), Progress: &log}
	opts := smallOptions(7)
	first, err := l.Load(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "building suite") {
		t.Fatalf("no build note on a cache miss: %q", log.String())
	}
	if first.Hash != smallSuite(t).Hash {
		t.Fatalf("loaded suite hash %s, generated %s", first.Hash, smallSuite(t).Hash)
	}
	path, err := l.Path(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("cache file: %v", err)
	}
	log.Reset()
	second, err := l.Load(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if log.Len() != 0 {
		t.Fatalf("cache hit printed %q", log.String())
	}
	if second.Hash != first.Hash || !bytes.Equal(encodeSuite(second), encodeSuite(first)) {
		t.Fatal("cached suite differs from the built one")
	}
	for i := range first.Tasks {
		if !reflect.DeepEqual(first.Tasks[i].Card, second.Tasks[i].Card) {
			t.Fatalf("task %s: card differs after the round trip", first.Tasks[i].ID)
		}
	}
	// Other options use another file.
	other := opts
	other.Seed++
	if p2, _ := l.Path(other); p2 == path {
		t.Fatal("different options share a cache file")
	}
	// Nothing but the cache file is left behind.
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("cache directory holds %d entries", len(entries))
	}
}

func TestCacheConcurrentLoads(t *testing.T) {
	// Workers starting together on an empty cache all get the same suite
	// and leave one valid file.
	ctx := context.Background()
	dir := t.TempDir()
	opts := smallOptions(7)
	hashes := make([]string, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range hashes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Loader{Dir: dir, Workers: 1, pollEvery: 20 * time.Millisecond}.Load(ctx, opts)
			if err == nil {
				hashes[i] = s.Hash
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i := range hashes {
		if errs[i] != nil || hashes[i] != smallSuite(t).Hash {
			t.Fatalf("loader %d: hash %s, %v", i, hashes[i], errs[i])
		}
	}
	path, _ := Loader{Dir: dir}.Path(opts)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unmarshalSuite(b); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("%d entries left in the cache directory", len(entries))
	}
}

func TestCacheCorruptionRebuilds(t *testing.T) {
	ctx := context.Background()
	opts := smallOptions(7)
	want := smallSuite(t)
	good := marshalSuite(want)
	// A stale leaderboard under a valid hash: only the engine check can
	// tell.
	stale := *want
	stale.Tasks = append([]*Task(nil), want.Tasks...)
	t0 := *stale.Tasks[0]
	t0.Leaderboard = append([]float64{t0.Leaderboard[0] + 0.01}, t0.Leaderboard[1:]...)
	stale.Tasks[0] = &t0
	otherOpts := *want
	otherOpts.Options.MaxRows++

	tests := []struct {
		name string
		give []byte
		note string
	}{
		{"flipped byte", flip(good, len(good)/2), "hash mismatch"},
		{"flipped hash byte", flip(good, len(good)-1), "hash mismatch"},
		{"truncated", good[:len(good)/3], "hash mismatch"},
		{"empty", nil, "bad header"},
		{"garbage", []byte("not a suite at all, just some bytes that are long enough"), "bad header"},
		{"other options", marshalSuite(&otherOpts), "built for options"},
		{"stale leaderboard", marshalSuite(&stale), "engine check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			l := Loader{Dir: t.TempDir(), Progress: &log}
			path, err := l.Path(opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeAtomic(path, tt.give); err != nil {
				t.Fatal(err)
			}
			s, err := l.Load(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if s.Hash != want.Hash {
				t.Fatalf("rebuilt hash %s, want %s", s.Hash, want.Hash)
			}
			if !strings.Contains(log.String(), "unusable") || !strings.Contains(log.String(), tt.note) {
				t.Fatalf("note %q does not report %q", log.String(), tt.note)
			}
			b, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(b, good) {
				t.Fatalf("cache file not replaced by the good suite (%v)", err)
			}
		})
	}
}

func TestUnmarshalRejectsCorruption(t *testing.T) {
	good := marshalSuite(smallSuite(t))
	if _, err := unmarshalSuite(good); err != nil {
		t.Fatalf("good file: %v", err)
	}
	// Every single-byte change anywhere is caught (sampled positions).
	for i := 0; i < len(good); i += len(good)/97 + 1 {
		if _, err := unmarshalSuite(flip(good, i)); err == nil {
			t.Fatalf("byte %d flipped: accepted", i)
		}
	}
}

func TestCacheDirEnv(t *testing.T) {
	t.Setenv(CacheEnv, "/some/where")
	if d, err := CacheDir(); err != nil || d != "/some/where" {
		t.Fatalf("CacheDir() = %q, %v", d, err)
	}
	p, err := Loader{}.Path(DefaultOptions(DefaultSeed))
	if err != nil || !strings.HasPrefix(p, "/some/where/suite/suite-v") {
		t.Fatalf("Path = %q, %v", p, err)
	}
}

func flip(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0x40
	return out
}

func TestCacheWaitsForBuilder(t *testing.T) {
	// A fresh lock means another process is building: the loader waits for
	// its file instead of building the suite again.
	ctx := context.Background()
	opts := smallOptions(7)
	var log bytes.Buffer
	l := Loader{Dir: t.TempDir(), Progress: &log, pollEvery: 10 * time.Millisecond}
	path, _ := l.Path(opts)
	if err := writeAtomic(path+".lock", nil); err != nil {
		t.Fatal(err)
	}
	type result struct {
		s   *Suite
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := l.Load(ctx, opts)
		got <- result{s, err}
	}()
	time.Sleep(50 * time.Millisecond)
	// The "other process" finishes: file first, then the lock goes.
	if err := writeAtomic(path, marshalSuite(smallSuite(t))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.s.Hash != smallSuite(t).Hash {
		t.Fatalf("Load = %v, %v", r.s, r.err)
	}
	if !strings.Contains(log.String(), "waiting") || strings.Contains(log.String(), "building suite") {
		t.Fatalf("log %q: want a wait and no build", log.String())
	}
}

func TestCacheIgnoresStaleLock(t *testing.T) {
	// A lock left by a crashed builder (older than lockStale) is ignored.
	ctx := context.Background()
	opts := smallOptions(7)
	var log bytes.Buffer
	l := Loader{Dir: t.TempDir(), Progress: &log, pollEvery: 10 * time.Millisecond}
	path, _ := l.Path(opts)
	lock := path + ".lock"
	if err := writeAtomic(lock, nil); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * lockStale)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	s, err := l.Load(ctx, opts)
	if err != nil || s.Hash != smallSuite(t).Hash {
		t.Fatalf("Load = %v, %v", s, err)
	}
	if !strings.Contains(log.String(), "building suite") || strings.Contains(log.String(), "waiting") {
		t.Fatalf("log %q: want a build without waiting", log.String())
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatalf("lock left behind: %v", err)
	}
}

func TestCacheBuilderGone(t *testing.T) {
	// The builder released its lock without writing a file (it failed):
	// the waiting loader builds the suite itself.
	ctx := context.Background()
	opts := smallOptions(7)
	var log bytes.Buffer
	l := Loader{Dir: t.TempDir(), Progress: &log, pollEvery: 10 * time.Millisecond}
	path, _ := l.Path(opts)
	if err := writeAtomic(path+".lock", nil); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		os.Remove(path + ".lock")
	}()
	s, err := l.Load(ctx, opts)
	if err != nil || s.Hash != smallSuite(t).Hash {
		t.Fatalf("Load = %v, %v", s, err)
	}
	if !strings.Contains(log.String(), "waiting") || !strings.Contains(log.String(), "building suite") {
		t.Fatalf("log %q: want a wait, then a build", log.String())
	}
}

func TestCacheLockKeptFresh(t *testing.T) {
	// The holder of a build lock touches it while it builds, so a build
	// longer than lockStale is not taken for a crashed one; released, the
	// lock is gone.
	path := filepath.Join(t.TempDir(), "suite", "x.bin")
	release, held := acquireBuildLockTouching(path, 10*time.Millisecond)
	if !held {
		t.Fatal("lock not held")
	}
	lock := path + ".lock"
	old := time.Now().Add(-2 * lockStale)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	if !lockIsStale(lock) {
		t.Fatal("a lock 2×lockStale old is not stale")
	}
	deadline := time.Now().Add(5 * time.Second)
	for lockIsStale(lock) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if lockIsStale(lock) {
		t.Fatal("the holder did not touch its lock")
	}
	if _, held := acquireBuildLock(path); held {
		t.Fatal("a second holder got the touched lock")
	}
	release()
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatalf("lock left behind: %v", err)
	}
}
