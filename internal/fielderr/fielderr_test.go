package fielderr

import (
	"errors"
	"fmt"
	"testing"
)

func TestError(t *testing.T) {
	for _, tt := range []struct {
		give error
		want string
	}{
		{give: New("steps", "must be in [%d,%d], got %d", 1, 10, 0), want: "steps: must be in [1,10], got 0"},
		{give: AtLine("steps", 3, "must be set"), want: "steps: line 3: must be set"},
		{give: Under("anchors.active.", New("mix", "too big")), want: "anchors.active.mix: too big"},
		{give: Under("anchors.active.", fmt.Errorf("wrapped: %w", AtLine("floor", 2, "low"))), want: "anchors.active.floor: line 2: low"},
		{give: Under("debias.", errors.New("plain")), want: "debias: plain"},
	} {
		if got := tt.give.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	if Under("x.", nil) != nil {
		t.Error("Under(nil) is not nil")
	}
	if fe, ok := As(fmt.Errorf("w: %w", New("a", "b"))); !ok || fe.Path != "a" || fe.Msg != "b" {
		t.Errorf("As = %+v, %v", fe, ok)
	}
}
