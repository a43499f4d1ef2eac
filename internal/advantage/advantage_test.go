package advantage

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestGroup(t *testing.T) {
	std := Default()
	centre := Default()
	centre.Standardize = false
	three := Default()
	three.MinGraded = 3
	// (0, 1): mean 1/2, population std 1/2, A = ±0.5/(0.5+1e-4).
	half := 0.5 / (0.5 + 1e-4)
	tests := []struct {
		name    string
		rewards []float64
		graded  []bool
		cfg     Config
		want    []float64
		wantOK  bool
	}{
		{name: "two", rewards: []float64{0, 1}, cfg: std, want: []float64{-half, half}, wantOK: true},
		{name: "ungraded excluded, not scored 0",
			rewards: []float64{0, 1, 0}, graded: []bool{true, true, false}, cfg: std,
			want: []float64{-half, half, 0}, wantOK: true},
		{name: "ungraded reward ignored",
			rewards: []float64{0, 1, 123}, graded: []bool{true, true, false}, cfg: std,
			want: []float64{-half, half, 0}, wantOK: true},
		{name: "one graded is skipped",
			rewards: []float64{0.3, 0.9, 0.1}, graded: []bool{false, true, false}, cfg: std,
			want: []float64{0, 0, 0}, wantOK: false},
		{name: "empty", rewards: nil, cfg: std, want: []float64{}, wantOK: false},
		{name: "min graded three",
			rewards: []float64{0.3, 0.9, 0.1}, graded: []bool{true, true, false}, cfg: three,
			want: []float64{0, 0, 0}, wantOK: false},
		{name: "all equal", rewards: []float64{0.1, 0.1, 0.1}, cfg: std, want: []float64{0, 0, 0}, wantOK: true},
		{name: "centre only",
			rewards: []float64{0.2, 0.5, 0.8, 0.7}, graded: []bool{true, true, true, false}, cfg: centre,
			want: []float64{-0.3, 0, 0.3, 0}, wantOK: true},
		// (0, 0, 1, 1, 1, 0.1 ungraded): mean 0.6, var 0.24, std 0.4899.
		{name: "by hand",
			rewards: []float64{0, 0, 1, 1, 1, 0.1}, graded: []bool{true, true, true, true, true, false}, cfg: std,
			want: []float64{
				-0.6 / (math.Sqrt(0.24) + 1e-4), -0.6 / (math.Sqrt(0.24) + 1e-4),
				0.4 / (math.Sqrt(0.24) + 1e-4), 0.4 / (math.Sqrt(0.24) + 1e-4), 0.4 / (math.Sqrt(0.24) + 1e-4), 0},
			wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Group(tt.rewards, tt.graded, tt.cfg)
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("len = %d, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !near(got[i], tt.want[i], 1e-12) {
					t.Errorf("adv = %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
}

func TestGroupPanics(t *testing.T) {
	tests := []struct {
		name    string
		rewards []float64
		graded  []bool
		cfg     Config
	}{
		{name: "length mismatch", rewards: []float64{0, 1}, graded: []bool{true}, cfg: Default()},
		{name: "NaN graded reward", rewards: []float64{0, math.NaN()}, cfg: Default()},
		{name: "invalid config", rewards: []float64{0, 1}, cfg: Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			Group(tt.rewards, tt.graded, tt.cfg)
		})
	}
	// A NaN in an ungraded slot is ignored, not a panic.
	if _, ok := Group([]float64{0, 1, math.NaN()}, []bool{true, true, false}, Default()); !ok {
		t.Error("ungraded NaN broke the group")
	}
}

func TestConfig(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default invalid: %v", err)
	}
	if d := Default(); d.Eps != 1e-4 || d.MinGraded != 2 || !d.Standardize {
		t.Errorf("Default = %+v", d)
	}
	tests := []struct {
		name      string
		give      Config
		wantField string
	}{
		{name: "zero eps", give: Config{Eps: 0, MinGraded: 2}, wantField: "eps"},
		{name: "NaN eps", give: Config{Eps: math.NaN(), MinGraded: 2}, wantField: "eps"},
		{name: "eps above one", give: Config{Eps: 1.5, MinGraded: 2}, wantField: "eps"},
		{name: "infinite eps", give: Config{Eps: math.Inf(1), MinGraded: 2}, wantField: "eps"},
		{name: "min graded one", give: Config{Eps: 1e-4, MinGraded: 1}, wantField: "min_graded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantField+":") {
				t.Errorf("error %v, want one naming %s", err, tt.wantField)
			}
		})
	}
	b, _ := json.Marshal(Default())
	if want := `{"standardize":true,"eps":0.0001,"min_graded":2}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}

// drawGroup draws rewards in [0,1] (some on the reward ladder, so ties are
// common) and graded flags.
func drawGroup(t *rapid.T) ([]float64, []bool) {
	n := rapid.IntRange(0, 12).Draw(t, "n")
	r := make([]float64, n)
	g := make([]bool, n)
	for i := range r {
		if rapid.Bool().Draw(t, "ladder") {
			r[i] = rapid.SampledFrom([]float64{0, 0.1, 0.2, 0.5, 1}).Draw(t, "r")
		} else {
			r[i] = rapid.Float64Range(0, 1).Draw(t, "r")
		}
		g[i] = rapid.Float64Range(0, 1).Draw(t, "p") < 0.85
	}
	return r, g
}

func TestGroupProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r, g := drawGroup(t)
		cfg := Default()
		cfg.Standardize = rapid.Bool().Draw(t, "standardize")
		adv, ok := Group(r, g, cfg)
		if len(adv) != len(r) {
			t.Fatalf("len %d, want %d", len(adv), len(r))
		}
		var graded []float64
		for i := range r {
			if g[i] {
				graded = append(graded, r[i])
			} else if adv[i] != 0 {
				t.Fatalf("ungraded trajectory %d has advantage %v", i, adv[i])
			}
		}
		if ok != (len(graded) >= cfg.MinGraded) {
			t.Fatalf("ok = %v with %d graded", ok, len(graded))
		}
		if !ok {
			for _, a := range adv {
				if a != 0 {
					t.Fatalf("skipped group has advantage %v", a)
				}
			}
			return
		}
		var mean, sumA float64
		for _, v := range graded {
			mean += v
		}
		mean /= float64(len(graded))
		var v2 float64
		for _, v := range graded {
			v2 += (v - mean) * (v - mean)
		}
		sd := math.Sqrt(v2 / float64(len(graded)))
		for i := range r {
			if !g[i] {
				continue
			}
			sumA += adv[i]
			want := r[i] - mean
			if cfg.Standardize {
				want /= sd + cfg.Eps
			}
			if !near(adv[i], want, 1e-9) {
				t.Fatalf("adv[%d] = %v, want %v", i, adv[i], want)
			}
		}
		if !near(sumA/float64(len(graded)), 0, 1e-12) {
			t.Fatalf("mean advantage over graded = %v", sumA/float64(len(graded)))
		}
		// Changing an ungraded reward changes nothing.
		r2 := append([]float64(nil), r...)
		for i := range r2 {
			if !g[i] {
				r2[i] = 7
			}
		}
		adv2, _ := Group(r2, g, cfg)
		for i := range adv {
			if adv[i] != adv2[i] {
				t.Fatalf("ungraded reward changed advantage %d: %v -> %v", i, adv[i], adv2[i])
			}
		}
	})
}

func TestWeights(t *testing.T) {
	tests := []struct {
		name   string
		anchor []bool
		rho    float64
		want   []float64
	}{
		{name: "empty", anchor: nil, rho: 2, want: []float64{}},
		{name: "rho one is uniform", anchor: []bool{true, false, false, false}, rho: 1, want: []float64{0.25, 0.25, 0.25, 0.25}},
		{name: "rho three", anchor: []bool{true, false, false, true}, rho: 3, want: []float64{0.375, 0.125, 0.125, 0.375}},
		{name: "all anchors", anchor: []bool{true, true}, rho: 9, want: []float64{0.5, 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Weights(tt.anchor, tt.rho)
			if len(got) != len(tt.want) {
				t.Fatalf("len %d, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !near(got[i], tt.want[i], 1e-15) {
					t.Fatalf("Weights = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestFuseAndShareProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "n")
		anchor := rapid.SliceOfN(rapid.Bool(), n, n).Draw(t, "anchor")
		adv := rapid.SliceOfN(rapid.Float64Range(-3, 3), n, n).Draw(t, "adv")
		rho := rapid.Float64Range(1, 1000).Draw(t, "rho")
		w := Weights(anchor, rho)
		coef := Fuse(adv, anchor, rho)
		var sumW, share, num, den float64
		for i := range w {
			sumW += w[i]
			if anchor[i] {
				share += w[i]
			}
			raw := 1.0
			if anchor[i] {
				raw = rho
			}
			num += raw * adv[i]
			den += raw
			if !near(coef[i], w[i]*adv[i], 1e-15) {
				t.Fatalf("coef[%d] = %v, want %v", i, coef[i], w[i]*adv[i])
			}
		}
		if !near(sumW, 1, 1e-12) {
			t.Fatalf("weights sum to %v", sumW)
		}
		if got := AnchorShare(anchor, rho); !near(got, share, 1e-12) {
			t.Fatalf("AnchorShare = %v, summed %v", got, share)
		}
		// Σ coef = Σ w_i A_i / Σ w_i with raw weights.
		var sumC float64
		for _, c := range coef {
			sumC += c
		}
		if !near(sumC, num/den, 1e-12) {
			t.Fatalf("Σ coef = %v, want %v", sumC, num/den)
		}
	})
}

func TestRhoPanics(t *testing.T) {
	for _, rho := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Weights with rho %v did not panic", rho)
				}
			}()
			Weights([]bool{true}, rho)
		}()
	}
}
