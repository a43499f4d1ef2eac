package backend

import (
	"errors"
	"fmt"
	"testing"
)

func TestPermanent(t *testing.T) {
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	base := errors.New("corrupt")
	err := fmt.Errorf("group 3: %w", Permanent(base))
	if !IsPermanent(err) || !errors.Is(err, base) || err.Error() != "group 3: corrupt" {
		t.Errorf("wrapped permanent error %v: IsPermanent %v, Is %v", err, IsPermanent(err), errors.Is(err, base))
	}
	if IsPermanent(base) || IsPermanent(nil) {
		t.Error("a plain error is permanent")
	}
}

func TestKeys(t *testing.T) {
	for _, tt := range []struct{ give, want string }{
		{SampleKey("run", 1, 2, 3), "run/step-1/group-2/sample-3"},
		{SampleKey("run", 1, 2, -1), "run/step-1/group-2"},
		{StepKey("run", 4), "run/step-4"},
		{EvalKey("run", 5, "t01", 6), "run/eval-5/t01/sample-6"},
		{EvalKey("run", 5, "t01", -1), "run/eval-5/t01"},
	} {
		if tt.give != tt.want {
			t.Errorf("key %q, want %q", tt.give, tt.want)
		}
	}
}
