package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestTinkerJournal(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	key := fmt.Sprintf("run-%08x/step-3/optim_step", rand.Uint32())
	e, err := s.BeginTinkerRequest(ctx, TinkerRequest{Key: key, ModelID: "m", SeqID: 11, RequestID: "ignored"})
	if err != nil || e != (TinkerRequest{Key: key, ModelID: "m", SeqID: 11}) {
		t.Fatalf("begin: %+v %v", e, err)
	}
	// A second Begin (a retry) gets the first entry, whatever it asks.
	if e, err := s.BeginTinkerRequest(ctx, TinkerRequest{Key: key, ModelID: "other", SeqID: 12}); err != nil || e.ModelID != "m" || e.SeqID != 11 || e.RequestID != "" {
		t.Fatalf("begin again: %+v %v", e, err)
	}
	if err := s.SetTinkerRequestID(ctx, key, "42"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTinkerRequestID(ctx, key, "42"); err != nil {
		t.Fatalf("same id again: %v", err)
	}
	if err := s.SetTinkerRequestID(ctx, key, "43"); !errors.Is(err, ErrConflict) {
		t.Fatalf("another id: %v, want ErrConflict", err)
	}
	if err := s.SetTinkerRequestID(ctx, key+"x", "1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown key: %v, want ErrNotFound", err)
	}
	if e, err := s.BeginTinkerRequest(ctx, TinkerRequest{Key: key}); err != nil || e.RequestID != "42" {
		t.Fatalf("after sent: %+v %v", e, err)
	}
}
