package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// DefaultDockerSocket is the local Docker engine's socket.
const DefaultDockerSocket = "/var/run/docker.sock"

// DockerSocket returns the path of the local engine's socket: that of
// DOCKER_HOST when it is a unix:// address, else DefaultDockerSocket.
func DockerSocket() string {
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok && h != "" {
		return h
	}
	return DefaultDockerSocket
}

// DockerProxy is a Proxy of a Docker engine's socket that a test cuts and
// restores to play an engine outage, without touching the engine or its
// other clients. Point a sandbox at Host():
//
//	p := testenv.NewTestDockerProxy(t)
//	d, err := sandbox.NewDocker(ctx, binary, sandbox.WithDockerHost(p.Host()))
//	...
//	p.Stop()  // the engine vanishes: calls in flight fail, new ones are refused
//	p.Start() // it is back, at the same address
//
// (a child process takes DOCKER_HOST=p.Host()). Requests, attached streams,
// waits and stats streams in flight are cut by Stop (see Proxy).
type DockerProxy struct {
	*Proxy
	dir string // made by NewDockerProxy, removed by Close
}

// NewDockerProxy returns a started proxy of the engine socket upstream
// (DockerSocket() when empty), listening on a new socket in a new
// temporary directory (short, for the 108-byte limit of socket paths).
func NewDockerProxy(upstream string) (*DockerProxy, error) {
	if upstream == "" {
		upstream = DockerSocket()
	}
	dir, err := os.MkdirTemp("", "wmrl-dockerproxy-")
	if err != nil {
		return nil, fmt.Errorf("docker proxy: %w", err)
	}
	p, err := NewProxy("unix", filepath.Join(dir, "docker.sock"), "unix", upstream)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &DockerProxy{Proxy: p, dir: dir}, nil
}

// NewTestDockerProxy is NewDockerProxy of the local engine for a test,
// closed when the test ends. The test is skipped when no engine answers on
// DockerSocket().
func NewTestDockerProxy(t testing.TB) *DockerProxy {
	t.Helper()
	c, err := net.DialTimeout("unix", DockerSocket(), 3*time.Second)
	if err != nil {
		t.Skipf("no Docker engine at %s: %v", DockerSocket(), err)
	}
	c.Close()
	p, err := NewDockerProxy("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Path is the proxy's socket.
func (p *DockerProxy) Path() string { return p.Addr() }

// Host is the proxy's address as DOCKER_HOST and sandbox.WithDockerHost
// take it.
func (p *DockerProxy) Host() string { return "unix://" + p.Addr() }

// Close stops the proxy for good and removes its directory.
func (p *DockerProxy) Close() error {
	p.Proxy.Close()
	return os.RemoveAll(p.dir)
}
