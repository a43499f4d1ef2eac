package servicetime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	start := time.Now()
	if err := Wait(t.Context(), "grade time", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if e := time.Since(start); e < 20*time.Millisecond {
		t.Errorf("waited %v, want >= 20ms", e)
	}
	if err := Wait(t.Context(), "grade time", 0); err != nil {
		t.Errorf("zero: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Wait(ctx, "update time", time.Hour)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "update time 1h0m0s") {
		t.Errorf("cancelled: %v", err)
	}
}
