package pysandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/dockerrun"
	"github.com/wmrl/wmrl/internal/tasks"
)

// ImageRepository is the repository of the images deploy/pyimage.sh builds.
const ImageRepository = "wmrl-python"

// LabelKind is set to "python" on this package's containers (besides
// package sandbox's labels, which Sweep and sandbox.Docker.Cleanup read).
const LabelKind = "wmrl.sandbox.kind"

// Paths inside the container.
const (
	dirData       = "/data"
	dirCode       = "/code"
	dirWork       = "/work"
	solutionPath  = dirCode + "/solution.py"
	submissionIn  = dirWork + "/" + tasks.FileSubmission
	python        = "/usr/bin/python3"
	keeper        = "/bin/sleep"
	syntaxExit    = 3 // the compile check's exit code on a syntax error
	tokenBytes    = 16
	taskJSONName  = "task.json"
	solutionName  = "solution.py"
	descrFileName = tasks.FileDescription
)

// Defaults of Options.
const (
	DefaultWorkBytes   = 256 << 20
	DefaultTmpBytes    = 64 << 20
	DefaultOutputBytes = 1 << 20
	// MinOutputBytes is the least OutputBytes: the kept head and tail of
	// a stream hold what Feedback shows of it.
	MinOutputBytes         = 2 * (feedbackHeadBytes + feedbackTailBytes)
	DefaultSubmissionBytes = 64 << 20
	// MaxSourceBytes bounds a solution's source; a larger one is malformed.
	MaxSourceBytes = 1 << 20
)

// Timing of an execution around the solution's deadline.
const (
	// killGrace bounds the wait for a killed container to be seen dead.
	killGrace = 5 * time.Second
	// drainGrace is how long the output may stay open after the solution
	// ended (a background process holding it).
	drainGrace = 500 * time.Millisecond
	// keeperMargin is how long the keeper outlives the deadline: the time
	// to copy the submission out and remove the container.
	keeperMargin = 60 * time.Second
	pollEvery    = 25 * time.Millisecond
	slowPoll     = 500 * time.Millisecond
)

// Options configure a Sandbox. Zero values take the defaults.
type Options struct {
	// Image is the wmrl-python image to run (required), as printed by
	// deploy/pyimage.sh.
	Image string
	// Host is the engine's address ("unix:///var/run/docker.sock"); ""
	// uses the environment (DOCKER_HOST etc.).
	Host string
	// StagingDir is where each execution's /data and /code files are
	// staged on the host (removed afterwards); "" is os.TempDir(). It must
	// be on a file system the engine can bind-mount from.
	StagingDir string
	// WorkBytes and TmpBytes size the /work and /tmp tmpfs mounts.
	WorkBytes, TmpBytes int64
	// OutputBytes is how much of stdout and of stderr is kept, each: its
	// first and its last OutputBytes/2 bytes (at least MinOutputBytes).
	OutputBytes int
	// SubmissionBytes is the largest submission.csv copied out; a larger
	// one is no submission.
	SubmissionBytes int64
}

func (o *Options) defaults() error {
	if o.Image == "" {
		return errors.New("python sandbox: no image (deploy/pyimage.sh prints it)")
	}
	if o.StagingDir == "" {
		o.StagingDir = os.TempDir()
	}
	if o.WorkBytes <= 0 {
		o.WorkBytes = DefaultWorkBytes
	}
	if o.TmpBytes <= 0 {
		o.TmpBytes = DefaultTmpBytes
	}
	if o.OutputBytes <= 0 {
		o.OutputBytes = DefaultOutputBytes
	}
	o.OutputBytes = max(o.OutputBytes, MinOutputBytes)
	if o.SubmissionBytes <= 0 {
		o.SubmissionBytes = DefaultSubmissionBytes
	}
	return nil
}

// Sandbox runs Python solutions, each in its own container.
type Sandbox struct {
	eng  *dockerrun.Engine
	cli  *client.Client // eng's
	opts Options
}

// New connects to the Docker engine (negotiating the API version). It does
// not check the image: Preflight does.
func New(ctx context.Context, opts Options) (*Sandbox, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	eng, err := dockerrun.Connect(ctx, opts.Host, "py")
	if err != nil {
		return nil, err
	}
	return &Sandbox{eng: eng, cli: eng.Client(), opts: opts}, nil
}

// Close tries once more to remove the containers whose removal failed
// (those left are Sweep's) and releases the engine connection.
func (s *Sandbox) Close() error { return s.eng.Close() }

// Client is the engine client, for callers that inspect what the sandbox did.
func (s *Sandbox) Client() *client.Client { return s.cli }

// Owner is the dockerrun.LabelOwner value of this sandbox's containers.
func (s *Sandbox) Owner() string { return s.eng.Owner() }

// Image is the image this sandbox runs.
func (s *Sandbox) Image() string { return s.opts.Image }

// LatestImage returns the most recently created wmrl-python image the
// engine has, for callers not told which (tests, the reference panel).
func LatestImage(ctx context.Context, cli *client.Client) (string, error) {
	list, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", ImageRepository+":*"))})
	if err != nil {
		return "", fmt.Errorf("list %s images: %w", ImageRepository, err)
	}
	best, created := "", int64(math.MinInt64)
	for _, im := range list {
		for _, tag := range im.RepoTags {
			if strings.HasPrefix(tag, ImageRepository+":") && im.Created > created {
				best, created = tag, im.Created
			}
		}
	}
	if best == "" {
		return "", fmt.Errorf("no %s image: build it with deploy/pyimage.sh", ImageRepository)
	}
	return best, nil
}

// Minimums of the limits for a Python solution, above backend.Limits'
// static ones: python3 with numpy, pandas and scikit-learn imported needs
// about 120 MiB and a handful of threads.
const (
	MinMemoryBytes = 192 << 20
	MinPids        = 16
)

// Preflight checks l against the engine and the image: the limits are
// sane (Limits.Check) and fit a Python solution, the engine answers, has
// l.CPUs CPUs and l.MemoryBytes of memory and can enforce the limits, the
// image exists, and the engine accepts a container with these limits
// (created, never started, removed). A limit that cannot be met is a
// *backend.LimitError naming its run-config field.
func (s *Sandbox) Preflight(ctx context.Context, l backend.Limits) error {
	var errs []error
	if err := l.Check(); err != nil {
		errs = append(errs, err)
	} else {
		if l.MemoryBytes < MinMemoryBytes {
			errs = append(errs, backend.MemoryError(l.MemoryBytes, "is below the %d MiB python3 with scikit-learn needs", MinMemoryBytes>>20))
		}
		if l.Pids < MinPids {
			errs = append(errs, backend.PidsError(l.Pids, "is below the %d processes and threads python3 with numpy needs", MinPids))
		}
	}
	if lerrs := s.eng.CheckLimits(ctx, l); len(lerrs) > 0 {
		return errors.Join(append(errs, lerrs...)...)
	}
	if _, err := s.cli.ImageInspect(ctx, s.opts.Image); err != nil {
		errs = append(errs, fmt.Errorf("python sandbox: image %s: %w (build it with deploy/pyimage.sh)", s.opts.Image, err))
	}
	if st, err := os.Stat(s.opts.StagingDir); err != nil || !st.IsDir() {
		errs = append(errs, fmt.Errorf("python sandbox: staging directory %s: not a directory (%v)", s.opts.StagingDir, err))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	cfg, hc := s.containerConfig(l, nil, 0)
	id, err := s.create(ctx, cfg, hc)
	if err != nil {
		return fmt.Errorf("python sandbox: trial container: %w", err)
	}
	s.remove(ctx, id)
	return nil
}

// Sweep removes what crashed workers leaked: the sandbox containers
// (dockerrun.LabelSandbox) whose dockerrun.LabelDeadline has passed or is
// unreadable, and the staging directories (wmrl-py-*) in StagingDir older
// than the longest execution (staleStaging). Those of executions in
// progress are left alone. It returns how many containers it removed.
// Call it when a worker starts.
func (s *Sandbox) Sweep(ctx context.Context) (int, error) {
	staleErr := s.sweepStaging(time.Now().Add(-staleStaging))
	removed, err := s.eng.Sweep(ctx)
	return removed, errors.Join(err, staleErr)
}

// staleStaging is the age past which a staging directory is leaked: more
// than the longest deadline backend.Limits allows, and the margins.
const staleStaging = 25 * time.Hour

// sweepStaging removes the staging directories last changed before cutoff.
func (s *Sandbox) sweepStaging(cutoff time.Time) error {
	dirs, err := filepath.Glob(filepath.Join(s.opts.StagingDir, stagePrefix+"*"))
	if err != nil {
		return fmt.Errorf("sweep staging: %w", err)
	}
	var errs []error
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() && fi.ModTime().Before(cutoff) {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, fmt.Errorf("sweep staging: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Run is what one execution did, before grading.
type Run struct {
	// Container is the id of the (removed) container.
	Container string
	// SyntaxError is the compile check's message when the source does not
	// compile (the solution did not run); empty otherwise.
	SyntaxError string
	// ExitCode is the solution's exit code: 128+n when killed by signal n
	// (as the engine reports it); meaningless when TimedOut.
	ExitCode int
	// TimedOut: killed at the deadline. OOMKilled: killed for memory (the
	// engine's OOM event or flag, or a SIGKILL at the memory limit).
	TimedOut, OOMKilled bool
	// Stdout and Stderr are what was kept of each stream: all of it when
	// it holds at most Options.OutputBytes, otherwise its first and last
	// OutputBytes/2 bytes with a line between them saying how many bytes
	// were cut (dockerrun.HeadTail). StdoutBytes and StderrBytes count all
	// that was written.
	Stdout, Stderr           []byte
	StdoutBytes, StderrBytes int64
	// Submission is /work/submission.csv when the solution exited 0 and
	// left a regular file of at most Options.SubmissionBytes; otherwise
	// nil and NoSubmission says why.
	Submission   []byte
	NoSubmission string
	// CPUSeconds is the container's CPU time (cgroup); WallSeconds the
	// solution's, from its start to its end or kill.
	CPUSeconds, WallSeconds float64
}

// Run executes source as the solution of task t under l. A failure of the
// solution is in the Run; an error means the sandbox failed (or ctx ended)
// and nothing is known of the solution.
func (s *Sandbox) Run(ctx context.Context, t *tasks.Task, source string, l backend.Limits, seed uint64) (Run, error) {
	if err := l.Check(); err != nil {
		return Run{}, fmt.Errorf("python sandbox: %w", err)
	}
	stage, err := newStage(s.opts.StagingDir, t, source)
	if err != nil {
		return Run{}, err
	}
	defer stage.remove()

	cfg, hc := s.containerConfig(l, stage, seed)
	id, err := s.create(ctx, cfg, hc)
	if err != nil {
		return Run{}, err
	}
	defer s.remove(ctx, id)
	run := Run{Container: id}
	if err := s.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return run, fmt.Errorf("start container: %w", err)
	}

	rd, err := s.startReader(ctx, id, cfg.User)
	if err != nil {
		return run, err
	}
	defer rd.close()

	// The engine's OOM event is the sure sign of a memory kill (cgroup v1
	// does not set the container's OOMKilled flag when an exec is killed).
	var oom atomic.Bool
	ectx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	msgs, _ := s.cli.Events(ectx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)), filters.Arg("container", id), filters.Arg("event", string(events.ActionOOM)))})
	go func() {
		for range msgs {
			oom.Store(true)
		}
	}()

	token := randomHex(tokenBytes)
	ex, err := s.cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		User:         cfg.User,
		Env:          cfg.Env,
		WorkingDir:   dirWork,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{python, "-I", "-B", "-c", checker(token)},
	})
	if err != nil {
		return run, fmt.Errorf("create exec: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hj, err := s.cli.ContainerExecAttach(cctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return run, fmt.Errorf("start exec: %w", err)
	}
	defer hj.Close()
	start := time.Now()
	half := s.opts.OutputBytes / 2
	stdout := dockerrun.NewHeadTail(half, s.opts.OutputBytes-half)
	stderr := dockerrun.NewHeadTail(half, s.opts.OutputBytes-half)
	outDone := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
		outDone <- err
	}()

	deadline := time.NewTimer(l.Deadline)
	defer deadline.Stop()
	outClosed := false
	var end, closedAt time.Time
wait:
	for {
		// The output's end is the usual sign of the solution's: until
		// then, the exec is polled slowly, for a solution whose leftover
		// processes hold its output open.
		every := slowPoll
		if outClosed {
			every = pollEvery
		}
		poll := time.NewTimer(every)
		select {
		case <-ctx.Done():
			poll.Stop()
			return run, fmt.Errorf("python sandbox: %w", ctx.Err())
		case <-deadline.C:
			poll.Stop()
			end = time.Now()
			ins, ierr := s.cli.ContainerExecInspect(ctx, ex.ID)
			if ierr == nil && !ins.Running {
				run.ExitCode = ins.ExitCode // it ended just now: its own exit stands
				break wait
			}
			run.TimedOut = true
			run.CPUSeconds = s.cpuSeconds(ctx, id)
			if err := s.kill(ctx, id); err != nil {
				return run, err
			}
			break wait
		case err := <-outDone:
			poll.Stop()
			outDone = nil
			outClosed, closedAt = true, time.Now()
			if err != nil {
				return run, fmt.Errorf("read solution output: %w", err)
			}
		case <-poll.C:
			ins, err := s.cli.ContainerExecInspect(ctx, ex.ID)
			if err != nil {
				return run, fmt.Errorf("inspect exec: %w", err)
			}
			if !ins.Running {
				if ins.Pid == 0 {
					// Never started: the engine's failure, not the solution's.
					return run, fmt.Errorf("the solution's exec did not start (exit %d)", ins.ExitCode)
				}
				end = time.Now()
				if outClosed {
					end = closedAt // it ended with its output
				}
				run.ExitCode = ins.ExitCode
				break wait
			}
		}
	}
	run.WallSeconds = end.Sub(start).Seconds()
	if !outClosed {
		// A background process may hold the output open: drain briefly.
		select {
		case err := <-outDone:
			if err != nil && !run.TimedOut {
				return run, fmt.Errorf("read solution output: %w", err)
			}
		case <-time.After(drainGrace):
			hj.Close()
			<-outDone
		}
	}
	run.Stdout, run.StdoutBytes = stdout.Bytes(), stdout.Total()
	run.Stderr, run.StderrBytes = stderr.Bytes(), stderr.Total()
	if run.TimedOut {
		return run, nil
	}
	if run.ExitCode == syntaxExit {
		if msg, ok := strings.CutPrefix(string(run.Stderr), token+"\n"); ok {
			run.SyntaxError = strings.TrimSpace(msg)
			run.Stderr = []byte(msg)
			return run, nil
		}
	}
	info, err := s.cli.ContainerInspect(ctx, id)
	if err != nil {
		return run, fmt.Errorf("inspect container: %w", err)
	}
	stats := s.stats(ctx, id)
	run.CPUSeconds = float64(stats.CPUStats.CPUUsage.TotalUsage) / 1e9
	if run.ExitCode != 0 {
		// Killed for memory: the engine says so, or a SIGKILL (which only
		// the kernel or the solution itself sends) with the cgroup having
		// hit its limit.
		mem := stats.MemoryStats
		atLimit := mem.Failcnt > 0 || mem.Limit > 0 && float64(mem.MaxUsage) >= 0.98*float64(mem.Limit)
		run.OOMKilled = oom.Load() || info.State != nil && info.State.OOMKilled || run.ExitCode == 137 && atLimit
		return run, nil
	}
	if info.State == nil || !info.State.Running {
		// The solution killed the keeper: /work went with it.
		run.NoSubmission = "the container stopped with the solution (its first process was killed): /work is gone"
		return run, nil
	}
	run.Submission, run.NoSubmission, err = rd.read(ctx)
	return run, err
}

// kill kills the container and waits until the engine reports it stopped.
func (s *Sandbox) kill(ctx context.Context, id string) error {
	if _, err := s.eng.Kill(ctx, id, killGrace); err != nil {
		return fmt.Errorf("at the deadline: %w", err)
	}
	return nil
}

// stats reads the container's cgroup statistics now (zero on failure: they
// only inform).
func (s *Sandbox) stats(ctx context.Context, id string) container.StatsResponse {
	st, _ := s.eng.Stats(ctx, id, 5*time.Second)
	return st
}

func (s *Sandbox) cpuSeconds(ctx context.Context, id string) float64 {
	return float64(s.stats(ctx, id).CPUStats.CPUUsage.TotalUsage) / 1e9
}

// containerConfig is the container of one execution under l; stage is nil
// for Preflight's trial container.
func (s *Sandbox) containerConfig(l backend.Limits, st *stage, seed uint64) (*container.Config, *container.HostConfig) {
	threads := strconv.Itoa(int(math.Max(1, math.Ceil(l.CPUs))))
	life := l.Deadline + killGrace + keeperMargin
	spec := dockerrun.Spec{
		Image:      s.opts.Image,
		Entrypoint: []string{keeper},
		Cmd:        []string{strconv.FormatInt(int64(math.Ceil(life.Seconds())), 10)},
		WorkingDir: dirWork,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=" + dirWork,
			"LANG=C.UTF-8",
			"PYTHONDONTWRITEBYTECODE=1",
			"PYTHONHASHSEED=0",
			"PYTHONUNBUFFERED=1",
			"OMP_NUM_THREADS=" + threads,
			"OPENBLAS_NUM_THREADS=" + threads,
			"MKL_NUM_THREADS=" + threads,
			"WMRL_SEED=" + strconv.FormatUint(seed, 10),
		},
		Limits:   l,
		Owner:    s.eng.Owner(),
		RemoveBy: time.Now().Add(life + dockerrun.RemoveGrace),
		Labels:   map[string]string{LabelKind: "python"},
		Tmpfs:    map[string]int64{dirWork: s.opts.WorkBytes, "/tmp": s.opts.TmpBytes},
	}
	if st != nil {
		spec.Binds = st.binds()
	}
	return spec.Config()
}

// create creates a container (dockerrun.Engine.Create).
func (s *Sandbox) create(ctx context.Context, cfg *container.Config, hc *container.HostConfig) (string, error) {
	id, err := s.eng.Create(ctx, "wmrl-py-", cfg, hc)
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("%w (build the image with deploy/pyimage.sh)", err)
	}
	return id, err
}

// remove force-removes a container by id or name, also when ctx is
// cancelled; a failed removal is retried in the background, and one that
// still fails is Sweep's (its keeper stops it by itself).
func (s *Sandbox) remove(ctx context.Context, id string) { s.eng.Remove(ctx, id) }

// checker is the exec's program: it compiles the solution, and on a syntax
// error prints token and the error on stderr and exits syntaxExit;
// otherwise it replaces itself with the solution. The token is in its argv
// only, which execv replaces: the solution cannot print it.
func checker(token string) string {
	return fmt.Sprintf(`import os, sys
with open(%q, "rb") as f:
    src = f.read()
try:
    compile(src, %q, "exec", dont_inherit=True)
except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
    import traceback
    sys.stderr.write(%q + "\n" + "".join(traceback.format_exception_only(type(e), e)))
    sys.stderr.flush()
    os._exit(%d)
os.execv(%q, ["python3", %q])
`, solutionPath, solutionName, token, syntaxExit, python, solutionPath)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
