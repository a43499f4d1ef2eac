package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/wmrl/wmrl/internal/deployenv"
)

// CacheEnv names the environment variable that overrides the cache
// directory.
const CacheEnv = deployenv.EnvCache

// CacheDir returns the cache directory (deployenv): $WMRL_CACHE when set,
// otherwise wmrl under the user's cache directory (os.UserCacheDir).
func CacheDir() (string, error) {
	if d := deployenv.Read().Cache; d != "" {
		return d, nil
	}
	return "", fmt.Errorf("cache dir: no user cache directory (set %s)", CacheEnv)
}

// Loader loads suites from an on-disk cache and builds them on a miss.
type Loader struct {
	// Dir is the cache directory; "" means CacheDir().
	Dir string
	// Progress receives notes while a suite is being built; nil is silent.
	Progress io.Writer
	// Workers is the number of goroutines building tasks; 0 means
	// GOMAXPROCS.
	Workers int

	pollEvery time.Duration // how often to look for another builder's file; 0: 500ms
}

// Load returns the default-sized suite for a suite seed, from the default
// cache directory, building and caching it on the first call.
func Load(ctx context.Context, suiteSeed uint64) (*Suite, error) {
	return Loader{}.Load(ctx, DefaultOptions(suiteSeed))
}

// Path returns the cache file of the suite built from opts.
func (l Loader) Path(opts Options) (string, error) {
	dir := l.Dir
	if dir == "" {
		var err error
		if dir, err = CacheDir(); err != nil {
			return "", err
		}
	}
	var e encoder
	e.u64(Version)
	e.u64(opts.Seed)
	for _, v := range []int{opts.Train, opts.HeldOut, opts.MinRows, opts.MaxRows, opts.MaxFeatures, opts.PanelSize} {
		e.int(v)
	}
	sum := sha256.Sum256(e.buf)
	name := fmt.Sprintf("suite-v%d-s%d-%s.bin", Version, opts.Seed, hex.EncodeToString(sum[:6]))
	return filepath.Join(dir, "suite", name), nil
}

// Load returns the suite built from opts. A cached copy is used when its
// hash verifies, its options match and the engine still reproduces the
// first task's best reference score; otherwise the suite is built (on the
// first use this takes a while) and written atomically: to a temporary file
// in the same directory, then renamed, so concurrent workers never read a
// partial file. While one process builds, it holds a lock file next to the
// cache file and other loaders wait for its result instead of building the
// same suite (a lock older than 10 minutes is ignored). Every worker loading
// the same options gets the same suite and the same Hash.
func (l Loader) Load(ctx context.Context, opts Options) (*Suite, error) {
	return l.load(ctx, opts, engineScore)
}

func (l Loader) load(ctx context.Context, opts Options, score scoreFunc) (*Suite, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("suite options: %w", err)
	}
	path, err := l.Path(opts)
	if err != nil {
		return nil, err
	}
	s, err := readCached(ctx, path, opts, score)
	if err == nil {
		return s, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("load suite: %w", ctx.Err())
	}
	release, held := acquireBuildLock(path)
	if !held {
		// Another process is building this suite: wait for its file
		// rather than spend the same minute of CPU.
		l.note("wmrl: another process is building %s; waiting for it\n", path)
		if s, err = l.waitForBuilder(ctx, path, opts, score); err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("load suite: %w", ctx.Err())
		}
		release, _ = acquireBuildLock(path)
	}
	defer release()
	if errors.Is(err, fs.ErrNotExist) {
		l.note("wmrl: building suite (seed %d, %d tasks); this takes a while the first time, then it is cached in %s\n",
			opts.Seed, opts.Train+opts.HeldOut, path)
	} else {
		l.note("wmrl: cached suite %s is unusable (%v); rebuilding\n", path, err)
	}
	workers := l.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	step := max(1, (opts.Train+opts.HeldOut)/8)
	s, err = generate(ctx, opts, score, workers, func(done, total int) {
		if done%step == 0 || done == total {
			l.note("wmrl: suite %d/%d tasks (%.0fs)\n", done, total, time.Since(start).Seconds())
		}
	})
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(path, marshalSuite(s)); err != nil {
		return nil, fmt.Errorf("cache suite: %w", err)
	}
	return s, nil
}

func (l Loader) note(format string, args ...any) {
	if l.Progress != nil {
		fmt.Fprintf(l.Progress, format, args...)
	}
}

// readCached reads and verifies a cached suite.
func readCached(ctx context.Context, path string, opts Options, score scoreFunc) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := unmarshalSuite(b)
	if err != nil {
		return nil, err
	}
	if s.Options != opts {
		return nil, fmt.Errorf("%w: built for options %+v, want %+v", errCorrupt, s.Options, opts)
	}
	// A cache written by an older engine would carry stale leaderboards:
	// refit the first task's best reference program and compare.
	t := s.Tasks[0]
	best := panelIndex(t.Kind, opts.PanelSize, t.ExampleProgram)
	if best < 0 {
		return nil, fmt.Errorf("%w: example program of %s is not in the panel", errCorrupt, t.ID)
	}
	v, err := score(ctx, t.ExampleProgram, t.Data, panelSeed(t.Seed, best))
	if err != nil {
		return nil, fmt.Errorf("engine check on %s: %w", t.ID, err)
	}
	if math.Abs(v-t.Leaderboard[0]) > 1e-9*math.Max(1, math.Abs(v)) {
		return nil, fmt.Errorf("engine check on %s: best reference scores %g now, %g when cached", t.ID, v, t.Leaderboard[0])
	}
	return s, nil
}

// lockStale is the age after which a build lock is taken to be left over
// by a crashed process and ignored. Its holder touches it every lockTouch
// while it builds, so a build of any length keeps it fresh, and a builder
// killed in the middle (on a cache shared by several machines, the others
// wait for it) holds the others up for at most lockStale.
const (
	lockStale = time.Minute
	lockTouch = lockStale / 4
)

// acquireBuildLock creates path.lock exclusively. held is false when
// another process holds a fresh lock. When the lock cannot be created for
// any other reason the build goes ahead unlocked (held is true): the lock
// only saves work, correctness rests on the atomic rename.
func acquireBuildLock(path string) (release func(), held bool) {
	return acquireBuildLockTouching(path, lockTouch)
}

// acquireBuildLockTouching is acquireBuildLock, the lock touched every
// touch until released.
func acquireBuildLockTouching(path string, touch time.Duration) (release func(), held bool) {
	lock := path + ".lock"
	noop := func() {}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return noop, true
	}
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			stop, stopped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(stopped)
				t := time.NewTicker(touch)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case now := <-t.C:
						_ = os.Chtimes(lock, now, now)
					}
				}
			}()
			return func() {
				close(stop)
				<-stopped
				os.Remove(lock)
			}, true
		}
		if !errors.Is(err, fs.ErrExist) {
			return noop, true
		}
		if !lockIsStale(lock) {
			return noop, false
		}
		os.Remove(lock)
	}
	return noop, true
}

func lockIsStale(lock string) bool {
	fi, err := os.Stat(lock)
	return err == nil && time.Since(fi.ModTime()) > lockStale
}

// waitForBuilder polls for the suite file another process is building,
// until its lock disappears or goes stale. It returns the suite once it
// verifies, or the last error.
func (l Loader) waitForBuilder(ctx context.Context, path string, opts Options, score scoreFunc) (*Suite, error) {
	every := l.pollEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	lock := path + ".lock"
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(every):
		}
		_, statErr := os.Stat(lock)
		done := statErr != nil || lockIsStale(lock)
		s, err := readCached(ctx, path, opts, score)
		if err == nil || done {
			return s, err
		}
	}
}

// writeAtomic writes b to path through a temporary file and a rename.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".suite-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	// Readable by every worker of the machine, like any cache file.
	merr := f.Chmod(0o644)
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(merr, werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
