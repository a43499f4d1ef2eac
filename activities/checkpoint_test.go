package activities

import (
	"errors"
	"os"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
)

// A checkpoint file whose content no longer matches its recorded hash fails
// the activity for good instead of being retried for ever.
func TestCorruptOrForeignCheckpointIsNotRetried(t *testing.T) {
	a, _ := newTestActivities(t)
	ctx := t.Context()
	cfg := tinyConfig(t)
	created, err := a.CreateRun(ctx, CreateRunRequest{RunID: "mine", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Seed++
	if _, err := a.CreateRun(ctx, CreateRunRequest{RunID: "theirs", Config: other}); err != nil {
		t.Fatal(err)
	}
	mine, err := a.Store.Checkpoint(ctx, "mine", 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := a.Store.Checkpoint(ctx, "theirs", 0)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := os.ReadFile(theirs.Location)
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(mine.Location)
	if err != nil {
		t.Fatal(err)
	}
	truncated := good[:len(good)/2]
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0xff

	tests := []struct {
		name string
		give []byte
		want string
	}{
		{"foreign", foreign, "Postgres records " + created.Checkpoint.Hash},
		{"truncated", truncated, "is unusable"},
		{"flipped byte", flipped, "is unusable"},
	}
	gen := GenerateRequest{RunID: "mine", Step: 0, Group: 0, Samples: cfg.Samples, Seed: cfg.Seed, SuiteSeed: cfg.SuiteSeed,
		Checkpoint: created.Checkpoint}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(mine.Location, tt.give, 0o644); err != nil {
				t.Fatal(err)
			}
			fresh := fresh(a, a.DataDir, "")
			_, err := fresh.Generate(ctx, gen)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != ErrInvalidInput {
				t.Fatalf("Generate from a %s checkpoint: %v, want a non-retryable %s", tt.name, err, ErrInvalidInput)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "checkpoint 0 of run mine") {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}

	// A missing file may be a volume not mounted yet: retried.
	if err := os.Remove(mine.Location); err != nil {
		t.Fatal(err)
	}
	fresh := fresh(a, a.DataDir, "")
	_, err = fresh.Generate(ctx, gen)
	var app *temporal.ApplicationError
	if err == nil || (errors.As(err, &app) && app.NonRetryable()) {
		t.Errorf("Generate from a missing checkpoint file: %v, want a retryable error", err)
	}
}
