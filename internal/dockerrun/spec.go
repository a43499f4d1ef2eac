package dockerrun

import (
	"fmt"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"

	"github.com/wmrl/wmrl/internal/backend"
)

// Labels on every container of the sandboxes.
const (
	// LabelSandbox marks execution containers ("1"); Sweep removes leaked
	// ones.
	LabelSandbox = "wmrl.sandbox"
	// LabelDeadline is the unix time (seconds) by which the container's
	// execution has been killed and removed; past it, the container is
	// leaked.
	LabelDeadline = "wmrl.sandbox.deadline"
	// LabelOwner names the sandbox (host, process, random) that made the
	// container.
	LabelOwner = "wmrl.sandbox.owner"
)

// NobodyID is the user and group the sandboxes run as.
const NobodyID = 65534

// tmpfsOptions are the options of every tmpfs mount: nothing on it runs.
const tmpfsOptions = "rw,noexec,nosuid,nodev,mode=1777,size="

// Spec is one execution's container. Everything not in it is locked down
// by Config and cannot be loosened.
type Spec struct {
	// Image is the image to run.
	Image string
	// Entrypoint replaces the image's when set; Cmd is its arguments.
	Entrypoint, Cmd []string
	// Env is the whole environment of the first process.
	Env []string
	// WorkingDir is the first process's working directory.
	WorkingDir string
	// Limits are the cgroup's memory (swap equal to it: none), CPUs (a CFS
	// quota) and pids.
	Limits backend.Limits
	// Owner is the LabelOwner value (Engine.Owner).
	Owner string
	// RemoveBy is the LabelDeadline: when, at the latest, a live worker has
	// removed the container.
	RemoveBy time.Time
	// Labels are more labels; they cannot replace the three above.
	Labels map[string]string
	// Stdin attaches stdin (open, once), stdout and stderr to the first
	// process, which reads its job on stdin. Without it the first process
	// is attached to nothing (the work runs in execs beside it).
	Stdin bool
	// Tmpfs are tmpfs mounts (path: size in bytes), rw but noexec, nosuid
	// and nodev.
	Tmpfs map[string]int64
	// Binds are host directories mounted read-only, private.
	Binds []Bind
}

// Bind is a read-only bind mount of host directory Source at Target.
type Bind struct {
	Source, Target string
}

// Config is the container of s, locked down: no network (mode none and
// networking disabled), read-only root filesystem, every capability
// dropped, no-new-privileges, user 65534:65534, core dumps off, log driver
// none (nothing kept on disk), and s's limits.
func (s Spec) Config() (*container.Config, *container.HostConfig) {
	labels := make(map[string]string, len(s.Labels)+3)
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[LabelSandbox] = "1"
	labels[LabelOwner] = s.Owner
	labels[LabelDeadline] = strconv.FormatInt(s.RemoveBy.Unix(), 10)
	cfg := &container.Config{
		Image:           s.Image,
		Entrypoint:      s.Entrypoint,
		Cmd:             s.Cmd,
		User:            fmt.Sprintf("%d:%d", NobodyID, NobodyID),
		Env:             s.Env,
		WorkingDir:      s.WorkingDir,
		NetworkDisabled: true,
		Labels:          labels,
	}
	if s.Stdin {
		cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr = true, true, true
		cfg.OpenStdin, cfg.StdinOnce = true, true
	}
	pids := s.Limits.Pids
	hc := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		LogConfig:      container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory:     s.Limits.MemoryBytes,
			MemorySwap: s.Limits.MemoryBytes,
			NanoCPUs:   int64(s.Limits.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits:    []*units.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
		},
	}
	if len(s.Tmpfs) > 0 {
		hc.Tmpfs = make(map[string]string, len(s.Tmpfs))
		for path, size := range s.Tmpfs {
			hc.Tmpfs[path] = tmpfsOptions + strconv.FormatInt(size, 10)
		}
	}
	for _, b := range s.Binds {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.Source, Target: b.Target, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	return cfg, hc
}
