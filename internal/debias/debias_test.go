package debias

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/isotonic"
	"pgregory.net/rapid"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string // substring of the error, "" for valid
	}{
		{"default", Default(), ""},
		{"binned", Config{Method: MethodBinned, Bins: 1}, ""},
		{"window", Config{Method: MethodPAVA, Bins: 10, MinPairs: 0, Window: 5}, ""},
		{"empty method", Config{Bins: 10}, "method"},
		{"unknown method", Config{Method: "spline", Bins: 10}, `method: "spline"`},
		{"zero bins", Config{Method: MethodPAVA}, "bins"},
		{"negative min pairs", Config{Method: MethodPAVA, Bins: 10, MinPairs: -1}, "min_pairs"},
		{"negative window", Config{Method: MethodPAVA, Bins: 10, Window: -3}, "window"},
		{"too many bins", Config{Method: MethodBinned, Bins: 1_000_001}, "bins: 1000001"},
		{"huge window", Config{Method: MethodPAVA, Bins: 10, Window: math.MaxInt32 + 1}, "window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestFitRejectsBadConfig(t *testing.T) {
	_, err := Fit([]Pair{{WM: 0.1, Env: 0.2}}, Config{Method: "x", Bins: 1})
	if err == nil || !strings.Contains(err.Error(), "method") {
		t.Fatalf("Fit = %v, want a method error", err)
	}
}

func TestFitRejectsNonFinite(t *testing.T) {
	pairs := []Pair{{WM: 0.1, Env: 0.2}, {WM: math.NaN(), Env: 0.3}}
	for _, method := range []string{MethodPAVA, MethodBinned} {
		cfg := Config{Method: method, Bins: 4, MinPairs: 1}
		if _, err := Fit(pairs, cfg); err == nil {
			t.Errorf("%s: Fit accepted a NaN score", method)
		}
	}
}

// ramp returns n pairs whose env score is a strictly increasing function of
// the wm score, so every fit has knots.
func ramp(n int) []Pair {
	p := make([]Pair, n)
	for i := range p {
		x := float64(i+1) / float64(n+1)
		p[i] = Pair{WM: x, Env: x * x}
	}
	return p
}

func TestFitIdentityBeforeMinPairs(t *testing.T) {
	tests := []struct {
		give     int // number of pairs
		minPairs int
		window   int
		want     bool // identity
	}{
		{give: 0, minPairs: 0, want: true},
		{give: 0, minPairs: 5, want: true},
		{give: 4, minPairs: 5, want: true},
		{give: 5, minPairs: 5, want: false},
		{give: 1, minPairs: 0, want: false},
		{give: 1, minPairs: 1, want: false},
		// The window counts, not the run: 10 pairs, a window of 3 < 5.
		{give: 10, minPairs: 5, window: 3, want: true},
		{give: 10, minPairs: 5, window: 5, want: false},
	}
	for _, method := range []string{MethodPAVA, MethodBinned} {
		for _, tt := range tests {
			cfg := Config{Method: method, Bins: 10, MinPairs: tt.minPairs, Window: tt.window}
			m, err := Fit(ramp(tt.give), cfg)
			if err != nil {
				t.Fatalf("%s %+v: %v", method, tt, err)
			}
			if m.Identity() != tt.want {
				t.Errorf("%s %d pairs, min %d, window %d: identity = %v, want %v (knots %v)",
					method, tt.give, tt.minPairs, tt.window, m.Identity(), tt.want, m.X)
			}
			if m.Identity() && (m.Apply(0.37) != 0.37) {
				t.Errorf("identity map moved 0.37 to %v", m.Apply(0.37))
			}
		}
	}
}

func TestFitWindowUsesLastPairs(t *testing.T) {
	// Old pairs say env = 0.9 whatever wm; recent ones say env = wm². A window of
	// the recent pairs must ignore the old ones entirely.
	var pairs []Pair
	for i := range 20 {
		x := float64(i) / 20
		pairs = append(pairs, Pair{WM: x, Env: 0.9})
	}
	recent := ramp(8)
	pairs = append(pairs, recent...)
	cfg := Config{Method: MethodPAVA, Bins: 10, MinPairs: 1, Window: len(recent)}
	got, err := Fit(pairs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Window = 0
	want, err := Fit(recent, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("windowed fit %+v, want the fit of the last %d pairs %+v", got, len(recent), want)
	}
	all, err := Fit(pairs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(all, got) {
		t.Fatal("the fit on all pairs equals the windowed fit: the window had no effect")
	}
}

func TestDebiaserFIFOWindow(t *testing.T) {
	cfg := Config{Method: MethodPAVA, Bins: 10, MinPairs: 2, Window: 4}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	all := ramp(11)
	for i, p := range all {
		if _, err := d.Step([]Pair{p}); err != nil {
			t.Fatal(err)
		}
		lo := max(0, i+1-cfg.Window)
		if want := all[lo : i+1]; !reflect.DeepEqual(d.Pairs, want) {
			t.Fatalf("after %d pairs the window is %v, want %v", i+1, d.Pairs, want)
		}
		if d.Seen != i+1 || d.Steps != i+1 {
			t.Fatalf("after %d pairs: seen %d, steps %d", i+1, d.Seen, d.Steps)
		}
		if got := d.Map.Identity(); got != (i+1 < cfg.MinPairs) {
			t.Fatalf("after %d pairs: identity = %v", i+1, got)
		}
	}
	// A batch larger than the window keeps its own last Window pairs.
	if _, err := d.Step(all[:7]); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Pairs, all[3:7]) {
		t.Fatalf("window after a large batch %v, want %v", d.Pairs, all[3:7])
	}
}

func TestDebiaserStepRejectsNonFinite(t *testing.T) {
	d, err := New(Config{Method: MethodPAVA, Bins: 10, MinPairs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Step(ramp(3)); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(d)
	for _, bad := range []Pair{{WM: math.Inf(1), Env: 0.5}, {WM: 0.5, Env: math.NaN()}} {
		if _, err := d.Step([]Pair{{WM: 0.2, Env: 0.2}, bad}); err == nil {
			t.Fatalf("Step accepted %+v", bad)
		}
		after, _ := json.Marshal(d)
		if string(after) != string(before) {
			t.Fatalf("a rejected step changed the state:\n%s\n%s", before, after)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(Config{Method: MethodBinned, Bins: 0}); err == nil || !strings.Contains(err.Error(), "bins") {
		t.Fatalf("New = %v, want a bins error", err)
	}
}

// genPairs draws small pairs with scores on a coarse grid in [0,1], so ties
// in wm are frequent.
func genPairs(t *rapid.T, label string, maxLen int) []Pair {
	score := rapid.Map(rapid.IntRange(0, 20), func(v int) float64 { return float64(v) / 20 })
	group := rapid.SampledFrom([]string{"", "a", "b", "c"})
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Pair {
		return Pair{WM: score.Draw(t, "wm"), Env: score.Draw(t, "env"), Group: group.Draw(t, "group")}
	}), 0, maxLen).Draw(t, label)
}

func genConfig(t *rapid.T) Config {
	return Config{
		Method:   rapid.SampledFrom([]string{MethodPAVA, MethodBinned}).Draw(t, "method"),
		Bins:     rapid.IntRange(1, 12).Draw(t, "bins"),
		MinPairs: rapid.IntRange(0, 10).Draw(t, "minPairs"),
		Window:   rapid.IntRange(0, 12).Draw(t, "window"),
	}
}

func TestFitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pairs := genPairs(t, "pairs", 30)
		cfg := genConfig(t)
		m, err := Fit(pairs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("invalid map: %v", err)
		}
		w := cfg.Windowed(pairs)
		if len(w) < cfg.MinPairs || len(w) == 0 {
			if !m.Identity() {
				t.Fatalf("%d pairs in the window < min %d, but the map has knots %v", len(w), cfg.MinPairs, m.X)
			}
			return
		}
		if m.Identity() {
			t.Fatal("enough pairs but the map is the identity")
		}
		// The map is non-decreasing everywhere and stays within the env range.
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range w {
			lo, hi = min(lo, p.Env), max(hi, p.Env)
		}
		prev := math.Inf(-1)
		for v := range 41 {
			y := m.Apply(float64(v)/40*1.2 - 0.1)
			if y < prev {
				t.Fatalf("map decreases at %v: %v after %v", float64(v)/40*1.2-0.1, y, prev)
			}
			if y < lo-1e-12 || y > hi+1e-12 {
				t.Fatalf("map value %v outside env range [%v,%v]", y, lo, hi)
			}
			prev = y
		}
		// Only the window matters.
		if cfg.Window > 0 {
			noWin := cfg
			noWin.Window = 0
			m2, err := Fit(w, noWin)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m, m2) {
				t.Fatalf("windowed fit %v differs from the fit of the window %v", m, m2)
			}
		}
	})
}

func TestDebiaserMatchesBatchFit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		steps := rapid.IntRange(1, 6).Draw(t, "steps")
		var all []Pair
		for s := range steps {
			batch := genPairs(t, "batch", 8)
			all = append(all, batch...)
			got, err := d.Step(batch)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Fit(all, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: online map %+v, batch map %+v", s, got, want)
			}
			if cfg.Window > 0 && len(d.Pairs) > cfg.Window {
				t.Fatalf("window %d holds %d pairs", cfg.Window, len(d.Pairs))
			}
			if d.Seen != len(all) {
				t.Fatalf("seen %d, want %d", d.Seen, len(all))
			}
		}
	})
}

func TestDebiaserJSONRoundTrip(t *testing.T) {
	cfg := Config{Method: MethodBinned, Bins: 5, MinPairs: 3, Window: 6}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pairs := ramp(12)
	for i := range pairs {
		pairs[i].Group = string(rune('a' + i%3))
	}
	if _, err := a.Step(pairs[:5]); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var b Debiaser
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*a, b) {
		t.Fatalf("round trip changed the state:\n%+v\n%+v", *a, b)
	}
	// Both continue identically.
	ma, err := a.Step(pairs[5:])
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.Step(pairs[5:])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ma, mb) || !reflect.DeepEqual(*a, b) {
		t.Fatalf("restored debiaser diverged: %+v vs %+v", ma, mb)
	}
}

func TestBiasHandComputed(t *testing.T) {
	pairs := []Pair{
		{WM: 0.2, Env: 0.1, Group: "a"},
		{WM: 0.4, Env: 0.5, Group: "a"},
		{WM: 0.9, Env: 0.0, Group: "single"}, // a group of one: no residual
		{WM: 1.0, Env: 0.0},                  // no group
	}
	// Group a: means 0.3 and 0.3; residuals (-0.1)-(-0.2) = 0.1 and
	// 0.1-0.2 = -0.1; RMS 0.1.
	before, after, ok := Bias(pairs, isotonic.Map{})
	if !ok || math.Abs(before-0.1) > 1e-12 || after != before {
		t.Fatalf("Bias = %v, %v, %v; want 0.1, 0.1, true", before, after, ok)
	}
	// A map doubling the scores (within [0,1]): x = 0.4, 0.8, mean 0.6;
	// residuals (-0.2)-(-0.2) = 0 and 0.2-0.2 = 0.
	double := isotonic.Map{X: []float64{0, 0.5}, Y: []float64{0, 1}}
	_, after, _ = Bias(pairs, double)
	if math.Abs(after) > 1e-12 {
		t.Fatalf("after = %v, want 0", after)
	}
	mb, ma, ok := MeanBias(pairs, double)
	// before: (0.1 - 0.1 + 0.9 + 1.0) / 4; after: (0.3 + 0.3 + 1 + 1) / 4.
	if !ok || math.Abs(mb-1.9/4) > 1e-12 || math.Abs(ma-2.6/4) > 1e-12 {
		t.Fatalf("MeanBias = %v, %v, %v; want %v, %v, true", mb, ma, ok, 1.9/4, 2.6/4)
	}
}

func TestBiasNotAvailable(t *testing.T) {
	tests := []struct {
		name string
		give []Pair
	}{
		{"empty", nil},
		{"no groups", []Pair{{WM: 0.1, Env: 0.2}, {WM: 0.3, Env: 0.4}}},
		{"singletons", []Pair{{WM: 0.1, Env: 0.2, Group: "a"}, {WM: 0.3, Env: 0.4, Group: "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, a, ok := Bias(tt.give, isotonic.Map{}); ok || b != 0 || a != 0 {
				t.Fatalf("Bias = %v, %v, %v; want 0, 0, false", b, a, ok)
			}
		})
	}
	if _, _, ok := MeanBias(nil, isotonic.Map{}); ok {
		t.Fatal("MeanBias of no pairs is ok")
	}
}

func TestBiasProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pairs := genPairs(t, "pairs", 30)
		before, after, ok := Bias(pairs, isotonic.Map{})
		if before != after {
			t.Fatalf("identity map: before %v != after %v", before, after)
		}
		if before < 0 || math.IsNaN(before) {
			t.Fatalf("bias %v", before)
		}
		// Shifting each group's wm scores by a per-group constant leaves the
		// within-group residual unchanged.
		shift := map[string]float64{"a": 0.3, "b": -0.2, "c": 0.05}
		moved := make([]Pair, len(pairs))
		for i, p := range pairs {
			moved[i] = p
			moved[i].WM += shift[p.Group]
		}
		b2, _, ok2 := Bias(moved, isotonic.Map{})
		if ok2 != ok || math.Abs(b2-before) > 1e-9 {
			t.Fatalf("group shift changed the bias: %v -> %v", before, b2)
		}
	})
}

// distorted draws groups of anchor pairs whose wm score is a monotone,
// non-affine distortion of the env score plus a little noise.
func distorted(seed uint64, groups, size int) []Pair {
	r := rand.New(rand.NewPCG(seed, 7))
	var pairs []Pair
	for g := range groups {
		for range size {
			y := r.Float64()
			x := min(1, max(0, y*y*y+0.01*r.NormFloat64()))
			pairs = append(pairs, Pair{WM: x, Env: y, Group: string(rune('A'+g%26)) + string(rune('a'+g/26))})
		}
	}
	return pairs
}

func TestCalibrationReducesWithinGroupBias(t *testing.T) {
	train := distorted(1, 60, 8)
	test := distorted(2, 60, 8)
	for _, cfg := range []Config{
		{Method: MethodPAVA, Bins: 10, MinPairs: 32},
		{Method: MethodBinned, Bins: 20, MinPairs: 32},
	} {
		m, err := Fit(train, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range []struct {
			name  string
			pairs []Pair
		}{{"train", train}, {"held-out", test}} {
			name, pairs := set.name, set.pairs
			before, after, ok := Bias(pairs, m)
			if !ok {
				t.Fatalf("%s %s: no groups", cfg.Method, name)
			}
			if after > before/2 {
				t.Errorf("%s %s: within-group bias %.4f -> %.4f, want at least halved", cfg.Method, name, before, after)
			}
			mb, ma, _ := MeanBias(pairs, m)
			if math.Abs(ma) > math.Abs(mb)/2 {
				t.Errorf("%s %s: mean bias %.4f -> %.4f, want at least halved", cfg.Method, name, mb, ma)
			}
			t.Logf("%s %s: within-group %.4f -> %.4f, mean %.4f -> %.4f", cfg.Method, name, before, after, mb, ma)
		}
	}
}

// TestFitWeighted: a pair of weight 2 fits like the same pair twice, for
// both methods, and the mean bias weighs it the same way.
func TestFitWeighted(t *testing.T) {
	weighted := []Pair{{WM: 0.1, Env: 0.3}, {WM: 0.4, Env: 0.2, Weight: 2}, {WM: 0.7, Env: 0.9}, {WM: 0.9, Env: 0.6, Weight: 3}}
	var copies []Pair
	for _, p := range weighted {
		for range int(p.W()) {
			copies = append(copies, Pair{WM: p.WM, Env: p.Env})
		}
	}
	for _, method := range []string{MethodPAVA, MethodBinned} {
		cfg := Config{Method: method, Bins: 4, MinPairs: 1}
		a, err := Fit(weighted, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Fit(copies, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []float64{0, 0.1, 0.3, 0.4, 0.55, 0.7, 0.8, 0.9, 1} {
			if math.Abs(a.Apply(v)-b.Apply(v)) > 1e-12 {
				t.Errorf("%s: f(%v) = %v weighted, %v with copies", method, v, a.Apply(v), b.Apply(v))
			}
		}
		wb, wa, _ := MeanBias(weighted, a)
		cb, ca, _ := MeanBias(copies, b)
		if math.Abs(wb-cb) > 1e-12 || math.Abs(wa-ca) > 1e-12 {
			t.Errorf("%s: mean bias %v, %v weighted; %v, %v with copies", method, wb, wa, cb, ca)
		}
	}
	// Unit weights written out fit as no weights.
	unit := []Pair{{WM: 0.2, Env: 0.5, Weight: 1}, {WM: 0.6, Env: 0.1, Weight: 1}}
	a, _ := Fit(unit, Config{Method: MethodPAVA, Bins: 1, MinPairs: 1})
	b, _ := Fit([]Pair{{WM: 0.2, Env: 0.5}, {WM: 0.6, Env: 0.1}}, Config{Method: MethodPAVA, Bins: 1, MinPairs: 1})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("explicit unit weights: %+v, none: %+v", a, b)
	}
	d, _ := New(Default())
	if err := d.Add(Pair{WM: 0.5, Env: 0.5, Weight: -1}); err == nil {
		t.Error("a negative weight was accepted")
	}
}
