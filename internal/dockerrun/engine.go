package dockerrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/wmrl/wmrl/internal/backend"
)

// Engine is a connection to a Docker engine and the removals of the
// containers one sandbox made on it.
type Engine struct {
	cli   *client.Client
	owner string

	// Containers whose removal failed, retried in the background.
	mu       sync.Mutex
	pending  map[string]time.Time // id or name: when to give up on it
	sweeping bool
	closed   bool
	kick     chan struct{}
	bgCtx    context.Context
	bgStop   context.CancelFunc
	bg       sync.WaitGroup
}

// Removal timing: one attempt is bounded by RemoveGrace; a failed removal
// is retried with backoff from removeBackoff up to maxRemoveBackoff, and at
// once when a creation finds the engine answering, for up to
// removeRetryFor; after that the container is left to Sweep.
const (
	RemoveGrace      = 30 * time.Second
	removeBackoff    = 500 * time.Millisecond
	maxRemoveBackoff = 10 * time.Second
	removeRetryFor   = 15 * time.Minute
)

// Connect connects to the engine of the environment (DOCKER_HOST etc.), or
// at host when it is not "" ("unix:///path/docker.sock",
// "tcp://host:2375"), negotiating the API version, and pings it. kind, if
// not "", goes into the owner's name ("py").
func Connect(ctx context.Context, host, kind string) (*Engine, error) {
	copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		copts = append(copts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker engine: %w", err)
	}
	return New(cli, NewOwner(kind)), nil
}

// New wraps a client already made, for the containers of owner.
func New(cli *client.Client, owner string) *Engine {
	return &Engine{cli: cli, owner: owner}
}

// NewOwner names one sandbox: host, process, kind (if any) and a random
// suffix.
func NewOwner(kind string) string {
	host, _ := os.Hostname()
	if kind != "" {
		kind += "-"
	}
	return fmt.Sprintf("%s-%d-%s%s", host, os.Getpid(), kind, randomHex(4))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Client is the engine client.
func (e *Engine) Client() *client.Client { return e.cli }

// Owner is the LabelOwner value of this engine's containers.
func (e *Engine) Owner() string { return e.owner }

// CheckLimits checks l against what the engine can enforce: its CPUs and
// memory (a *backend.LimitError naming the run-config field), and the
// cgroup controllers that enforce memory, CPU and process limits. An
// engine that does not answer is the one error.
func (e *Engine) CheckLimits(ctx context.Context, l backend.Limits) []error {
	info, err := e.cli.Info(ctx)
	if err != nil {
		return []error{fmt.Errorf("docker engine: %w", err)}
	}
	return EngineLimits(info, l)
}

// EngineLimits checks l against the engine described by info (see
// CheckLimits).
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

// Create creates a container named prefix and 32 random hex digits. When
// it fails, the engine may still have made the container before its answer
// was lost (an outage): it is removed by name, now or in the background.
// When it succeeds, the engine answers: the pending removals are tried
// again at once.
func (e *Engine) Create(ctx context.Context, prefix string, cfg *container.Config, hc *container.HostConfig) (string, error) {
	name := prefix + randomHex(16)
	c, err := e.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		e.Remove(ctx, name)
		return "", fmt.Errorf("create container: %w", err)
	}
	e.kickRemovals()
	return c.ID, nil
}

// Kill sends SIGKILL to the container and waits up to grace for the engine
// to report it stopped. exited reports that it had stopped by itself
// before the kill (the kill failed and it is not running): its own end
// stands.
func (e *Engine) Kill(ctx context.Context, id string, grace time.Duration) (exited bool, err error) {
	if err := e.cli.ContainerKill(ctx, id, "KILL"); err != nil {
		info, ierr := e.cli.ContainerInspect(ctx, id)
		if ierr != nil || info.State == nil || info.State.Running {
			return false, fmt.Errorf("kill container %.12s: %w", id, err)
		}
		return true, nil
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	waitCh, errCh := e.cli.ContainerWait(wctx, id, container.WaitConditionNotRunning)
	select {
	case <-waitCh:
		return false, nil
	case err := <-errCh:
		if cerrdefs.IsNotFound(err) {
			return false, nil // removed meanwhile: it is not running
		}
		return false, fmt.Errorf("container %.12s still running %v after kill: %w", id, grace, err)
	}
}

// Stats reads the container's cgroup statistics once, within timeout.
func (e *Engine) Stats(ctx context.Context, id string, timeout time.Duration) (container.StatsResponse, error) {
	var st container.StatsResponse
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := e.cli.ContainerStatsOneShot(sctx, id)
	if err != nil {
		return st, fmt.Errorf("container %.12s stats: %w", id, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("container %.12s stats: %w", id, err)
	}
	return st, nil
}

// Remove force-removes a container (by id or name), also when ctx is
// already cancelled. A failure hands it to the background removal.
func (e *Engine) Remove(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveGrace)
	defer cancel()
	err := e.cli.ContainerRemove(rctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		e.retryRemove(id)
	}
}

// retryRemove queues id for the background removal, starting it if needed.
func (e *Engine) retryRemove(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return // Close has made its last attempt: Sweep's now
	}
	if e.pending == nil {
		e.pending = map[string]time.Time{}
		e.kick = make(chan struct{}, 1)
		e.bgCtx, e.bgStop = context.WithCancel(context.Background())
	}
	e.pending[id] = time.Now().Add(removeRetryFor)
	if !e.sweeping {
		e.sweeping = true
		e.bg.Add(1)
		go e.retryPending(e.bgCtx, e.kick)
	}
}

// kickRemovals makes the background removal try again now.
func (e *Engine) kickRemovals() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sweeping {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
}

// Removals returns how many containers wait for their background removal.
func (e *Engine) Removals() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pending)
}

// retryPending removes the pending containers until none is left or ctx
// ends.
func (e *Engine) retryPending(ctx context.Context, kick <-chan struct{}) {
	defer e.bg.Done()
	backoff := removeBackoff
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			e.mu.Lock()
			e.sweeping = false
			e.mu.Unlock()
			return
		case <-kick:
		case <-t.C:
		}
		t.Stop()
		e.mu.Lock()
		ids := make(map[string]time.Time, len(e.pending))
		for id, giveUp := range e.pending {
			ids[id] = giveUp
		}
		e.mu.Unlock()
		removed := false
		for id, giveUp := range ids {
			rctx, cancel := context.WithTimeout(ctx, RemoveGrace)
			err := e.cli.ContainerRemove(rctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			cancel()
			done := err == nil || cerrdefs.IsNotFound(err)
			removed = removed || done
			if done || time.Now().After(giveUp) {
				e.mu.Lock()
				delete(e.pending, id)
				e.mu.Unlock()
			}
		}
		e.mu.Lock()
		if len(e.pending) == 0 || e.closed {
			e.sweeping = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if removed {
			backoff = removeBackoff
		} else {
			backoff = min(2*backoff, maxRemoveBackoff)
		}
	}
}

// Sweep removes the containers crashed workers leaked: every container
// labelled LabelSandbox whose LabelDeadline has passed (a live worker
// kills and removes its container by then) or is unreadable, whichever
// sandbox made it. Containers of executions still in progress, whatever
// their state, are left alone. It returns how many it removed.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	list, err := e.cli.ContainerList(ctx, container.ListOptions{
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
		if d, err := strconv.ParseInt(c.Labels[LabelDeadline], 10, 64); err == nil && d >= now {
			continue
		}
		err := e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %.12s: %w", c.ID, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// Close stops the background removals, tries once more to remove the
// containers still pending (those left are Sweep's), and releases the
// engine connection.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	if e.bgStop != nil {
		e.bgStop()
	}
	e.mu.Unlock()
	e.bg.Wait()
	e.mu.Lock()
	ids := make([]string, 0, len(e.pending))
	for id := range e.pending {
		ids = append(ids, id)
	}
	e.pending = nil
	e.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = e.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		cancel()
	}
	return e.cli.Close()
}
