package dockerrun

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/mount"

	"github.com/wmrl/wmrl/internal/backend"
)

// TestConfigLockedDown checks the fields that lock a container down, for
// both shapes of Spec the sandboxes use, and that a Spec's labels cannot
// replace the three Sweep reads.
func TestConfigLockedDown(t *testing.T) {
	lim := backend.Limits{CPUs: 1.5, MemoryBytes: 256 << 20, Pids: 32, Deadline: 10 * time.Second}
	removeBy := time.Unix(1_900_000_000, 0)
	tests := []struct {
		name string
		give Spec
	}{
		{name: "executor", give: Spec{Image: "wmrl-executor:x", Cmd: []string{"-deadline=10s"}, Stdin: true}},
		{name: "python", give: Spec{Image: "wmrl-python:x", Entrypoint: []string{"/bin/sleep"}, Cmd: []string{"80"},
			Tmpfs: map[string]int64{"/work": 1 << 20, "/tmp": 2 << 20},
			Binds: []Bind{{Source: "/host/data", Target: "/data"}},
			Labels: map[string]string{"wmrl.sandbox.kind": "python", LabelSandbox: "0", LabelOwner: "someone else",
				LabelDeadline: "1"}}},
	}
	for _, tt := range tests {
		sp := tt.give
		sp.Limits, sp.Owner, sp.RemoveBy = lim, "me", removeBy
		cfg, hc := sp.Config()
		if cfg.User != "65534:65534" || !cfg.NetworkDisabled || cfg.Image != sp.Image {
			t.Errorf("%s: user %q, network disabled %v, image %q", tt.name, cfg.User, cfg.NetworkDisabled, cfg.Image)
		}
		if want := map[string]string{LabelSandbox: "1", LabelOwner: "me", LabelDeadline: strconv.FormatInt(removeBy.Unix(), 10)}; !labelsHave(cfg.Labels, want) {
			t.Errorf("%s: labels %v, want %v among them", tt.name, cfg.Labels, want)
		}
		if hc.NetworkMode != "none" || !hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) ||
			!slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || hc.LogConfig.Type != "none" || hc.Privileged {
			t.Errorf("%s: network %q, read-only root %v, cap drop %v, security %v, log %q, privileged %v", tt.name,
				hc.NetworkMode, hc.ReadonlyRootfs, hc.CapDrop, hc.SecurityOpt, hc.LogConfig.Type, hc.Privileged)
		}
		if len(hc.CapAdd) > 0 || len(hc.Binds) > 0 || len(hc.Devices) > 0 || hc.PidMode != "" || hc.IpcMode != "" {
			t.Errorf("%s: cap add %v, binds %v, devices %v, pid mode %q, ipc mode %q", tt.name, hc.CapAdd, hc.Binds, hc.Devices, hc.PidMode, hc.IpcMode)
		}
		r := hc.Resources
		if r.Memory != lim.MemoryBytes || r.MemorySwap != lim.MemoryBytes || r.NanoCPUs != 1_500_000_000 || r.PidsLimit == nil || *r.PidsLimit != 32 {
			t.Errorf("%s: memory %d, swap %d, nano CPUs %d, pids %v", tt.name, r.Memory, r.MemorySwap, r.NanoCPUs, r.PidsLimit)
		}
		if len(r.Ulimits) != 1 || r.Ulimits[0].Name != "core" || r.Ulimits[0].Soft != 0 || r.Ulimits[0].Hard != 0 {
			t.Errorf("%s: ulimits %v, want core 0", tt.name, r.Ulimits)
		}
		for path, opts := range hc.Tmpfs {
			if want := tmpfsOptions + strconv.FormatInt(sp.Tmpfs[path], 10); opts != want {
				t.Errorf("%s: tmpfs %s %q, want %q", tt.name, path, opts, want)
			}
		}
		if len(hc.Tmpfs) != len(sp.Tmpfs) || len(hc.Mounts) != len(sp.Binds) {
			t.Errorf("%s: %d tmpfs and %d mounts, want %d and %d", tt.name, len(hc.Tmpfs), len(hc.Mounts), len(sp.Tmpfs), len(sp.Binds))
		}
		for _, m := range hc.Mounts {
			if m.Type != mount.TypeBind || !m.ReadOnly || m.BindOptions == nil || m.BindOptions.Propagation != mount.PropagationRPrivate {
				t.Errorf("%s: mount %+v, want a read-only private bind", tt.name, m)
			}
		}
		if stdin := cfg.AttachStdin && cfg.OpenStdin && cfg.StdinOnce && cfg.AttachStdout && cfg.AttachStderr; stdin != sp.Stdin {
			t.Errorf("%s: stdin attached %v, want %v", tt.name, stdin, sp.Stdin)
		}
		if !sp.Stdin && (cfg.AttachStdin || cfg.OpenStdin || cfg.AttachStdout || cfg.AttachStderr) {
			t.Errorf("%s: attached without Stdin: %+v", tt.name, cfg)
		}
	}
}

func labelsHave(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
