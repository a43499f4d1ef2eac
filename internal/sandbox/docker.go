package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/executor"
)

// Docker runs each execution in a fresh container of a FROM-scratch image
// that holds only the static executor binary. What it enforces:
//
//   - no network (network mode none, networking disabled), read-only root
//     filesystem, all capabilities dropped, no-new-privileges, user 65534;
//   - memory: Limits.MemoryBytes for the cgroup, with swap equal to it (no
//     swap); an OOM kill is classified as memory. The executor's Go soft
//     limit is set to 90% of it;
//   - CPUs: NanoCPUs (a CFS quota), fractions allowed; GOMAXPROCS=ceil;
//   - processes: PidsLimit (threads count); inside, the executor also
//     forbids itself to create processes (seccomp) and caps its threads;
//   - deadline: the executor stops itself at the deadline, measured on its
//     own clock from when it has read its job (executor.Reporter), so the
//     container's start-up does not count, exactly as in the process
//     sandbox; as a backstop the container is killed (SIGKILL) a little
//     past the deadline (killAfter, from the container's start);
//   - the container (named "wmrl-" and a random suffix) is removed after
//     every execution, on every path, also when its creation seemed to
//     fail (the engine may have made it before its answer was lost). A
//     removal that fails (the engine unreachable) is retried in the
//     background with backoff, and at once when the engine answers again,
//     for up to removeRetryFor; one that a crashed worker leaked carries
//     LabelSandbox and LabelDeadline and is removed by Cleanup.
//
// Everything that goes wrong with the engine (unreachable, refusing a
// container, a stream or a wait cut short) is an error, never a verdict.
//
// The job goes in on the container's stdin (attached), the result line comes
// out on stdout; the log driver is none, so nothing is kept on disk.
//
// CPU seconds: on a normal exit, the larger of the executor's own rusage and
// the last cgroup sample of the container's stats stream; at the deadline,
// a one-shot stats read just before the kill; after a crash or OOM kill, the
// last stats sample (a lower bound: the engine samples about once a second).
type Docker struct {
	cli   *client.Client
	image string
	owner string // LabelOwner of this sandbox's containers
	// binary is the executor the image holds, to rebuild it if it goes.
	binary  []byte
	rebuild sync.Mutex
	// KillGrace bounds how long Execute waits for a killed container to be
	// reported dead and for its output to drain.
	KillGrace time.Duration

	// Containers whose removal failed, retried in the background.
	mu       sync.Mutex
	pending  map[string]time.Time // id: when to give up on it
	sweeping bool
	closed   bool
	kick     chan struct{}
	bgCtx    context.Context
	bgStop   context.CancelFunc
	bg       sync.WaitGroup
}

var _ Sandbox = (*Docker)(nil)

// DockerOption configures NewDocker.
type DockerOption func(*dockerOptions)

type dockerOptions struct {
	host string
}

// WithDockerHost connects to the engine at host ("unix:///path/docker.sock",
// "tcp://host:2375") instead of the environment's DOCKER_HOST.
func WithDockerHost(host string) DockerOption {
	return func(o *dockerOptions) { o.host = host }
}

// NewDocker connects to the Docker engine of the environment (DOCKER_HOST
// etc.) or of WithDockerHost, negotiating the API version, and makes sure
// the executor image for the binary at executorBinary exists, building it
// locally if needed.
func NewDocker(ctx context.Context, executorBinary string, opts ...DockerOption) (*Docker, error) {
	var o dockerOptions
	for _, opt := range opts {
		opt(&o)
	}
	copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if o.host != "" {
		copts = append(copts, client.WithHost(o.host))
	}
	cli, err := client.NewClientWithOpts(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker engine: %w", err)
	}
	bin, err := os.ReadFile(executorBinary)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("read executor binary: %w", err)
	}
	image, err := ensureImage(ctx, cli, bin)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &Docker{cli: cli, image: image, binary: bin, owner: newOwner(), KillGrace: 5 * time.Second}, nil
}

// create creates a container, rebuilding the image once if it has gone
// (pruned while the sandbox was running). When it fails, the engine may
// still have made the container before its answer was lost (an outage): it
// is removed by name, now or in the background.
func (d *Docker) create(ctx context.Context, cfg *container.Config, hc *container.HostConfig) (string, error) {
	name := newContainerName()
	id, err := d.createNamed(ctx, cfg, hc, name)
	if err != nil {
		d.remove(ctx, name)
	}
	return id, err
}

// newContainerName is a random name for a container ("wmrl-" and 32 hex
// digits), by which it can be removed without knowing its id.
func newContainerName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "wmrl-" + hex.EncodeToString(b[:])
}

func (d *Docker) createNamed(ctx context.Context, cfg *container.Config, hc *container.HostConfig, name string) (string, error) {
	c, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err == nil {
		return c.ID, nil
	}
	if !cerrdefs.IsNotFound(err) || len(d.binary) == 0 {
		return "", fmt.Errorf("create container: %w", err)
	}
	d.rebuild.Lock()
	_, berr := ensureImage(ctx, d.cli, d.binary)
	d.rebuild.Unlock()
	if berr != nil {
		return "", fmt.Errorf("create container: %w; rebuild image: %w", err, berr)
	}
	c, err = d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return "", fmt.Errorf("create container after rebuilding its image: %w", err)
	}
	return c.ID, nil
}

// newOwner names one Docker sandbox: host, process and a random suffix.
func newOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Owner is the LabelOwner value of this sandbox's containers.
func (d *Docker) Owner() string { return d.owner }

// PruneImages removes the executor images (LabelExecutor) other than this
// sandbox's and those named in keep (image names or ids), and returns how
// many it removed. An image that a container still uses (the engine refuses
// with a conflict), or that someone else removed meanwhile, is skipped.
// Only its test calls it: the worker runs Cleanup, not PruneImages, when it
// starts, so the images of earlier executor builds stay until removed by
// hand. A sandbox whose image was pruned rebuilds it at its next execution
// (create).
func (d *Docker) PruneImages(ctx context.Context, keep ...string) (int, error) {
	list, err := d.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelExecutor))})
	if err != nil {
		return 0, fmt.Errorf("list executor images: %w", err)
	}
	spare := map[string]bool{}
	for _, name := range append([]string{d.image}, keep...) {
		im, err := d.cli.ImageInspect(ctx, name)
		switch {
		case err == nil:
			spare[im.ID] = true
		case !cerrdefs.IsNotFound(err):
			return 0, fmt.Errorf("inspect image %s: %w", name, err)
		}
	}
	removed := 0
	for _, im := range list {
		if spare[im.ID] {
			continue
		}
		_, err := d.cli.ImageRemove(ctx, im.ID, image.RemoveOptions{PruneChildren: true})
		switch {
		case err == nil:
			removed++
		case cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err):
		default:
			return removed, fmt.Errorf("remove image %s: %w", im.ID, err)
		}
	}
	return removed, nil
}

// Image is the executor image this sandbox runs.
func (d *Docker) Image() string { return d.image }

// Client is the engine client, for callers that inspect what the sandbox did.
func (d *Docker) Client() *client.Client { return d.cli }

// Close stops the background removals, tries once more to remove the
// containers still pending (those left are for Cleanup), and releases the
// engine connection.
func (d *Docker) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	if d.bgStop != nil {
		d.bgStop()
	}
	d.mu.Unlock()
	d.bg.Wait()
	d.mu.Lock()
	ids := make([]string, 0, len(d.pending))
	for id := range d.pending {
		ids = append(ids, id)
	}
	d.pending = nil
	d.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		cancel()
	}
	return d.cli.Close()
}

// Preflight checks l against the engine: it answers, has at least l.CPUs
// CPUs and l.MemoryBytes of memory and can enforce the limits (memory, CPU
// quota and pids cgroups); the executor image exists or is built; and the
// engine accepts a container with these limits (created, never started,
// and removed).
func (d *Docker) Preflight(ctx context.Context, l Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	info, err := d.cli.Info(ctx)
	if err != nil {
		return fmt.Errorf("docker engine: %w", err)
	}
	errs := EngineLimits(info, l)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(d.binary) > 0 {
		d.rebuild.Lock()
		_, err = ensureImage(ctx, d.cli, d.binary)
		d.rebuild.Unlock()
	} else if _, err = d.cli.ImageInspect(ctx, d.image); err != nil {
		err = fmt.Errorf("inspect image %s: %w", d.image, err)
	}
	if err != nil {
		return fmt.Errorf("docker sandbox: %w", err)
	}
	cfg, hc := d.containerConfig(l)
	id, err := d.create(ctx, cfg, hc)
	if err != nil {
		return fmt.Errorf("docker sandbox: trial container: %w", err)
	}
	d.remove(ctx, id)
	return nil
}

// containerConfig is the container of one execution under lim.
func (d *Docker) containerConfig(lim Limits) (*container.Config, *container.HostConfig) {
	procs := math.Ceil(lim.CPUs)
	setup := executor.Setup{
		SoftMemoryBytes: lim.MemoryBytes / 10 * 9,
		CPUSeconds:      int64(math.Ceil(lim.Deadline.Seconds()*procs)) + 1,
		NoFiles:         true,
		NoSpawn:         true,
		MaxThreads:      int(lim.Pids),
		Deadline:        lim.Deadline,
	}
	pids := lim.Pids
	cfg := &container.Config{
		Image:           d.image,
		Cmd:             setup.Args(),
		User:            fmt.Sprintf("%d:%d", NobodyID, NobodyID),
		Env:             []string{"GOMAXPROCS=" + strconv.Itoa(int(procs))},
		WorkingDir:      "/",
		AttachStdin:     true,
		AttachStdout:    true,
		AttachStderr:    true,
		OpenStdin:       true,
		StdinOnce:       true,
		NetworkDisabled: true,
		Labels: map[string]string{
			LabelSandbox: "1",
			LabelOwner:   d.owner,
			LabelDeadline: strconv.FormatInt(
				time.Now().Add(killAfter(lim)+d.KillGrace+removeGrace).Unix(), 10),
		},
	}
	hc := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		LogConfig:      container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory:     lim.MemoryBytes,
			MemorySwap: lim.MemoryBytes,
			NanoCPUs:   int64(lim.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	return cfg, hc
}

// Execute runs one job in a new container and removes it afterwards.
func (d *Docker) Execute(ctx context.Context, req Request) (executor.Result, error) {
	lim := req.Limits
	if err := lim.Check(); err != nil {
		return executor.Result{}, fmt.Errorf("docker sandbox: %w", err)
	}
	cfg, hc := d.containerConfig(lim)
	id, err := d.create(ctx, cfg, hc)
	if err != nil {
		return executor.Result{}, err
	}
	// The engine answers: containers whose removal failed can go now.
	d.kickRemovals()
	defer d.remove(ctx, id)

	// Everything below talks to this container only; it ends with it.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hj, err := d.cli.ContainerAttach(cctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return executor.Result{}, fmt.Errorf("attach container: %w", err)
	}
	defer hj.Close()
	waitCh, waitErrCh := d.cli.ContainerWait(cctx, id, container.WaitConditionNextExit)

	if err := d.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return executor.Result{}, fmt.Errorf("start container: %w", err)
	}
	timer := time.NewTimer(killAfter(lim))
	defer timer.Stop()

	go func() {
		// A container that never reads its stdin makes this fail; that is
		// its business, seen in its output.
		_, _ = io.Copy(hj.Conn, bytes.NewReader(req.Job))
		_ = hj.CloseWrite()
	}()
	stdout, stderr := newCapped(maxStdout), newCapped(maxStderr)
	outDone := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
		outDone <- err
	}()
	var sampledCPU atomic.Uint64 // nanoseconds, from the stats stream
	go d.sampleCPU(cctx, id, &sampledCPU)

	e := exit{stdout: stdout, stderr: stderr}
	var killCPU float64
	select {
	case w := <-waitCh:
		e.code = int(w.StatusCode)
	case err := <-waitErrCh:
		return executor.Result{}, fmt.Errorf("wait container: %w", err)
	case <-ctx.Done():
		return executor.Result{}, fmt.Errorf("docker sandbox: %w", ctx.Err())
	case <-timer.C:
		e.timedOut = true
		killCPU = d.oneShotCPU(ctx, id)
		if err := d.cli.ContainerKill(ctx, id, "KILL"); err != nil {
			// It may have exited on its own just now; then its own
			// result stands, as in the process sandbox.
			info, ierr := d.cli.ContainerInspect(ctx, id)
			if ierr != nil || info.State == nil || info.State.Running {
				return executor.Result{}, fmt.Errorf("kill container at deadline: %w", err)
			}
			e.timedOut = false
		}
		select {
		case w := <-waitCh:
			e.code = int(w.StatusCode)
		case err := <-waitErrCh:
			return executor.Result{}, fmt.Errorf("wait killed container: %w", err)
		case <-time.After(d.KillGrace):
			return executor.Result{}, fmt.Errorf("container %s still running %v after kill", id, d.KillGrace)
		case <-ctx.Done():
			return executor.Result{}, fmt.Errorf("docker sandbox: %w", ctx.Err())
		}
	}
	select {
	case err := <-outDone:
		e.cut = err != nil
	case <-time.After(d.KillGrace):
		// The output never closed: cut it; what came may be incomplete.
		hj.Close()
		<-outDone
		e.cut = true
	}

	info, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return executor.Result{}, fmt.Errorf("inspect container: %w", err)
	}
	wall := killAfter(lim).Seconds()
	if st := info.State; st != nil {
		e.code = st.ExitCode
		e.oomKilled = st.OOMKilled
		started, err1 := time.Parse(time.RFC3339Nano, st.StartedAt)
		finished, err2 := time.Parse(time.RFC3339Nano, st.FinishedAt)
		if err1 == nil && err2 == nil && finished.After(started) {
			wall = finished.Sub(started).Seconds()
		}
	}
	if e.code > 128 && !e.timedOut {
		e.signal = "signal " + strconv.Itoa(e.code-128)
		// Nobody in the sandbox sends SIGKILL but the kernel's OOM killer;
		// cgroup v1 does not always report OOMKilled.
		e.oomKilled = e.oomKilled || e.code == 137
	}
	if err := rejected(e); err != nil {
		return executor.Result{}, err
	}
	if err := incomplete(e); err != nil {
		return executor.Result{}, fmt.Errorf("docker sandbox: container %.12s: %w", id, err)
	}
	res, own := classify(e)
	if !own {
		res.WallSeconds = wall
	}
	cpu := float64(sampledCPU.Load()) / 1e9
	switch {
	case e.timedOut:
		cpu = math.Max(cpu, killCPU)
	case e.code == 0:
		cpu = math.Max(cpu, res.CPUSeconds) // the executor's own report
	}
	res.CPUSeconds = cpu
	return res, nil
}

// removeGrace bounds one attempt to remove a finished container.
const removeGrace = 30 * time.Second

// Background removal of containers whose removal failed: retried with
// backoff from removeBackoff up to maxRemoveBackoff, and at once when an
// execution finds the engine answering, for up to removeRetryFor; after
// that a container is left to Cleanup.
const (
	removeBackoff    = 500 * time.Millisecond
	maxRemoveBackoff = 10 * time.Second
	removeRetryFor   = 15 * time.Minute
)

// remove force-removes a container (by id or name), also when ctx is
// already cancelled. A failure hands it to the background removal.
func (d *Docker) remove(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeGrace)
	defer cancel()
	err := d.cli.ContainerRemove(rctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !isGone(err) {
		d.retryRemove(id)
	}
}

// retryRemove queues id for the background removal, starting it if needed.
func (d *Docker) retryRemove(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return // Close has made its last attempt: Cleanup's now
	}
	if d.pending == nil {
		d.pending = map[string]time.Time{}
		d.kick = make(chan struct{}, 1)
		d.bgCtx, d.bgStop = context.WithCancel(context.Background())
	}
	d.pending[id] = time.Now().Add(removeRetryFor)
	if !d.sweeping {
		d.sweeping = true
		d.bg.Add(1)
		go d.sweep(d.bgCtx, d.kick)
	}
}

// kickRemovals makes the background removal try again now.
func (d *Docker) kickRemovals() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sweeping {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// Removals returns how many containers wait for their background removal.
func (d *Docker) Removals() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending)
}

// sweep removes the pending containers until none is left or ctx ends.
func (d *Docker) sweep(ctx context.Context, kick <-chan struct{}) {
	defer d.bg.Done()
	backoff := removeBackoff
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			d.mu.Lock()
			d.sweeping = false
			d.mu.Unlock()
			return
		case <-kick:
		case <-t.C:
		}
		t.Stop()
		d.mu.Lock()
		ids := make(map[string]time.Time, len(d.pending))
		for id, giveUp := range d.pending {
			ids[id] = giveUp
		}
		d.mu.Unlock()
		removed := false
		for id, giveUp := range ids {
			rctx, cancel := context.WithTimeout(ctx, removeGrace)
			err := d.cli.ContainerRemove(rctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			cancel()
			done := err == nil || isGone(err)
			removed = removed || done
			if done || time.Now().After(giveUp) {
				d.mu.Lock()
				delete(d.pending, id)
				d.mu.Unlock()
			}
		}
		d.mu.Lock()
		if len(d.pending) == 0 || d.closed {
			d.sweeping = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		if removed {
			backoff = removeBackoff
		} else {
			backoff = min(2*backoff, maxRemoveBackoff)
		}
	}
}

// statsCPU is the part of a stats message the sandbox reads.
type statsCPU struct {
	CPUStats struct {
		CPUUsage struct {
			TotalUsage uint64 `json:"total_usage"`
		} `json:"cpu_usage"`
	} `json:"cpu_stats"`
}

// sampleCPU follows the container's stats stream, keeping the latest
// cumulative CPU time (ns) in into, until the stream or ctx ends.
func (d *Docker) sampleCPU(ctx context.Context, id string, into *atomic.Uint64) {
	resp, err := d.cli.ContainerStats(ctx, id, true)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var s statsCPU
		if err := dec.Decode(&s); err != nil {
			return
		}
		if u := s.CPUStats.CPUUsage.TotalUsage; u > into.Load() {
			into.Store(u)
		}
	}
}

// oneShotCPU reads the running container's cumulative CPU time now, or 0.
func (d *Docker) oneShotCPU(ctx context.Context, id string) float64 {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := d.cli.ContainerStatsOneShot(sctx, id)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var s statsCPU
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return 0
	}
	return float64(s.CPUStats.CPUUsage.TotalUsage) / 1e9
}

// Cleanup removes execution containers leaked by crashed workers: every
// container labelled LabelSandbox whose LabelDeadline has passed (a live
// worker kills and removes its container by then) or is unreadable.
// Containers of executions still in progress on other workers, whatever
// their state, are left alone. It returns how many it removed. Call it
// when a worker starts.
func (d *Docker) Cleanup(ctx context.Context) (int, error) {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelSandbox+"=1")),
	})
	if err != nil {
		return 0, fmt.Errorf("list sandbox containers: %w", err)
	}
	now := time.Now().Unix()
	removed := 0
	var errs []error
	for _, c := range list {
		deadline, err := strconv.ParseInt(c.Labels[LabelDeadline], 10, 64)
		if err == nil && deadline >= now {
			continue
		}
		if err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// isGone reports whether err says the container no longer exists.
func isGone(err error) bool {
	return cerrdefs.IsNotFound(err)
}

// EngineLimits checks limits l against what the engine described by info
// can enforce: its CPUs and memory (a *backend.LimitError naming the
// run-config field), and the cgroup controllers that enforce memory, CPU
// and process limits.
func EngineLimits(info system.Info, l backend.Limits) []error {
	var errs []error
	if l.CPUs > float64(info.NCPU) {
		errs = append(errs, backend.CPUsError(l.CPUs, "exceeds the %d CPUs of the Docker engine", info.NCPU))
	}
	if l.MemoryBytes > info.MemTotal {
		errs = append(errs, backend.MemoryError(l.MemoryBytes, "exceeds the %d MiB of the Docker engine", info.MemTotal>>20))
	}
	if !info.MemoryLimit {
		errs = append(errs, errors.New("docker engine: cannot limit memory (no memory cgroup)"))
	}
	if !info.CPUCfsQuota {
		errs = append(errs, errors.New("docker engine: cannot limit CPUs (no CFS quota)"))
	}
	if !info.PidsLimit {
		errs = append(errs, errors.New("docker engine: cannot limit processes (no pids cgroup)"))
	}
	return errs
}
