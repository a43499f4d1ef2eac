package testenv

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards every connection made to its address to a target address.
// Stop cuts every connection, both ways, and stops listening (a Unix
// socket is removed), so that to its clients the target looks down at
// once; Start listens again on the same address. A fault test points one
// client (a worker's database URL, DOCKER_HOST) at a Proxy to cut that
// client off the database or the Docker engine without disturbing anyone
// else who uses them.
//
// Bytes pass through unchanged, and each direction is half-closed when its
// source ends while the other stays open: the Docker sandbox closes a
// container's stdin (a half-close) once it has written the job and reads
// the result after, so a proxy that tore the whole connection down then
// would lose every result. Its methods are safe for concurrent use.
type Proxy struct {
	network, addr         string
	targetNetwork, target string

	mu    sync.Mutex
	ln    net.Listener // nil when stopped
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// NewProxy listens on (network, addr) and forwards to (targetNetwork,
// target). With network "tcp" and addr "127.0.0.1:0" the port is chosen
// by the system (Addr tells it). Close it when done.
func NewProxy(network, addr, targetNetwork, target string) (*Proxy, error) {
	p := &Proxy{network: network, addr: addr, targetNetwork: targetNetwork, target: target, conns: map[net.Conn]bool{}}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Start listens again after Stop (a no-op while listening).
func (p *Proxy) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen(p.network, p.addr)
	if err != nil {
		return fmt.Errorf("proxy: listen on %s %s: %w", p.network, p.addr, err)
	}
	p.ln, p.addr = ln, ln.Addr().String()
	p.wg.Add(1)
	go p.serve(ln)
	return nil
}

// Stop closes the listener and every live connection: the target is
// unreachable through the proxy until Start.
func (p *Proxy) Stop() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.wg.Wait()
}

// Close stops the proxy for good.
func (p *Proxy) Close() { p.Stop() }

// serve accepts connections on ln until Stop closes it.
func (p *Proxy) serve(ln net.Listener) {
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
func (p *Proxy) track(ln net.Listener, cs ...net.Conn) bool {
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

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// pipe copies between a client's connection and a new one to the target
// until both directions end or Stop cuts them.
func (p *Proxy) pipe(ln net.Listener, down net.Conn) {
	defer p.wg.Done()
	defer down.Close()
	up, err := net.Dial(p.targetNetwork, p.target)
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
		_, _ = io.Copy(dst, src) // a cut connection is the point of the proxy
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
