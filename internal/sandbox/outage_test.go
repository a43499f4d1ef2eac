package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/testlock"
)

// TestDockerEngineOutage cuts the engine away from a Docker sandbox (a
// proxy of its socket, stopped and restarted) during and between
// executions: every execution it touches is an error, never a verdict, and
// once the engine is back no container is left behind.
func TestDockerEngineOutage(t *testing.T) {
	if why := sandbox.DockerDown(); why != "" {
		t.Skip(why)
	}
	testlock.DockerImages(t, false)
	proxy := testenv.NewTestDockerProxy(t)
	ctx := context.Background()
	d, err := sandbox.NewDocker(ctx, sandbox.FakeBinary(), sandbox.WithDockerHost(proxy.Host()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The engine itself, not through the proxy.
	engine, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	containers := func() int {
		t.Helper()
		list, err := engine.ContainerList(ctx, container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelOwner+"="+d.Owner()))})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	lim := sandbox.LimitsForTests()
	ok := sandbox.Request{Job: sandbox.FakeJob(t, "ok"), Limits: lim}

	if res, err := d.Execute(ctx, ok); err != nil || res.Status != executor.StatusOK {
		t.Fatalf("through the proxy: %+v, %v", res, err)
	}

	// The engine goes away while an execution runs.
	slow := sandbox.Request{Job: sandbox.FakeJob(t, "sleep"), Limits: lim}
	slow.Limits.Deadline = 20 * time.Second
	done := make(chan error, 1)
	var res executor.Result
	go func() {
		var err error
		res, err = d.Execute(ctx, slow)
		done <- err
	}()
	time.Sleep(time.Second) // created, started, sleeping
	proxy.Stop()
	cut := time.Now()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("execution cut from its engine scored %+v", res)
		}
		t.Logf("execution in flight: %v (after %v)", err, time.Since(cut).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("execution in flight still running 10 s after the engine went away")
	}

	// While it is away, executions fail at once, and so does Preflight.
	start := time.Now()
	if res, err := d.Execute(ctx, ok); err == nil {
		t.Errorf("execution without an engine scored %+v", res)
	} else if took := time.Since(start); took > 2*time.Second {
		t.Errorf("execution without an engine took %v to fail", took)
	}
	var le *sandbox.LimitError
	if err := d.Preflight(ctx, lim); err == nil || errors.As(err, &le) {
		t.Errorf("Preflight without an engine = %v, want a sandbox error", err)
	}
	// The cut execution's container is still there, its removal pending,
	// and so is the removal of the container the engine may have made
	// for the execution that failed.
	if n := containers(); n != 1 || d.Removals() != 2 {
		t.Errorf("during the outage: %d containers, %d removals pending, want 1 and 2", n, d.Removals())
	}
	time.Sleep(2 * time.Second)

	// The engine is back: executions work and the leftover goes.
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	if res, err := d.Execute(ctx, ok); err != nil || res.Status != executor.StatusOK {
		t.Fatalf("after the engine came back: %+v, %v", res, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for containers() > 0 || d.Removals() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d containers left, %d removals pending, 15 s after the engine came back", containers(), d.Removals())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
