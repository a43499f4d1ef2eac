package main

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	x, y := generate(5000, 3)
	x2, y2 := generate(5000, 3)
	if !slices.Equal(x, x2) || !slices.Equal(y, y2) {
		t.Fatal("same seed gave different data")
	}
	x3, _ := generate(5000, 4)
	if slices.Equal(x, x3) {
		t.Fatal("different seeds gave the same data")
	}
	distinct := map[float64]bool{}
	for i := range x {
		if x[i] < 0 || x[i] > 1 || y[i] < 0 || y[i] > 1 {
			t.Fatalf("pair %d (%v, %v) outside [0,1]", i, x[i], y[i])
		}
		distinct[x[i]] = true
	}
	if len(distinct) > len(x)*3/4 {
		t.Fatalf("%d distinct x in %d: want many ties", len(distinct), len(x))
	}
	if gap := minGap(x); gap < 1e-13 {
		t.Fatalf("min gap %v", gap)
	}
}

func TestFloatsRoundTrip(t *testing.T) {
	give := []float64{0, math.Copysign(0, -1), 1.5, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1)}
	path := filepath.Join(t.TempDir(), "v")
	if err := writeFloats(path, give); err != nil {
		t.Fatal(err)
	}
	got, err := readFloats(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range give {
		if math.Float64bits(got[i]) != math.Float64bits(give[i]) {
			t.Fatalf("value %d: %v, want %v", i, got[i], give[i])
		}
	}
}

func TestHelpers(t *testing.T) {
	tests := []struct {
		name       string
		give, want float64
	}{
		{"median odd", median([]float64{3, 1, 2}), 2},
		{"median even", median([]float64{4, 1, 3, 2}), 2.5},
		{"max abs diff", maxAbsDiff([]float64{1, 2, 3}, []float64{1, 2.5, 2}), 1},
		{"min gap", minGap([]float64{0.5, 0.1, 0.5, 0.4}), 0.09999999999999998},
		{"min gap all equal", minGap([]float64{2, 2}), math.Inf(1)},
	}
	for _, tt := range tests {
		if tt.give != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.give, tt.want)
		}
	}
	if d := maxAbsDiff([]float64{1, math.NaN()}, []float64{1, 2}); !math.IsNaN(d) {
		t.Errorf("maxAbsDiff with NaN = %v, want NaN", d)
	}
	q := queries([]float64{0.25, 0.75})
	if len(q) != 20003 || q[0] != -0.5 || q[20000] != 1.5 || q[10000] != 0.5 || q[20001] != 0.25 {
		t.Errorf("queries: len %d, q[0] %v, q[10000] %v, q[20000] %v, q[20001] %v", len(q), q[0], q[10000], q[20000], q[20001])
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-sizes", "10, 200", "-repeats", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.sizes, []int{10, 200}) || cfg.repeats != 3 || cfg.tol != 1e-9 {
		t.Fatalf("config %+v", cfg)
	}
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"-sizes", "10,x"}, `size "x": not a positive integer`},
		{[]string{"-sizes", "0"}, `size "0": not a positive integer`},
		{[]string{"-repeats", "0"}, "repeats must be at least 1, got 0"},
	}
	for _, tt := range tests {
		if _, err := parseFlags(tt.give); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags(%q) error = %v, want %q", tt.give, err, tt.want)
		}
	}
}
