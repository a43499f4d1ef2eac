package isotonic

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestFit(t *testing.T) {
	tests := []struct {
		name    string
		x, y, w []float64
		want    Map
	}{
		{
			name: "single point",
			x:    []float64{0.5}, y: []float64{0.3},
			want: Map{X: []float64{0.5}, Y: []float64{0.3}},
		},
		{
			name: "already sorted and increasing",
			x:    []float64{1, 2, 3}, y: []float64{1, 2, 3},
			want: Map{X: []float64{1, 2, 3}, Y: []float64{1, 2, 3}},
		},
		{
			name: "unsorted x",
			x:    []float64{3, 1, 2}, y: []float64{30, 10, 20},
			want: Map{X: []float64{1, 2, 3}, Y: []float64{10, 20, 30}},
		},
		{
			name: "reversed pools into one block",
			x:    []float64{1, 2, 3}, y: []float64{3, 2, 1},
			want: Map{X: []float64{1, 3}, Y: []float64{2, 2}},
		},
		{
			name: "constant y keeps first and last x",
			x:    []float64{1, 2, 3, 4}, y: []float64{5, 5, 5, 5},
			want: Map{X: []float64{1, 4}, Y: []float64{5, 5}},
		},
		{
			name: "two violations",
			x:    []float64{1, 2, 3, 4, 5}, y: []float64{1, 3, 2, 4, 3.5},
			want: Map{X: []float64{1, 2, 3, 4, 5}, Y: []float64{1, 2.5, 2.5, 3.75, 3.75}},
		},
		{
			name: "backtracking merge",
			x:    []float64{1, 2, 3, 4}, y: []float64{1, 2, 3, -2},
			want: Map{X: []float64{1, 4}, Y: []float64{1, 1}},
		},
		{
			name: "ties pooled by mean",
			x:    []float64{1, 1, 2}, y: []float64{0, 2, 3},
			want: Map{X: []float64{1, 2}, Y: []float64{1, 3}},
		},
		{
			name: "ties pooled then violate",
			x:    []float64{2, 1, 1}, y: []float64{0, 4, 2},
			want: Map{X: []float64{1, 2}, Y: []float64{2, 2}},
		},
		{
			name: "weights",
			x:    []float64{1, 2}, y: []float64{2, 0}, w: []float64{3, 1},
			want: Map{X: []float64{1, 2}, Y: []float64{1.5, 1.5}},
		},
		{
			name: "weighted ties",
			x:    []float64{1, 1}, y: []float64{0, 1}, w: []float64{1, 3},
			want: Map{X: []float64{1}, Y: []float64{0.75}},
		},
		{
			name: "weighted ties then violation",
			x:    []float64{1, 1, 2}, y: []float64{4, 0, 0}, w: []float64{1, 1, 2},
			want: Map{X: []float64{1, 2}, Y: []float64{1, 1}},
		},
		{
			name: "negative zero ties with zero",
			x:    []float64{math.Copysign(0, -1), 0, -1}, y: []float64{0, 2, -1},
			want: Map{X: []float64{-1, 0}, Y: []float64{-1, 1}},
		},
		{
			name: "negative and positive x",
			x:    []float64{-2, 5, -7, 0.5}, y: []float64{2, 4, 1, 3},
			want: Map{X: []float64{-7, -2, 0.5, 5}, Y: []float64{1, 2, 3, 4}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Fit(tt.x, tt.y, tt.w)
			if err != nil {
				t.Fatalf("Fit: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Fit = %+v, want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestFitErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name    string
		x, y, w []float64
		want    string
	}{
		{"length mismatch", []float64{1, 2}, []float64{1}, nil, "2 x values but 1 y values"},
		{"weight length", []float64{1, 2}, []float64{1, 2}, []float64{1}, "1 weights for 2 points"},
		{"nan x", []float64{1, 2, nan}, []float64{1, 2, 3}, nil, "point 2: x is NaN"},
		{"inf x", []float64{-inf, 2}, []float64{1, 2}, nil, "point 0: x is -Inf"},
		{"nan y", []float64{1, 2}, []float64{1, nan}, nil, "point 1: y is NaN"},
		{"inf y", []float64{1, 2, 3, 4}, []float64{1, 2, 3, inf}, nil, "point 3: y is +Inf"},
		{"zero weight", []float64{1, 2}, []float64{1, 2}, []float64{1, 0}, "point 1: weight 0 is not positive"},
		{"negative weight", []float64{1, 2}, []float64{1, 2}, []float64{-1, 1}, "point 0: weight -1 is not positive"},
		{"nan weight", []float64{1, 2}, []float64{1, 2}, []float64{1, nan}, "point 1: weight NaN is not positive"},
		{"inf weight", []float64{1, 2}, []float64{1, 2}, []float64{inf, 1}, "point 0: weight +Inf is not positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Fit(tt.x, tt.y, tt.w)
			if err == nil {
				t.Fatalf("Fit = %+v, want error %q", m, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if _, err := Fit(nil, nil, nil); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Fit(nil) error = %v, want ErrEmpty", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		give Map
		want string // empty: valid
	}{
		{"identity", Map{}, ""},
		{"single knot", Map{X: []float64{1}, Y: []float64{2}}, ""},
		{"flat and rising", Map{X: []float64{0, 1, 2}, Y: []float64{1, 1, 3}}, ""},
		{"lengths", Map{X: []float64{0, 1}, Y: []float64{1}}, "2 x values but 1 y values"},
		{"x repeated", Map{X: []float64{0, 1, 1}, Y: []float64{0, 1, 2}}, "knot 2: x 1 not above previous 1"},
		{"x decreasing", Map{X: []float64{0, -1}, Y: []float64{0, 1}}, "knot 1: x -1 not above previous 0"},
		{"y decreasing", Map{X: []float64{0, 1}, Y: []float64{1, 0.5}}, "knot 1: y 0.5 below previous 1"},
		{"nan", Map{X: []float64{0, math.NaN()}, Y: []float64{0, 1}}, "knot 1: not finite"},
		{"inf", Map{X: []float64{0}, Y: []float64{math.Inf(-1)}}, "knot 0: not finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate = nil, want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	m := Map{X: []float64{0, 1, 3}, Y: []float64{1, 2, 6}}
	tests := []struct {
		give, want float64
	}{
		{-5, 1}, // clamped below
		{0, 1},  // first knot
		{0.5, 1.5},
		{1, 2}, // inner knot
		{2, 4}, // slope 2 on [1,3]
		{2.5, 5},
		{3, 6},     // last knot
		{1e300, 6}, // clamped above
	}
	for _, tt := range tests {
		if got := m.Apply(tt.give); got != tt.want {
			t.Errorf("Apply(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
	if got := (Map{}).Apply(0.37); got != 0.37 {
		t.Errorf("identity Apply(0.37) = %v", got)
	}
	one := Map{X: []float64{0.5}, Y: []float64{0.2}}
	for _, v := range []float64{-1, 0.5, 2} {
		if got := one.Apply(v); got != 0.2 {
			t.Errorf("single-knot Apply(%v) = %v, want 0.2", v, got)
		}
	}
	src := []float64{-1, 0.5, 2, 9}
	dst := make([]float64, len(src))
	m.ApplyAll(dst, src)
	if want := []float64{1, 1.5, 4, 6}; !reflect.DeepEqual(dst, want) {
		t.Errorf("ApplyAll = %v, want %v", dst, want)
	}
}

func TestApplyAllLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("ApplyAll with mismatched lengths did not panic")
		}
	}()
	Map{}.ApplyAll(make([]float64, 1), make([]float64, 2))
}

func TestMapJSONRoundTrip(t *testing.T) {
	give := Map{X: []float64{0.1, 0.7}, Y: []float64{0.25, 0.5}}
	b, err := json.Marshal(give)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"x":[0.1,0.7],"y":[0.25,0.5]}` {
		t.Fatalf("json = %s", b)
	}
	var got Map
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, give) {
		t.Fatalf("round trip = %+v, want %+v", got, give)
	}
}

func TestFitBinned(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
		bins int
		want Map
	}{
		{
			name: "one point per bin, increasing",
			x:    []float64{0.05, 0.55, 0.95}, y: []float64{0.1, 0.2, 0.3}, bins: 2,
			// bin 0: (0.05, 0.1); bin 1: mean x 0.75, mean y 0.25, weight 2.
			want: Map{X: []float64{0.05, 0.75}, Y: []float64{0.1, 0.25}},
		},
		{
			name: "bins weighted by count",
			x:    []float64{0.125, 0.25, 0.375, 0.875}, y: []float64{1, 1, 1, 0}, bins: 2,
			// bin 0: (0.25, 1, w3); bin 1: (0.875, 0, w1) -> pooled (3+0)/4.
			want: Map{X: []float64{0.25, 0.875}, Y: []float64{0.75, 0.75}},
		},
		{
			name: "outside values clamp into end bins",
			x:    []float64{-3, 1e300, 0.25, 1}, y: []float64{0, 1, 0.5, 1}, bins: 4,
			// bin 0: (-3, 0); bin 1: (0.25, 0.5); bin 3: mean(1e300, 1), 1.
			want: Map{X: []float64{-3, 0.25, 5e299}, Y: []float64{0, 0.5, 1}},
		},
		{
			name: "one bin is the overall mean",
			x:    []float64{0.2, 0.4}, y: []float64{1, 3}, bins: 1,
			want: Map{X: []float64{0.30000000000000004}, Y: []float64{2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FitBinned(tt.x, tt.y, tt.bins)
			if err != nil {
				t.Fatalf("FitBinned: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FitBinned = %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := FitBinned([]float64{0.5}, []float64{0.5}, 0); err == nil || !strings.Contains(err.Error(), "bins must be at least 1") {
		t.Fatalf("bins 0: error %v", err)
	}
	if _, err := FitBinned([]float64{0.5, math.NaN()}, []float64{0.5, 1}, 3); err == nil || !strings.Contains(err.Error(), "point 1") {
		t.Fatalf("NaN x: error %v", err)
	}
	if _, err := FitBinned(nil, nil, 3); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty: error %v", err)
	}
}

// TestBinOfMatchesNumpy: the bins of numpy.digitize(x, numpy.linspace(0, 1,
// bins+1)) - 1, clipped to [0, bins-1], as numpy 1.24.2 printed them for
// these scores (scores on decimal edges such as 0.3, 0.6 and 0.7 fall below
// numpy's edge).
func TestBinOfMatchesNumpy(t *testing.T) {
	xs := []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0 / 3, 2.0 / 3, 0.2857142857142857, -0.1, 1.5}
	tests := []struct {
		bins int
		want []int
	}{
		{10, []int{0, 1, 2, 2, 4, 5, 5, 6, 8, 9, 9, 3, 6, 2, 0, 9}},
		{5, []int{0, 0, 1, 1, 2, 2, 2, 3, 4, 4, 4, 1, 3, 1, 0, 4}},
		{3, []int{0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 1, 2, 0, 0, 2}},
		{7, []int{0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 2, 4, 2, 0, 6}},
	}
	for _, tt := range tests {
		for i, x := range xs {
			if got := binOf(x, tt.bins); got != tt.want[i] {
				t.Errorf("binOf(%v, %d) = %d, numpy says %d", x, tt.bins, got, tt.want[i])
			}
		}
	}
	if got := binOf(math.NaN(), 4); got != 0 {
		t.Errorf("binOf(NaN) = %d", got)
	}
	if got := binOf(math.Inf(1), 4); got != 3 {
		t.Errorf("binOf(+Inf) = %d", got)
	}
	if got := binOf(0.5, 1); got != 0 {
		t.Errorf("binOf(0.5, 1) = %d", got)
	}
}

func TestFitBinnedWeighted(t *testing.T) {
	x := []float64{0.05, 0.08, 0.55, 0.58}
	y := []float64{0.1, 0.4, 0.6, 0.9}
	// Unit weights are FitBinned.
	a, err := FitBinned(x, y, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FitBinnedWeighted(x, y, []float64{1, 1, 1, 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("unit weights: %+v, FitBinned %+v", b, a)
	}
	// Weight 3 on the second point: bin 0's mean y is (0.1 + 3·0.4)/4.
	m, err := FitBinnedWeighted(x, y, []float64{1, 3, 1, 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantX := (0.05 + 3*0.08) / 4
	if got := m.Apply(wantX); math.Abs(got-0.325) > 1e-12 {
		t.Errorf("f(%v) = %v, want 0.325", wantX, got)
	}
	if _, err := FitBinnedWeighted(x, y, []float64{1, 0, 1, 1}, 2); err == nil {
		t.Error("a zero weight was accepted")
	}
}
