package budget

import (
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/suite"
)

func TestOverBudget(t *testing.T) {
	s, err := suite.Generate(t.Context(), suite.Options{Seed: 5, Train: 2, HeldOut: 2, MinRows: 120, MaxRows: 200, MaxFeatures: 6, PanelSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	tk := s.Tasks[0]
	tests := []struct {
		give   string
		budget float64
		want   bool
	}{
		{give: "gbt trees=2000 depth=10", budget: 1e7, want: true},
		{give: "gbt trees=2000 depth=10", budget: 0, want: false}, // no budget
		{give: "mean", budget: 1e4, want: false},
		{give: "not a program", budget: 1, want: false}, // scored as invalid instead
	}
	for _, tt := range tests {
		est, got := OverBudget(executor.NewJob(tk, tt.give, 1), tt.budget)
		if got != tt.want {
			t.Errorf("OverBudget(%q, %g) = %v (estimate %g), want %v", tt.give, tt.budget, got, est, tt.want)
		}
	}
}

func TestRefusal(t *testing.T) {
	r := Refusal(3e9, DefaultBudget)
	if r.Status != executor.StatusTimeout || !strings.Contains(r.Detail, "exceeds the budget of 2e+09") {
		t.Errorf("Refusal = %+v: want a timeout that names the budget", r)
	}
}
