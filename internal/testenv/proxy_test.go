package testenv

import (
	"bufio"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// echo serves one line back per connection on a Unix socket.
func echo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "echo.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(l))
				}
			}()
		}
	}()
	return path
}

func roundTrip(addr, network string) error {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxyStopStart(t *testing.T) {
	target := echo(t)
	for _, tt := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:0"},
		{"unix", filepath.Join(t.TempDir(), "proxy.sock")},
	} {
		p, err := NewProxy(tt.network, tt.addr, "unix", target)
		if err != nil {
			t.Fatal(err)
		}
		addr := p.Addr()
		if err := roundTrip(addr, tt.network); err != nil {
			t.Fatalf("%s: through the proxy: %v", tt.network, err)
		}
		// A connection open across Stop is cut.
		c, err := net.Dial(tt.network, addr)
		if err != nil {
			t.Fatal(err)
		}
		p.Stop()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte("x\n"))
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
			t.Fatalf("%s: connection survived Stop", tt.network)
		}
		c.Close()
		if err := roundTrip(addr, tt.network); err == nil {
			t.Fatalf("%s: target reachable while stopped", tt.network)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if p.Addr() != addr {
			t.Fatalf("%s: restarted on %s, was %s", tt.network, p.Addr(), addr)
		}
		if err := roundTrip(addr, tt.network); err != nil {
			t.Fatalf("%s: after restart: %v", tt.network, err)
		}
		p.Close()
	}
}
