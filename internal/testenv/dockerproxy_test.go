package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

func TestDockerProxy(t *testing.T) {
	p := NewTestDockerProxy(t)
	cli, err := client.NewClientWithOpts(client.WithHost(p.Host()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cli.Ping(ctx)
		return err
	}
	if err := ping(); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	p.Stop()
	start := time.Now()
	if err := ping(); err == nil {
		t.Error("ping through a stopped proxy succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("ping through a stopped proxy took %v to fail", d)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err != nil {
		t.Fatalf("ping through the restarted proxy: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Path()); !os.IsNotExist(err) {
		t.Errorf("socket %s after Close: %v", p.Path(), err)
	}
}
