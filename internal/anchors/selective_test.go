package anchors

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestSelectiveLeftOut(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ratio  float64
		u      []float64
		sigma0 float64
		want   []int
	}{
		{"above the cut", 2, []float64{0.1, 0.25, 0.19, 0.3}, 0.1, []int{1, 3}},
		{"at the cut is kept (tie)", 2, []float64{0.2, 0.2000001, 0.2}, 0.1, []int{1}},
		{"all equal at sigma0, ratio 1", 1, []float64{0.1, 0.1, 0.1}, 0.1, []int{}},
		{"all equal at sigma0, ratio 2", 2, []float64{0.1, 0.1, 0.1}, 0.1, []int{}},
		{"all equal far above the run's cut", 2, []float64{0.5, 0.5, 0.5}, 0.1, []int{0, 1, 2}},
		{"ratio 1 leaves out everything above sigma0", 1, []float64{0.1, 0.11, 0.09}, 0.1, []int{1}},
		{"huge ratio leaves nothing out", 1e12, []float64{0.1, 5, 9}, 0.1, []int{}},
		{"sigma0 0: any residual is above", 2, []float64{0, 0, 0.01}, 0, []int{2}},
		{"no groups", 2, nil, 0.1, []int{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Selective{Ratio: tt.ratio}.LeftOut(tt.u, tt.sigma0)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !slices.Equal(got, tt.want) {
				t.Errorf("LeftOut(%v, %v) = %v, want %v", tt.u, tt.sigma0, got, tt.want)
			}
		})
	}
}

// TestSelectiveUnseenTaskKept: a task the run has never seen gets
// exactly σ0 from Uncertainty, so at κ = 1 it is kept; a task whose past
// residuals are large is left out.
func TestSelectiveUnseenTaskKept(t *testing.T) {
	past := []Residual{{Task: 0, Value: 0.05, Weight: 1}, {Task: 0, Value: -0.05, Weight: 2}, {Task: 1, Value: 0.6, Weight: 1}}
	for range 30 {
		past = append(past, Residual{Task: 1, Value: 0.6, Weight: 1}, Residual{Task: 0, Value: 0.02, Weight: 1})
	}
	u := Uncertainty([]int{7, 0, 1}, past)
	s0 := RunResidual(past)
	if u[0] != s0 {
		t.Fatalf("unseen task's uncertainty %v, run residual %v", u[0], s0)
	}
	got, err := Selective{Ratio: 1}.LeftOut(u, s0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{2}) {
		t.Errorf("left out %v (u %v, σ0 %v), want [2]", got, u, s0)
	}
	if RunResidual(nil) != DefaultPriorResidual {
		t.Errorf("RunResidual(nil) = %v", RunResidual(nil))
	}
}

// TestSelectiveDeterministic: the same inputs give the same groups, and
// the input slice is not modified.
func TestSelectiveDeterministic(t *testing.T) {
	u := []float64{0.3, 0.1, 0.5, 0.2, 0.5, 0.05}
	orig := slices.Clone(u)
	s := Selective{Ratio: DefaultSelectiveRatio}
	first, err := s.LeftOut(u, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		got, _ := s.LeftOut(u, 0.2)
		if !slices.Equal(got, first) {
			t.Fatalf("run gave %v, first %v", got, first)
		}
	}
	if !slices.Equal(u, orig) {
		t.Errorf("LeftOut modified its input: %v", u)
	}
	if !slices.Equal(first, []int{2, 4}) {
		t.Errorf("left out %v, want [2 4]", first)
	}
}

func TestSelectiveInvalid(t *testing.T) {
	for _, tt := range []struct {
		ratio, sigma0 float64
		u             []float64
		want          string
	}{
		{0, 0.1, nil, "ratio:"},
		{0.99, 0.1, nil, "ratio:"},
		{math.NaN(), 0.1, nil, "ratio:"},
		{math.Inf(1), 0.1, nil, "ratio:"},
		{2, math.NaN(), nil, "sigma0:"},
		{2, -1, nil, "sigma0:"},
		{2, 0.1, []float64{0.1, math.NaN()}, "uncertainty of group 1"},
		{2, 0.1, []float64{-0.1}, "uncertainty of group 0"},
	} {
		_, err := Selective{Ratio: tt.ratio}.LeftOut(tt.u, tt.sigma0)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ratio %v sigma0 %v u %v: error %v, want %q", tt.ratio, tt.sigma0, tt.u, err, tt.want)
		}
	}
}

func TestScoringString(t *testing.T) {
	for _, tt := range []struct {
		give Scoring
		want string
	}{
		{Scoring{Scored: 5, LeftOut: 1, Cut: 0.2, MaxRatio: 2.5}, "world model scored 5 groups, 1 left out (uncertainty above 0.2000; highest u/σ0 2.500)"},
		{Scoring{Scored: 1, LeftOut: 2, Cut: 0.0481}, "world model scored 1 group, 2 left out (uncertainty above 0.0481; highest u/σ0 0.000)"},
	} {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestMaxRatio(t *testing.T) {
	for _, tt := range []struct {
		u      []float64
		sigma0 float64
		skip   []int
		want   float64
	}{
		{[]float64{0.1, 0.3, 0.2}, 0.1, nil, 3},
		{[]float64{0.1, 0.3, 0.2}, 0.1, []int{1}, 2},
		{[]float64{0.1, 0.3}, 0.1, []int{0, 1}, 0},
		{[]float64{0.1, 0.3}, 0, nil, 0},
		{nil, 0.1, nil, 0},
	} {
		if got := MaxRatio(tt.u, tt.sigma0, tt.skip); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("MaxRatio(%v, %v, %v) = %v, want %v", tt.u, tt.sigma0, tt.skip, got, tt.want)
		}
	}
}
