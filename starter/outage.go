package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/api/serviceerror"
)

// The services a follower waits out.
const (
	svcPostgres = "postgres"
	svcTemporal = "temporal"
)

// errDetached is the user detaching (Ctrl-C) while a service did not
// answer.
var errDetached = errors.New("detached while waiting for a service")

// waiter waits out the outages of the services that following a run calls
// (wmrl run, wmrl status --follow): a call that fails because its service
// does not answer (unreachable) is retried with backoff until the service
// answers or the user detaches, with one line when the outage starts and
// one when it ends. Any other error is the call's answer. The run goes on
// meanwhile; only its end or the user ends the following.
type waiter struct {
	note   func(string)    // prints one line
	detach <-chan struct{} // closed when the user detaches
	// first and most bound the wait between two attempts (doubling from
	// first); attempt bounds one call, so that a service that takes the
	// connection and never answers is an outage too.
	first, most, attempt time.Duration
}

// newWaiter returns the waiter of a follower: its lines go to note, and
// detach ends the wait.
func newWaiter(note func(string), detach <-chan struct{}) *waiter {
	return &waiter{note: note, detach: detach, first: time.Second, most: 15 * time.Second, attempt: 30 * time.Second}
}

// do calls call until it returns anything but an outage of service, or
// the user detaches (errDetached).
func (w *waiter) do(ctx context.Context, service string, call func(context.Context) error) error {
	var since time.Time
	wait := w.first
	for {
		actx, cancel := context.WithTimeout(ctx, w.attempt)
		err := call(actx)
		cancel()
		if !unreachable(err) {
			if !since.IsZero() {
				w.note(fmt.Sprintf("%s answers again after %v", service, time.Since(since).Round(time.Second)))
			}
			return err
		}
		if since.IsZero() {
			since = time.Now()
			w.note(fmt.Sprintf("%s unreachable (retrying every %v or less until it answers; Ctrl-C detaches): %v",
				service, w.most, oneLine(err.Error())))
		}
		select {
		case <-w.detach:
			return fmt.Errorf("%w (%s unreachable for %v): %w", errDetached, service, time.Since(since).Round(time.Second), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, w.most)
	}
}

// unreachable reports whether err says that a service did not answer (a
// connection refused, reset or timed out, a server shutting down or not
// yet accepting connections) rather than what it answered.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08, connection exception; 57P01-57P03, the server shutting
		// down or starting up; 53300, too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300"
	}
	var (
		connect     *pgconn.ConnectError
		netErr      net.Error
		unavailable *serviceerror.Unavailable
		deadline    *serviceerror.DeadlineExceeded
		exhausted   *serviceerror.ResourceExhausted
	)
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.As(err, &unavailable) ||
		errors.As(err, &deadline) || errors.As(err, &exhausted) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}
