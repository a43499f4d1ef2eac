package store

import (
	"errors"
	"testing"
	"time"
)

func TestTerminateRun(t *testing.T) {
	s := sharedStore(t)
	ctx := t.Context()
	r := newRun(t, s)
	before := time.Now().Add(-time.Minute)
	if _, err := s.TerminateRun(ctx, r.ID, "  "); err == nil {
		t.Error("terminate without a reason: no error")
	}
	got, err := s.TerminateRun(ctx, r.ID, "checkpoint 3 is corrupt")
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != "checkpoint 3 is corrupt" || got.At.Before(before) {
		t.Errorf("termination %+v", got)
	}
	// A second terminate keeps the first reason and time.
	again, err := s.TerminateRun(ctx, r.ID, "again")
	if err != nil || again != got {
		t.Errorf("second terminate = %+v, %v; want %+v", again, err, got)
	}
	back, err := s.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if back.State != RunTerminated || back.Termination == nil || back.Termination.Reason != got.Reason ||
		!back.Termination.At.Equal(got.At) {
		t.Errorf("terminated run reads back as %+v (termination %+v)", back, back.Termination)
	}
	// A late activity of the terminated workflow cannot undo it.
	if err := s.SetRunState(ctx, r.ID, RunCompleted); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if back, err := s.Run(ctx, r.ID); err != nil || back.State != RunTerminated {
		t.Errorf("state after a late SetRunState and UpsertRun: %v %v, want terminated", back.State, err)
	}
	rs, err := s.Runs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range rs {
		if x.ID == r.ID {
			found = x.Termination != nil && x.Termination.Reason == got.Reason
		} else if x.Termination != nil && x.State != RunTerminated {
			t.Errorf("run %s has a termination but state %s", x.ID, x.State)
		}
	}
	if !found {
		t.Errorf("Runs does not show the termination of %s", r.ID)
	}
	if _, err := s.TerminateRun(ctx, "no-such-run", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("terminate an unknown run: %v, want ErrNotFound", err)
	}
}

func TestDeployment(t *testing.T) {
	ctx := t.Context()
	shared := sharedStore(t)
	d1, err := shared.Deployment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := shared.Deployment(ctx); err != nil || again != d1 {
		t.Errorf("Deployment twice: %+v then %+v, %v", d1, again, err)
	}
	other := openDSN(t, freshDB(t))
	if _, err := other.Deployment(ctx); err == nil {
		t.Error("an unmigrated database has a deployment id")
	}
	if _, err := other.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d2, err := other.Deployment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d1.ID) != 32 || d1.Database == "" || d2.ID == d1.ID || d2.Database == d1.Database {
		t.Errorf("deployments %+v and %+v: want two ids of 32 hex digits and two names", d1, d2)
	}
}
