// Package servicetime is the emulated service time of `wmrl serve`'s
// handlers (--update-time, --grade-time): a wait that stands for a GPU's
// update or a sandbox's execution on this machine, which has neither.
package servicetime

import (
	"context"
	"fmt"
	"time"
)

// Wait waits d, or until ctx ends; d <= 0 returns at once. what names the
// flag's time in the error ("update time", "grade time").
func Wait(ctx context.Context, what string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %v: %w", what, d, ctx.Err())
	}
}
