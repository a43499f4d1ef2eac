package sandbox

import (
	"bytes"
	"context"
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
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wmrl/wmrl/internal/dockerrun"
	"github.com/wmrl/wmrl/internal/executor"
)

// Docker runs each execution in a fresh container of a FROM-scratch image
// that holds only the static executor binary; the container's lock-down,
// its creation, removal and sweep are package dockerrun's, shared with the
// Python sandbox. What it enforces:
//
//   - no network (network mode none, networking disabled), read-only root
//     filesystem, all capabilities dropped, no-new-privileges, user 65534,
//     core dumps off;
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
	eng   *dockerrun.Engine
	cli   *client.Client // eng's
	image string
	// binary is the executor the image holds, to rebuild it if it goes.
	binary  []byte
	rebuild sync.Mutex
	// KillGrace bounds how long Execute waits for a killed container to be
	// reported dead and for its output to drain.
	KillGrace time.Duration
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
	eng, err := dockerrun.Connect(ctx, o.host, "")
	if err != nil {
		return nil, err
	}
	cli := eng.Client()
	bin, err := os.ReadFile(executorBinary)
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("read executor binary: %w", err)
	}
	image, err := ensureImage(ctx, cli, bin)
	if err != nil {
		eng.Close()
		return nil, err
	}
	return &Docker{eng: eng, cli: cli, image: image, binary: bin, KillGrace: 5 * time.Second}, nil
}

// create creates a container (dockerrun.Engine.Create), rebuilding the
// image once if it has gone (pruned while the sandbox was running).
func (d *Docker) create(ctx context.Context, cfg *container.Config, hc *container.HostConfig) (string, error) {
	id, err := d.eng.Create(ctx, "wmrl-", cfg, hc)
	if err == nil || !cerrdefs.IsNotFound(err) || len(d.binary) == 0 {
		return id, err
	}
	d.rebuild.Lock()
	_, berr := ensureImage(ctx, d.cli, d.binary)
	d.rebuild.Unlock()
	if berr != nil {
		return "", fmt.Errorf("%w; rebuild image: %w", err, berr)
	}
	id, err = d.eng.Create(ctx, "wmrl-", cfg, hc)
	if err != nil {
		return "", fmt.Errorf("after rebuilding its image: %w", err)
	}
	return id, nil
}

// Owner is the LabelOwner value of this sandbox's containers.
func (d *Docker) Owner() string { return d.eng.Owner() }

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
func (d *Docker) Close() error { return d.eng.Close() }

// Removals returns how many containers wait for their background removal.
func (d *Docker) Removals() int { return d.eng.Removals() }

// Preflight checks l against the engine: it answers, has at least l.CPUs
// CPUs and l.MemoryBytes of memory and can enforce the limits (memory, CPU
// quota and pids cgroups); the executor image exists or is built; and the
// engine accepts a container with these limits (created, never started,
// and removed).
func (d *Docker) Preflight(ctx context.Context, l Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	if errs := d.eng.CheckLimits(ctx, l); len(errs) > 0 {
		return errors.Join(errs...)
	}
	var err error
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
	d.eng.Remove(ctx, id)
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
	return dockerrun.Spec{
		Image:      d.image,
		Cmd:        setup.Args(),
		Env:        []string{"GOMAXPROCS=" + strconv.Itoa(int(procs))},
		WorkingDir: "/",
		Limits:     lim,
		Owner:      d.eng.Owner(),
		RemoveBy:   time.Now().Add(killAfter(lim) + d.KillGrace + dockerrun.RemoveGrace),
		Stdin:      true,
	}.Config()
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
	defer d.eng.Remove(ctx, id)

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
	stdout, stderr := dockerrun.NewCapped(maxStdout), dockerrun.NewCapped(maxStderr)
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
		if st, err := d.eng.Stats(ctx, id, 2*time.Second); err == nil {
			killCPU = float64(st.CPUStats.CPUUsage.TotalUsage) / 1e9
		}
		// It may have exited on its own just now; then its own result
		// stands, as in the process sandbox.
		exited, err := d.eng.Kill(ctx, id, d.KillGrace)
		if err != nil {
			return executor.Result{}, fmt.Errorf("at the deadline: %w", err)
		}
		e.timedOut = !exited
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

// Cleanup removes execution containers leaked by crashed workers: every
// container labelled LabelSandbox whose LabelDeadline has passed (a live
// worker kills and removes its container by then) or is unreadable.
// Containers of executions still in progress on other workers, whatever
// their state, are left alone. It returns how many it removed. Call it
// when a worker starts.
func (d *Docker) Cleanup(ctx context.Context) (int, error) { return d.eng.Sweep(ctx) }
