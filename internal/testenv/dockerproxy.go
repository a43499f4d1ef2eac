package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// DockerProxy is a Unix-socket proxy of a Docker engine's socket that a test
// cuts and restores to play an engine outage, without touching the engine
// or its other clients. Point a sandbox at Host():
//
//	p := testenv.NewTestDockerProxy(t)
//	d, err := sandbox.NewDocker(ctx, binary, sandbox.WithDockerHost(p.Host()))
//	...
//	p.Stop()  // the engine vanishes: calls in flight fail, new ones are refused
//	p.Start() // it is back, at the same address
//
// (a child process takes DOCKER_HOST=p.Host()). Stop closes the listener
// and every live connection, both ways (requests, attached streams, waits
// and stats streams in flight are cut), and removes the socket, so a
// client's dial fails at once; Start listens again on the same path. The
// proxy passes bytes through unchanged, including the hijacked connections
// of attach, and half-closes each direction when its source ends, keeping
// the other open: the Docker sandbox closes the container's stdin (a
// half-close) once it has written the job and reads the result after, so a
// proxy that tore the whole connection down then would lose every result.
// Its methods are safe for concurrent use.
type DockerProxy struct {
	upstream string
	path     string
	dir      string // made by NewDockerProxy, removed by Close

	mu     sync.Mutex
	ln     net.Listener // nil when stopped
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
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
	p := &DockerProxy{upstream: upstream, path: filepath.Join(dir, "docker.sock"), dir: dir, conns: map[net.Conn]bool{}}
	if err := p.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
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
func (p *DockerProxy) Path() string { return p.path }

// Host is the proxy's address as DOCKER_HOST and sandbox.WithDockerHost
// take it: "unix://" + Path().
func (p *DockerProxy) Host() string { return "unix://" + p.path }

// Start listens on Path() again after Stop; it does nothing when the proxy
// is running.
func (p *DockerProxy) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("docker proxy: closed")
	}
	if p.ln != nil {
		return nil
	}
	_ = os.Remove(p.path) // a socket left by a crashed run
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		return fmt.Errorf("docker proxy: %w", err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.serve(ln)
	return nil
}

// Stop closes the listener and every live connection and removes the
// socket; it returns once every connection's goroutines have ended.
func (p *DockerProxy) Stop() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	if ln != nil {
		ln.Close() // also removes the socket
	}
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// Close stops the proxy for good and removes its directory.
func (p *DockerProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Stop()
	return os.RemoveAll(p.dir)
}

// serve accepts connections on ln until it is closed.
func (p *DockerProxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.pipe(ln, down)
	}
}

// track registers live connections of listener ln; it fails when ln has
// been stopped meanwhile.
func (p *DockerProxy) track(ln net.Listener, cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *DockerProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// pipe copies between a client's connection and a new one to the engine
// until both directions end or Stop cuts them.
func (p *DockerProxy) pipe(ln net.Listener, down net.Conn) {
	defer p.wg.Done()
	defer down.Close()
	up, err := net.Dial("unix", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(ln, down, up) {
		return
	}
	defer p.untrack(down, up)
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go copyHalf(up, down)
	go copyHalf(down, up)
	<-done
	<-done
}
