package worldmodel

import (
	"math"
	"testing"
)

func TestRanks(t *testing.T) {
	tests := []struct {
		name string
		give []float64
		want []float64
	}{
		{"empty", nil, []float64{}},
		{"sorted", []float64{1, 2, 3}, []float64{1, 2, 3}},
		{"reversed", []float64{3, 2, 1}, []float64{3, 2, 1}},
		{"pair tie", []float64{10, 20, 20, 30}, []float64{1, 2.5, 2.5, 4}},
		{"all tied", []float64{5, 5, 5}, []float64{2, 2, 2}},
		{"unsorted ties", []float64{0.2, 0.1, 0.2, 0.1, 0.5}, []float64{3.5, 1.5, 3.5, 1.5, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Ranks(tt.give)
			if len(got) != len(tt.want) {
				t.Fatalf("Ranks(%v) = %v, want %v", tt.give, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("Ranks(%v) = %v, want %v", tt.give, got, tt.want)
				}
			}
		})
	}
}

func TestSpearman(t *testing.T) {
	tests := []struct {
		name   string
		x, y   []float64
		want   float64
		wantOK bool
	}{
		{"perfect", []float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1, true},
		{"monotone non-linear", []float64{1, 2, 3, 4}, []float64{1, 4, 9, 100}, 1, true},
		{"reversed", []float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1, true},
		// Ranks x: 1,2,3,4,5; y: 2,1,4,3,5 -> d^2 sum 4, rho = 1 - 6*4/(5*24) = 0.8.
		{"classic", []float64{1, 2, 3, 4, 5}, []float64{2, 1, 4, 3, 5}, 0.8, true},
		// Ties: ranks x 1.5,1.5,3,4; y 1,2,3,4 -> pearson of ranks.
		{"ties", []float64{0, 0, 1, 2}, []float64{1, 2, 3, 4}, 0.9486832980505138, true},
		{"constant side", []float64{1, 1, 1}, []float64{1, 2, 3}, 0, false},
		{"one pair", []float64{1}, []float64{1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Spearman(tt.x, tt.y)
			if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("Spearman = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestWithinGroupSpearman(t *testing.T) {
	// Group a is perfectly ranked, group b reversed, group c constant (left
	// out), group d has one member (left out). Across groups the pooled
	// correlation would be high, within groups it averages to 0.
	group := []string{"a", "b", "a", "b", "c", "c", "a", "d"}
	pred := []float64{0.1, 0.9, 0.2, 0.8, 0.5, 0.6, 0.3, 0.4}
	real := []float64{0.1, 0.1, 0.5, 0.6, 0.3, 0.3, 0.9, 0.2}
	got, n := WithinGroupSpearman(group, pred, real)
	if n != 2 || math.Abs(got-0) > 1e-12 {
		t.Fatalf("WithinGroupSpearman = %v over %d groups, want 0 over 2", got, n)
	}
	got, n = WithinGroupSpearman([]string{"x", "x"}, []float64{1, 2}, []float64{3, 3})
	if n != 0 || got != 0 {
		t.Fatalf("all-undefined groups: got %v over %d, want 0 over 0", got, n)
	}
}
