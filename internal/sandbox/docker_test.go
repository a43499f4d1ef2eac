package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/wmrl/wmrl/internal/dockerrun"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/testlock"
)

// newTestDocker returns a Docker sandbox running fakeexec, or skips.
func newTestDocker(t *testing.T, binary string) *Docker {
	t.Helper()
	if dockerDown != "" {
		t.Skip(dockerDown)
	}
	testlock.DockerImages(t, false)
	return openTestDocker(t, binary)
}

// openTestDocker is newTestDocker for a test that holds the image lock.
func openTestDocker(t *testing.T, binary string) *Docker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := NewDocker(ctx, binary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// sandboxContainers lists the containers of sandbox d (other test processes
// may be running sandboxes on the same engine).
func sandboxContainers(t *testing.T, d *Docker) []container.Summary {
	t.Helper()
	list, err := d.Client().ContainerList(context.Background(), container.ListOptions{
		All: true,
		Filters: filters.NewArgs(filters.Arg("label", LabelSandbox+"=1"),
			filters.Arg("label", LabelOwner+"="+d.Owner())),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestDockerMisbehaviours(t *testing.T) {
	d := newTestDocker(t, fakeBinary)
	if !strings.HasPrefix(d.Image(), "wmrl-executor:") {
		t.Errorf("image %q", d.Image())
	}
	t.Run("group", func(t *testing.T) {
		for _, tt := range misbehaviours() {
			t.Run(tt.give, func(t *testing.T) {
				t.Parallel()
				checkMisbehaviour(t, d, tt)
			})
		}
	})
	if left := sandboxContainers(t, d); len(left) > 0 {
		t.Errorf("%d sandbox containers left behind", len(left))
	}
}

func TestDockerCPUSeconds(t *testing.T) {
	d := newTestDocker(t, fakeBinary)
	res, err := d.Execute(context.Background(), Request{Job: fakeJob(t, "spin"), Limits: testLimits()})
	if err != nil || res.Status != executor.StatusOK {
		t.Fatalf("spin: %+v, %v", res, err)
	}
	if res.CPUSeconds < 0.3 || res.WallSeconds <= 0 {
		t.Errorf("spin used cpu %.3fs wall %.3fs, want cpu >= 0.3", res.CPUSeconds, res.WallSeconds)
	}
	checkBurn(t, d)
}

func TestDockerIsolation(t *testing.T) {
	d := newTestDocker(t, fakeBinary)
	res, err := d.Execute(context.Background(), Request{Job: fakeJob(t, "probe"), Limits: testLimits()})
	if err != nil || res.Status != executor.StatusOK {
		t.Fatalf("probe: %+v, %v", res, err)
	}
	for _, want := range []string{"write:/=denied", "write:/tmp=denied", "dial=denied", "interfaces= ", "spawn=denied"} {
		if !strings.Contains(res.Detail+" ", want) {
			t.Errorf("probe reported %q, want %q", res.Detail, want)
		}
	}
	// The container's own view: it runs as 65534 with nothing but the binary.
	info, err := d.Client().ImageInspect(context.Background(), d.Image())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config == nil || info.Config.User != "65534:65534" {
		t.Errorf("image user %+v", info.Config)
	}
}

func TestDockerCleanup(t *testing.T) {
	d := newTestDocker(t, fakeBinary)
	ctx := context.Background()
	create := func(deadline time.Time, start bool) string {
		t.Helper()
		cfg := &container.Config{
			Image:     d.Image(),
			OpenStdin: true, // fakeexec blocks reading its job
			Labels: map[string]string{LabelSandbox: "1", LabelOwner: d.Owner(),
				LabelDeadline: strconv.FormatInt(deadline.Unix(), 10)},
		}
		hc := &container.HostConfig{NetworkMode: "none", ReadonlyRootfs: true}
		c, err := d.Client().ContainerCreate(ctx, cfg, hc, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			d.Client().ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		})
		if start {
			if err := d.Client().ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return c.ID
	}
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	leaked := map[string]bool{create(past, true): true, create(past, false): true}
	live := map[string]bool{create(future, true): true, create(future, false): true}

	n, err := d.Cleanup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, c := range sandboxContainers(t, d) {
		left[c.ID] = true
	}
	for id := range leaked {
		if left[id] {
			t.Errorf("leaked container %s (past its deadline) not removed", id[:12])
		}
	}
	for id := range live {
		if !left[id] {
			t.Errorf("container %s of a live execution removed", id[:12])
		}
	}
	// Another test process's Cleanup may have removed ours first, or
	// this one removed its leaks.
	t.Logf("Cleanup removed %d containers", n)
}

func TestDockerSandboxErrors(t *testing.T) {
	d := newTestDocker(t, fakeBinary)
	req := Request{Job: fakeJob(t, "sleep"), Limits: testLimits()}

	// A missing image is the sandbox's failure, and nothing is pulled.
	missing := &Docker{eng: d.eng, cli: d.cli, image: "wmrl-executor:0000000000000000", KillGrace: d.KillGrace}
	if res, err := missing.Execute(context.Background(), req); err == nil {
		t.Errorf("Execute with a missing image scored %+v", res)
	}
	// An executor that refuses its job is not a score either.
	if res, err := d.Execute(context.Background(), Request{Job: fakeJob(t, "reject"), Limits: testLimits()}); err == nil || !strings.Contains(err.Error(), "refuses") {
		t.Errorf("Execute of a rejected job = %+v, %v", res, err)
	}
	// The caller's cancellation is not the solution's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if res, err := d.Execute(ctx, req); err == nil {
		t.Errorf("Execute with a cancelled context scored %+v", res)
	}
	if left := sandboxContainers(t, d); len(left) > 0 {
		t.Errorf("%d sandbox containers left behind after errors", len(left))
	}
	// An engine that does not answer.
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	if _, err := NewDocker(context.Background(), fakeBinary); err == nil {
		t.Error("NewDocker without an engine succeeded")
	}
}

// TestDockerImages checks that images are tagged by content, that a sandbox
// whose image was removed rebuilds it, and that PruneImages removes stale
// executor images but not the current one.
func TestDockerImages(t *testing.T) {
	if dockerDown != "" {
		t.Skip(dockerDown)
	}
	// PruneImages removes every executor image but the kept ones, also those
	// of tests in other packages running now: wait until none is in use.
	testlock.DockerImages(t, true)
	// A binary of its own: fakeexec with random trailing bytes (an ELF
	// file runs with junk appended), so no other test uses its image.
	bin, err := os.ReadFile(fakeBinary)
	if err != nil {
		t.Fatal(err)
	}
	var salt [16]byte
	rand.Read(salt[:])
	unique := filepath.Join(filepath.Dir(fakeBinary), "fakeexec-"+hex.EncodeToString(salt[:4]))
	if err := os.WriteFile(unique, append(bin, salt[:]...), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(unique)
	d := openTestDocker(t, unique)
	ctx := context.Background()
	if d.Image() == openTestDocker(t, fakeBinary).Image() {
		t.Fatalf("two binaries share the image %s", d.Image())
	}
	if _, err := d.Client().ImageRemove(ctx, d.Image(), image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Execute(ctx, Request{Job: fakeJob(t, "ok"), Limits: testLimits()})
	if err != nil || res.Status != executor.StatusOK {
		t.Fatalf("Execute after its image was removed: %+v, %v", res, err)
	}
	// The fake sandbox prunes the unique image; its own and the kept real
	// executor's stay.
	fake := openTestDocker(t, fakeBinary)
	realBin, err := os.ReadFile(realBinary)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.PruneImages(ctx, ImageTag(realBin)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client().ImageInspect(ctx, d.Image()); !cerrdefs.IsNotFound(err) {
		t.Errorf("stale image %s after PruneImages: %v", d.Image(), err)
	}
	if _, err := d.Client().ImageInspect(ctx, fake.Image()); err != nil {
		t.Errorf("current image %s: %v", fake.Image(), err)
	}
}

// TestDockerPreflight checks the limits against the engine, and that an
// engine refusal at Execute is an error, not a verdict: sandbox {cpus: 4}
// on a 2-CPU engine made every execution fail with the engine's "Range of
// CPUs is from 0.01 to 2.00".
func TestDockerPreflight(t *testing.T) {
	d := newTestDocker(t, fakeBinary)
	ctx := context.Background()
	if err := d.Preflight(ctx, testLimits()); err != nil {
		t.Fatalf("Preflight(%+v): %v", testLimits(), err)
	}
	info, err := d.Client().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	lim := testLimits()
	lim.CPUs = float64(2 * info.NCPU)
	want := fmt.Sprintf("sandbox.cpus: %d exceeds the %d CPUs of the Docker engine", 2*info.NCPU, info.NCPU)
	if err := d.Preflight(ctx, lim); !errors.As(err, &le) || err.Error() != want {
		t.Errorf("Preflight(%v CPUs) = %v, want %q", lim.CPUs, err, want)
	}
	if res, err := d.Execute(ctx, Request{Job: fakeJob(t, "ok"), Limits: lim}); err == nil {
		t.Errorf("Execute with %v CPUs on a %d-CPU engine scored %+v", lim.CPUs, info.NCPU, res)
	} else {
		t.Logf("Execute with %v CPUs: %v", lim.CPUs, err)
	}
	lim = testLimits()
	lim.MemoryBytes = info.MemTotal + 1<<30
	if err := d.Preflight(ctx, lim); !errors.As(err, &le) || !strings.Contains(err.Error(), "MiB of the Docker engine") {
		t.Errorf("Preflight(%d MiB) = %v", lim.MemoryBytes>>20, err)
	}
	if left := sandboxContainers(t, d); len(left) > 0 {
		t.Errorf("%d sandbox containers left behind", len(left))
	}
	// An engine that does not answer is the sandbox's failure.
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///nonexistent/docker.sock"), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	down := &Docker{eng: dockerrun.New(cli, d.Owner()), cli: cli, image: d.image, KillGrace: d.KillGrace}
	if err := down.Preflight(ctx, testLimits()); err == nil || errors.As(err, &le) {
		t.Errorf("Preflight without an engine = %v, want a sandbox error", err)
	}
}
