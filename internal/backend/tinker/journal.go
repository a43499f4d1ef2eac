package tinker

import (
	"context"
	"fmt"
	"sync"

	"github.com/wmrl/wmrl/internal/store"
)

// Journal records the Tinker requests of Init and Update before they are
// sent, so that a retried activity (on any worker) polls the future of a
// request already sent instead of sending it again: training twice. The
// key is the idempotency key and the phase (UpdateRequest.Key +
// "/forward_backward", ...).
type Journal interface {
	// Begin records e without its request id unless e.Key is journalled,
	// and returns the journalled entry (with its RequestID if it was sent).
	Begin(ctx context.Context, e store.TinkerRequest) (store.TinkerRequest, error)
	// Sent records the request id the server gave the entry's request.
	Sent(ctx context.Context, key, requestID string) error
}

// MemJournal is a Journal in memory: for tests and single-process use; it
// does not survive the process.
type MemJournal struct {
	mu sync.Mutex
	m  map[string]store.TinkerRequest
}

// Begin implements Journal.
func (j *MemJournal) Begin(_ context.Context, e store.TinkerRequest) (store.TinkerRequest, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[string]store.TinkerRequest{}
	}
	if got, ok := j.m[e.Key]; ok {
		return got, nil
	}
	e.RequestID = ""
	j.m[e.Key] = e
	return e, nil
}

// Sent implements Journal.
func (j *MemJournal) Sent(_ context.Context, key, requestID string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.m[key]
	switch {
	case !ok:
		return fmt.Errorf("journal: %s not begun", key)
	case e.RequestID != "" && e.RequestID != requestID:
		return fmt.Errorf("journal: %s has request %s, not %s", key, e.RequestID, requestID)
	}
	e.RequestID = requestID
	j.m[key] = e
	return nil
}

// PostgresJournal is the Journal in the wmrl database (table
// tinker_journal), shared by every worker.
type PostgresJournal struct{ Store *store.Store }

// Begin implements Journal.
func (j PostgresJournal) Begin(ctx context.Context, e store.TinkerRequest) (store.TinkerRequest, error) {
	return j.Store.BeginTinkerRequest(ctx, e)
}

// Sent implements Journal.
func (j PostgresJournal) Sent(ctx context.Context, key, requestID string) error {
	return j.Store.SetTinkerRequestID(ctx, key, requestID)
}
