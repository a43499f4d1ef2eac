package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards every connection made to its address to a target address.
// Stop cuts every connection and stops listening, so that to its clients
// the target looks down; Start listens again on the same address. A fault
// test points one client (a worker's database URL, DOCKER_HOST) at a Proxy
// to cut that client off the database or the Docker engine without
// disturbing anyone else who uses them.
type Proxy struct {
	network, addr     string
	tNetwork, tTarget string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy listens on (network, addr) and forwards to (targetNetwork,
// target). With network "tcp" and addr "127.0.0.1:0" the port is chosen
// by the system (Addr tells it). Close it when done.
func NewProxy(network, addr, targetNetwork, target string) (*Proxy, error) {
	p := &Proxy{network: network, addr: addr, tNetwork: targetNetwork, tTarget: target, conns: map[net.Conn]struct{}{}}
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
		return fmt.Errorf("proxy listen %s %s: %w", p.network, p.addr, err)
	}
	p.ln, p.addr = ln, ln.Addr().String()
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// Stop closes the listener and every open connection: the target is
// unreachable through the proxy until Start.
func (p *Proxy) Stop() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.wg.Wait()
}

// Close stops the proxy for good.
func (p *Proxy) Close() { p.Stop() }

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Stop
		}
		p.mu.Lock()
		if p.ln != ln {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	t, err := net.Dial(p.tNetwork, p.tTarget)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.ln == nil { // stopped while dialling
		p.mu.Unlock()
		t.Close()
		return
	}
	p.conns[t] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, t)
		p.mu.Unlock()
		t.Close()
	}()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			_ = err // a cut connection is the point of the proxy
		}
		done <- struct{}{}
	}
	go pipe(t, c)
	go pipe(c, t)
	<-done
}
