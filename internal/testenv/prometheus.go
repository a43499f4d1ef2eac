package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// PrometheusBin is Debian's Prometheus server (apt-get install prometheus;
// deploy/prometheus.sh install, which .ci/run runs).
const PrometheusBin = "/usr/bin/prometheus"

// Prometheus is a real Prometheus server that a test started.
type Prometheus struct {
	// URL is the server's base URL (http://127.0.0.1:PORT).
	URL string
	API promv1.API
	log *syncBuffer
}

// StartPrometheus starts Prometheus on a free loopback port with a fresh
// data directory and a configuration that scrapes /metrics of each target
// (host:port) every second as job "wmrl"; it waits until the server is
// ready and stops it when the test ends. Without PrometheusBin the test
// skips, except in CI (CI set), where it fails.
func StartPrometheus(t testing.TB, targets ...string) *Prometheus {
	t.Helper()
	if _, err := os.Stat(PrometheusBin); err != nil {
		msg := fmt.Sprintf("no Prometheus server at %s (install it with deploy/prometheus.sh install): %v", PrometheusBin, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: wmrl
    metrics_path: /metrics
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	log := &syncBuffer{}
	cmd := exec.Command(PrometheusBin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", PrometheusBin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	p := &Prometheus{URL: "http://" + addr, log: log}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("prometheus exited before it was ready (%v):\n%s", err, log.String())
		default:
		}
		if resp, err := http.Get(p.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s not ready within 30s:\n%s", addr, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, err := api.NewClient(api.Config{Address: p.URL})
	if err != nil {
		t.Fatal(err)
	}
	p.API = promv1.NewAPI(c)
	return p
}

// Query evaluates expr now (the /api/v1/query endpoint) and returns its
// vector, polling until the vector is not empty and cond (nil: any) holds
// or timeout passes, when the test fails with the last answer and the
// server's log.
func (p *Prometheus) Query(t testing.TB, expr string, timeout time.Duration, cond func(model.Vector) bool) model.Vector {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		v, warnings, _, err := p.API.Query(ctx, expr, time.Now())
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case v.Type() != model.ValVector:
			last = fmt.Sprintf("a %s, want a vector: %v", v.Type(), v)
		default:
			vec := v.(model.Vector)
			last = fmt.Sprintf("%v (warnings %v)", vec, warnings)
			if len(vec) > 0 && (cond == nil || cond(vec)) {
				return vec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus query %s: no answer as wanted within %v; last: %s\nprometheus log:\n%s", expr, timeout, last, p.log.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// freeLoopbackAddr returns a loopback host:port that was free a moment ago.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for a process's two output streams.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
