package testenv

import (
	"context"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/sandbox"
)

// countingSandbox answers every execution with status ok and counts them.
type countingSandbox struct{ calls int }

func (c *countingSandbox) Execute(context.Context, sandbox.Request) (executor.Result, error) {
	c.calls++
	return executor.Result{Status: executor.StatusOK}, nil
}

func (c *countingSandbox) Preflight(context.Context, sandbox.Limits) error { return nil }

func TestFailing(t *testing.T) {
	inner := &countingSandbox{}
	f := NewFailing(inner, 2)
	var errs int
	for range 5 {
		res, err := f.Execute(t.Context(), sandbox.Request{})
		if err != nil {
			errs++
			continue
		}
		if res.Status != executor.StatusOK {
			t.Errorf("status %q passed on as %q", executor.StatusOK, res.Status)
		}
	}
	if errs != 2 || inner.calls != 3 || f.Runs() != 3 {
		t.Errorf("%d errors, %d executions passed on, Runs %d; want 2, 3, 3", errs, inner.calls, f.Runs())
	}
	f.FailNext(1)
	if _, err := f.Execute(t.Context(), sandbox.Request{}); err == nil {
		t.Error("FailNext(1): the next execution succeeded")
	}
	if err := f.Preflight(t.Context(), sandbox.Limits{}); err != nil {
		t.Errorf("Preflight not passed on: %v", err)
	}
}
