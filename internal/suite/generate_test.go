package suite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/tabular"
)

// failing wraps the real engine and replaces the outcome of the reference
// programs at the given panel positions of each task's kind.
func failing(kind tabular.Kind, size int, outcome map[int]func() (float64, error)) scoreFunc {
	return func(ctx context.Context, text string, d *tabular.Dataset, s uint64) (float64, error) {
		if d.Kind == kind {
			if f, ok := outcome[panelIndex(kind, size, text)]; ok {
				return f()
			}
		}
		return engineScore(ctx, text, d, s)
	}
}

func TestLeaderboardToleratesFewReferenceFailures(t *testing.T) {
	ctx := context.Background()
	opts := Options{Seed: 3, Train: 2, HeldOut: 0, MinRows: 150, MaxRows: 200, MaxFeatures: 6, PanelSize: 10}
	solution := func() (float64, error) { return 0, fmt.Errorf("model ridge: %w", tabular.ErrNumerical) }
	nan := func() (float64, error) { return math.NaN(), nil }
	bug := func() (float64, error) { return 0, errors.New("index out of range") }
	tests := []struct {
		name    string
		give    map[int]func() (float64, error)
		wantLen int    // 0: an error is expected
		wantErr string // part of the error
	}{
		{"none", nil, 10, ""},
		{"one numerical", map[int]func() (float64, error){1: solution}, 9, ""},
		{"one NaN", map[int]func() (float64, error){4: nan}, 9, ""},
		{"two failures", map[int]func() (float64, error){1: solution, 4: nan}, 0, "2 of 10 reference programs failed"},
		{"a bug", map[int]func() (float64, error){2: bug}, 0, "index out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := generate(ctx, opts, failing(tabular.Regression, 10, tt.give), 1, nil)
			if tt.wantLen == 0 {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range s.Tasks {
				want := 10
				if tk.Kind == tabular.Regression {
					want = tt.wantLen
				}
				if len(tk.Leaderboard) != want {
					t.Errorf("%s: %d scores, want %d", tk.ID, len(tk.Leaderboard), want)
				}
			}
		})
	}
}
