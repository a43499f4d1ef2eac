package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/api/serviceerror"

	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

func TestUnreachable(t *testing.T) {
	tests := []struct {
		give error
		want bool
	}{
		{nil, false},
		{errors.New("no run \"x\""), false},
		{store.ErrNotFound, false},
		{context.Canceled, false},
		{fmt.Errorf("describe run r: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("describe run r: %w", serviceerror.NewDeadlineExceeded("context deadline exceeded")), true},
		{serviceerror.NewUnavailable("connection refused"), true},
		{serviceerror.NewNotFound("workflow not found"), false},
		{serviceerror.NewInvalidArgument("bad"), false},
		{&net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("steps of r: %w", io.ErrUnexpectedEOF), true},
		{syscall.ECONNRESET, true},
		{&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, false},
	}
	for _, tt := range tests {
		if got := unreachable(tt.give); got != tt.want {
			t.Errorf("unreachable(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

// TestWaiter: an outage is one line when it starts and one when it ends,
// however many attempts it took; an answer (even an error) ends the wait;
// detaching ends it too.
func TestWaiter(t *testing.T) {
	var notes []string
	detach := make(chan struct{})
	w := &waiter{note: func(s string) { notes = append(notes, s) }, detach: detach,
		first: time.Millisecond, most: 4 * time.Millisecond, attempt: time.Second}
	calls := 0
	down := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	err := w.do(t.Context(), svcPostgres, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("attempt without a deadline")
		}
		if calls++; calls < 6 {
			return down
		}
		return nil
	})
	if err != nil || calls != 6 || len(notes) != 2 ||
		!strings.HasPrefix(notes[0], "postgres unreachable (retrying every 4ms or less until it answers; Ctrl-C detaches): dial tcp: connection refused") ||
		!strings.HasPrefix(notes[1], "postgres answers again after ") {
		t.Fatalf("do = %v after %d calls, notes %q", err, calls, notes)
	}

	notes, calls = nil, 0
	answer := errors.New("no run \"r\"")
	if err := w.do(t.Context(), svcPostgres, func(context.Context) error { calls++; return answer }); err != answer || calls != 1 || notes != nil {
		t.Errorf("do of an answer = %v after %d calls, notes %q", err, calls, notes)
	}

	close(detach)
	err = w.do(t.Context(), svcTemporal, func(context.Context) error { return serviceerror.NewUnavailable("down") })
	if !errors.Is(err, errDetached) || len(notes) != 1 || !strings.HasPrefix(notes[0], "temporal unreachable") {
		t.Errorf("do while detaching = %v, notes %q", err, notes)
	}
}

// proxiedDSN returns dsn through a testenv.Proxy in front of its Postgres
// (a Unix socket in front of a socket, else TCP), for one client to be cut
// off while everyone else goes on.
func proxiedDSN(t *testing.T, dsn string) (string, *testenv.Proxy) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var p *testenv.Proxy
	var host string
	if strings.HasPrefix(cfg.Host, "/") {
		host = t.TempDir()
		sock := fmt.Sprintf(".s.PGSQL.%d", cfg.Port)
		p, err = testenv.NewProxy("unix", filepath.Join(host, sock), "unix", filepath.Join(cfg.Host, sock))
	} else {
		p, err = testenv.NewProxy("tcp", "127.0.0.1:0", "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	port := fmt.Sprint(cfg.Port)
	if host == "" {
		var err error
		if host, port, err = net.SplitHostPort(p.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "host=" + host + "&port=" + port, p // the query's host and port win
	}
	return dsn + " host=" + host + " port=" + port, p // a later keyword wins
}

// follow starts wmrl status RUN --follow with the stack's flags and then
// flags (which win), and returns once it follows: its stdout and stderr as
// they grow, and its end.
func (e *itEnv) follow(t *testing.T, run string, flags ...string) (out, errOut *syncBuffer, done <-chan error) {
	t.Helper()
	out, errOut = &syncBuffer{}, &syncBuffer{}
	end := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetOut(out)
		root.SetErr(errOut)
		root.SetArgs(append(append([]string{"status", run, "--follow", "--poll", "200ms"}, e.flags...), flags...))
		end <- root.ExecuteContext(t.Context())
	}()
	for start := time.Now(); !strings.Contains(out.String(), "following run "+run); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-end:
			t.Fatalf("status --follow ended before following: %v\n%s%s", err, out, errOut)
		default:
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("status --follow not following after a minute:\n%s%s", out, errOut)
		}
	}
	return out, errOut, end
}

// TestFollowThroughPostgresOutage: wmrl status --follow, cut off from
// Postgres while the run goes on and ends, says so once, waits, says when
// Postgres answers again, and ends as the run did.
func TestFollowThroughPostgresOutage(t *testing.T) {
	e := integration(t)
	dsn, p := proxiedDSN(t, e.dsn)
	name := e.runName(t, "pg-outage")
	cfg := writeFile(t, "o.yaml", "steps: 6\n")
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", name, "--detach"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	out, errOut, done := e.follow(t, name, "--database-url", dsn)
	p.Stop()
	cut := time.Now()
	// The run ends while the follower cannot reach Postgres, which it
	// needs for the run's final status.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		wf, err := temporalState(t.Context(), e.tc, name)
		if err != nil {
			t.Fatal(err)
		}
		if wf != wfRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still running after 3 minutes:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, "the follower to say postgres is unreachable", func() bool { return strings.Contains(out.String(), "postgres unreachable") })
	select {
	case err := <-done:
		t.Fatalf("follower ended during the outage: %v\n%s", err, out.String())
	case <-time.After(3 * time.Second): // a few attempts
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres cut off for %v", time.Since(cut).Round(time.Millisecond))
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("follower still waiting a minute after postgres came back:\n%s", out.String())
	}
	got := out.String()
	t.Logf("wmrl status --follow:\n%s", got)
	if err != nil {
		t.Fatalf("status --follow: %v (stderr %q)", err, errOut.String())
	}
	if n := strings.Count(got, "postgres unreachable"); n != 1 {
		t.Errorf("%d lines of postgres unreachable, want 1", n)
	}
	for _, w := range []string{"postgres answers again after ", "step 5: rho", "run " + name + " ended: completed", "state        completed, step 6/6"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if i, j := strings.Index(got, "postgres answers again"), strings.Index(got, "ended: completed"); i > j {
		t.Errorf("the run's end printed before postgres answered again")
	}
	if s := e.status(t, name); s.Workflow != wfCompleted || s.Step != 6 {
		t.Errorf("status after: %+v", s)
	}
}

// TestFollowThroughTemporalOutage: wmrl status --follow, cut off from
// Temporal while the run goes on, says so once, waits, says when Temporal
// answers again, follows on, and ends as the run does.
func TestFollowThroughTemporalOutage(t *testing.T) {
	e := integration(t)
	addr := e.flags[slices.Index(e.flags, "--address")+1]
	p, err := testenv.NewProxy("tcp", "127.0.0.1:0", "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	name := e.runName(t, "temporal-outage")
	cfg := writeFile(t, "o.yaml", "steps: 1000\n")
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", name, "--detach"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	out, errOut, done := e.follow(t, name, "--address", p.Addr())
	waitFor(t, "a step line", func() bool { return strings.Contains(out.String(), "step 0: rho") })
	p.Stop()
	cut := time.Now()
	waitFor(t, "the follower to say temporal is unreachable", func() bool { return strings.Contains(out.String(), "temporal unreachable") })
	select {
	case err := <-done:
		t.Fatalf("follower ended during the outage: %v\n%s", err, out.String())
	case <-time.After(3 * time.Second):
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("temporal cut off for %v", time.Since(cut).Round(time.Millisecond))
	waitFor(t, "the follower to say temporal answers again", func() bool { return strings.Contains(out.String(), "temporal answers again") })
	// It follows on: a step line after the outage, then the run's end.
	seen := strings.Count(out.String(), ": rho ")
	waitFor(t, "a step line after the outage", func() bool { return strings.Count(out.String(), ": rho ") > seen })
	if _, err := e.wmrl(t, "stop", name); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("follower still following a minute after the stop:\n%s", out.String())
	}
	got := out.String()
	t.Logf("wmrl status --follow:\n%s", got)
	if err != nil {
		t.Fatalf("status --follow: %v (stderr %q)", err, errOut.String())
	}
	if n := strings.Count(got, "temporal unreachable"); n != 1 {
		t.Errorf("%d lines of temporal unreachable, want 1", n)
	}
	if !strings.Contains(got, "run "+name+" ended: ") {
		t.Errorf("output lacks the run's end")
	}
}
