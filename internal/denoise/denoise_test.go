package denoise

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestGroupS2(t *testing.T) {
	tests := []struct {
		name   string
		d, y   []float64
		want   float64
		wantOK bool
	}{
		{name: "empty", wantOK: false},
		{name: "one trajectory", d: []float64{0.3}, y: []float64{0.7}, wantOK: false},
		{name: "constant real scores", d: []float64{0.1, 0.9}, y: []float64{0.5, 0.5}, wantOK: false},
		{name: "tiny real variance", d: []float64{0.1, 0.9}, y: []float64{0.5, 0.5 + 1e-5}, wantOK: false},
		{name: "NaN", d: []float64{math.NaN(), 0.9}, y: []float64{0.1, 0.5}, wantOK: false},
		{name: "exact agreement", d: []float64{0.1, 0.5, 0.9}, y: []float64{0.1, 0.5, 0.9}, want: 0, wantOK: true},
		{name: "shift is free", d: []float64{0.3, 0.7, 1.1}, y: []float64{0.1, 0.5, 0.9}, want: 0, wantOK: true},
		// d constant: the centred difference is -(y - mean y), so s² = var/var = 1.
		{name: "constant world model", d: []float64{0.4, 0.4, 0.4, 0.4}, y: []float64{0, 1, 0, 1}, want: 1, wantOK: true},
		// d reversed around the mean: difference is -2(y - mean y), s² = 4.
		{name: "reversed", d: []float64{1, 0}, y: []float64{0, 1}, want: 4, wantOK: true},
		// By hand: y = (0, 0.5, 1), mean 0.5, var = 1/6; d = (0, 1, 1), mean 2/3,
		// centred (-2/3, 1/3, 1/3) minus (-1/2, 0, 1/2) = (-1/6, 1/3, -1/6);
		// mean square = (1/36 + 1/9 + 1/36)/3 = 1/18; s² = (1/18)/(1/6) = 1/3.
		{name: "by hand", d: []float64{0, 1, 1}, y: []float64{0, 0.5, 1}, want: 1.0 / 3, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := GroupS2(tt.d, tt.y)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("s2 = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGroupS2LengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	GroupS2([]float64{1, 2}, []float64{1})
}

func TestGroupS2Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 16).Draw(t, "n")
		y := rapid.SliceOfN(rapid.Float64Range(0, 1), n, n).Draw(t, "y")
		d := rapid.SliceOfN(rapid.Float64Range(0, 1), n, n).Draw(t, "d")
		s2, ok := GroupS2(d, y)
		if !ok {
			return
		}
		if s2 < 0 || !finite(s2) {
			t.Fatalf("s2 = %v", s2)
		}
		// Invariant to shifting either side and to permuting the pairs together.
		shift := rapid.Float64Range(-1, 1).Draw(t, "shift")
		d2 := make([]float64, n)
		for i := range d {
			d2[i] = d[n-1-i] + shift
		}
		y2 := make([]float64, n)
		for i := range y {
			y2[i] = y[n-1-i]
		}
		s2b, ok := GroupS2(d2, y2)
		if !ok || math.Abs(s2b-s2) > 1e-9*(1+s2) {
			t.Fatalf("shifted and reversed: %v, %v; want %v", s2b, ok, s2)
		}
		// Agreement gives zero.
		if z, _ := GroupS2(y, y); z != 0 {
			t.Fatalf("GroupS2(y, y) = %v", z)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name      string
		give      Config
		wantField string // "" for valid
	}{
		{name: "valid", give: Config{HalfLife: 50, WarmUp: 20}},
		{name: "valid cap", give: Config{HalfLife: 0.5, WarmUp: 1, RhoMax: 1}},
		{name: "zero half-life", give: Config{HalfLife: 0, WarmUp: 20}, wantField: "half_life"},
		{name: "infinite half-life", give: Config{HalfLife: math.Inf(1), WarmUp: 20}, wantField: "half_life"},
		{name: "no warm-up", give: Config{HalfLife: 50, WarmUp: 0}, wantField: "warm_up"},
		{name: "cap below one", give: Config{HalfLife: 50, WarmUp: 20, RhoMax: 0.5}, wantField: "rho_max"},
		{name: "negative cap", give: Config{HalfLife: 50, WarmUp: 20, RhoMax: -1}, wantField: "rho_max"},
		{name: "NaN cap", give: Config{HalfLife: 50, WarmUp: 20, RhoMax: math.NaN()}, wantField: "rho_max"},
		{name: "floor", give: Config{HalfLife: 50, WarmUp: 20, Eta2Floor: DefaultEta2Floor}},
		{name: "negative floor", give: Config{HalfLife: 50, WarmUp: 20, Eta2Floor: -1e-3}, wantField: "eta2_floor"},
		{name: "infinite floor", give: Config{HalfLife: 50, WarmUp: 20, Eta2Floor: math.Inf(1)}, wantField: "eta2_floor"},
		{name: "NaN floor", give: Config{HalfLife: 50, WarmUp: 20, Eta2Floor: math.NaN()}, wantField: "eta2_floor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			switch {
			case tt.wantField == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.wantField != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantField+":")):
				t.Errorf("error %v, want one naming %s", err, tt.wantField)
			}
		})
	}
}

func TestAlpha(t *testing.T) {
	for _, h := range []float64{0.25, 1, 3, 50, 1e4} {
		cfg := Config{HalfLife: h, WarmUp: 1}
		if got, want := cfg.Alpha(), 1-math.Pow(2, -1/h); math.Abs(got-want) > 1e-15 {
			t.Errorf("Alpha(H=%v) = %v, want %v", h, got, want)
		}
	}
}

func TestPushHalfLife(t *testing.T) {
	// Start at 1, then push zeros: after HalfLife pushes η̂² is 1/2, after
	// 2·HalfLife it is 1/4.
	cfg := Config{HalfLife: 10, WarmUp: 1}
	var s State
	s.Push(cfg, 1)
	if s.Eta2 != 1 {
		t.Fatalf("first push sets Eta2 = %v, want 1", s.Eta2)
	}
	for i := 1; i <= 20; i++ {
		s.Push(cfg, 0)
		if i == 10 && math.Abs(s.Eta2-0.5) > 1e-12 {
			t.Errorf("after 10 pushes Eta2 = %v, want 0.5", s.Eta2)
		}
	}
	if math.Abs(s.Eta2-0.25) > 1e-12 {
		t.Errorf("after 20 pushes Eta2 = %v, want 0.25", s.Eta2)
	}
	if s.Groups != 21 {
		t.Errorf("Groups = %d, want 21", s.Groups)
	}
}

func TestWarmUpFreezesOnce(t *testing.T) {
	cfg := Config{HalfLife: 2, WarmUp: 3}
	var s State
	for i, v := range []float64{0.2, 0.4, 0.6} {
		if s.Rho(cfg) != 1 {
			t.Fatalf("before push %d: rho = %v, want exactly 1", i, s.Rho(cfg))
		}
		s.Push(cfg, v)
	}
	if !s.Calibrated || s.Eta2Cal != s.Eta2 {
		t.Fatalf("after warm-up: %+v, want Eta2Cal == Eta2 and calibrated", s)
	}
	cal := s.Eta2Cal
	if got := s.Rho(cfg); got != 2 {
		t.Errorf("rho right after warm-up = %v, want 2", got)
	}
	for range 10 {
		s.Push(cfg, 5)
	}
	if s.Eta2Cal != cal {
		t.Errorf("Eta2Cal moved from %v to %v", cal, s.Eta2Cal)
	}
	if got := s.Rho(cfg); got <= 2 {
		t.Errorf("rho after worse groups = %v, want above 2", got)
	}
}

func TestRhoProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			HalfLife: rapid.Float64Range(0.5, 100).Draw(t, "halfLife"),
			WarmUp:   rapid.IntRange(1, 30).Draw(t, "warmUp"),
		}
		if rapid.Bool().Draw(t, "capped") {
			cfg.RhoMax = rapid.Float64Range(1, 20).Draw(t, "rhoMax")
		}
		if rapid.Bool().Draw(t, "floored") {
			cfg.Eta2Floor = rapid.Float64Range(0, 0.1).Draw(t, "eta2Floor")
		}
		s2s := rapid.SliceOfN(rapid.Float64Range(0, 10), 0, 60).Draw(t, "s2")
		var s State
		for i, v := range s2s {
			s.Push(cfg, v)
			rho := s.Rho(cfg)
			if i+1 < cfg.WarmUp && rho != 1 {
				t.Fatalf("rho = %v before warm-up (%d of %d groups), want exactly 1", rho, i+1, cfg.WarmUp)
			}
			if rho < 1 || math.IsNaN(rho) || math.IsInf(rho, 0) {
				t.Fatalf("rho = %v", rho)
			}
			if cfg.RhoMax > 0 && rho > cfg.RhoMax {
				t.Fatalf("rho = %v above cap %v", rho, cfg.RhoMax)
			}
		}
		if !s.Calibrated {
			return
		}
		// More disagreement after warm-up gives a larger rho: push a low and
		// a high s² into copies of the same state.
		lo := rapid.Float64Range(0, 10).Draw(t, "lo")
		hi := lo + rapid.Float64Range(1e-3, 10).Draw(t, "gap")
		a, b := s, s
		a.Push(cfg, lo)
		b.Push(cfg, hi)
		ra, rb := a.Rho(cfg), b.Rho(cfg)
		if rb < ra {
			t.Fatalf("rho %v after s2=%v below rho %v after s2=%v", rb, hi, ra, lo)
		}
		uncapped := cfg
		uncapped.RhoMax = 0
		if a.Eta2Cal > 0 && b.Rho(uncapped) <= a.Rho(uncapped) {
			t.Fatalf("uncapped rho did not rise: %v then %v", a.Rho(uncapped), b.Rho(uncapped))
		}
		// The floor only ever lowers ρ, and leaves it alone when η̂²_cal is
		// above it.
		unfloored := cfg
		unfloored.Eta2Floor = 0
		if b.Rho(cfg) > b.Rho(unfloored) {
			t.Fatalf("rho %v with floor %v above rho %v without", b.Rho(cfg), cfg.Eta2Floor, b.Rho(unfloored))
		}
		if b.Eta2Cal >= cfg.Eta2Floor && b.Rho(cfg) != b.Rho(unfloored) {
			t.Fatalf("floor %v below eta2_cal %v changed rho from %v to %v", cfg.Eta2Floor, b.Eta2Cal,
				b.Rho(unfloored), b.Rho(cfg))
		}
	})
}

func TestRhoZeroCalibration(t *testing.T) {
	// A world model that agreed exactly during warm-up freezes Eta2Cal = 0.
	cfg := Config{HalfLife: 5, WarmUp: 2}
	var s State
	s.Push(cfg, 0)
	s.Push(cfg, 0)
	if got := s.Rho(cfg); got != 1 {
		t.Errorf("no disagreement at all: rho = %v, want 1", got)
	}
	s.Push(cfg, 0.5)
	got := s.Rho(cfg)
	if math.IsInf(got, 0) || math.IsNaN(got) || got < 1e6 {
		t.Errorf("uncapped rho after disagreement = %v, want finite and huge", got)
	}
	cfg.RhoMax = 50
	if got := s.Rho(cfg); got != 50 {
		t.Errorf("capped rho = %v, want 50", got)
	}
}

func TestRhoFloorAfterExactWarmUp(t *testing.T) {
	// The case a diagnosis found: the warm-up anchor groups agreed with the
	// calibrated world model up to rounding (η̂²_cal = 6.8e-33), and the
	// tiny disagreement of a (near) perfect world model afterwards sent ρ to
	// its cap for the rest of the run. With the floor, a perfect world
	// model keeps ρ near 1; an imperfect one still drives it up.
	r := rand.New(rand.NewPCG(5, 6))
	floored := Config{HalfLife: 8, WarmUp: 4, RhoMax: 10, Eta2Floor: DefaultEta2Floor}
	unfloored := floored
	unfloored.Eta2Floor = 0
	var s State
	for s.Groups < floored.WarmUp {
		d, y := noisyGroup(r, 8, false, 0)
		if !s.Observe(floored, d, y) {
			t.Fatal("an exactly agreeing group was not pushed")
		}
		s.Push(floored, 6.8e-33) // rounding in the map
	}
	if !s.Calibrated || s.Eta2Cal > 1e-30 {
		t.Fatalf("after an exact warm-up: %+v, want calibrated with eta2_cal about 0", s)
	}
	// Exact agreement, then residual sd 0.001 (0.1% of the reward range,
	// s² about 2e-5): perfect as far as anchors can tell.
	perfect := s
	for i := range 40 {
		sd := 0.0
		if i%2 == 1 {
			sd = 0.001
		}
		d, y := noisyGroup(r, 8, false, sd)
		perfect.Observe(floored, d, y)
	}
	if got := perfect.Rho(floored); got > 1.01 {
		t.Errorf("perfect world model after an exact warm-up, with the floor: rho = %v, want about 1", got)
	}
	if got := perfect.Rho(unfloored); got != unfloored.RhoMax {
		t.Errorf("the same without the floor: rho = %v, want the cap %v (the behaviour the floor fixes)", got, unfloored.RhoMax)
	}
	// Residual sd 0.01 on U(0,1) scores: s² about 0.002, still a very good
	// world model, and ρ stays well below the cap.
	good := s
	for range 40 {
		d, y := noisyGroup(r, 8, false, 0.01)
		good.Observe(floored, d, y)
	}
	if got := good.Rho(floored); got < 1.05 || got > 2 {
		t.Errorf("a world model with residual sd 0.01 after an exact warm-up: rho = %v, want in [1.05, 2]", got)
	}
	// Pure noise: s² about 2, ρ at the cap.
	noisy := s
	for range 40 {
		d, y := noisyGroup(r, 8, true, 0)
		noisy.Observe(floored, d, y)
	}
	if got := noisy.Rho(floored); got != floored.RhoMax {
		t.Errorf("a world model that became noise: rho = %v, want the cap %v", got, floored.RhoMax)
	}
	t.Logf("eta2_cal %.2g; rho perfect %.6f (eta2 %.2g), sd 0.01 %.3f (eta2 %.4f), noise %.1f (eta2 %.3f)",
		s.Eta2Cal, perfect.Rho(floored), perfect.Eta2, good.Rho(floored), good.Eta2, noisy.Rho(floored), noisy.Eta2)
}

func TestConfigJSONOmitsZeroFloor(t *testing.T) {
	b, err := json.Marshal(Config{HalfLife: 8, WarmUp: 4, RhoMax: 10})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"half_life":8,"warm_up":4,"rho_max":10}`; string(b) != want {
		t.Errorf("JSON = %s, want %s (as before eta2_floor existed)", b, want)
	}
	b, err = json.Marshal(Config{HalfLife: 8, WarmUp: 4, RhoMax: 10, Eta2Floor: 0.01})
	if err != nil || !strings.HasSuffix(string(b), `"eta2_floor":0.01}`) {
		t.Errorf("JSON = %s, %v, want eta2_floor", b, err)
	}
}

func TestObserveSkipsDegenerate(t *testing.T) {
	cfg := Config{HalfLife: 5, WarmUp: 1}
	var s State
	if s.Observe(cfg, []float64{0.1, 0.9}, []float64{0.5, 0.5}) {
		t.Error("degenerate group was pushed")
	}
	if !reflect.DeepEqual(s, State{}) {
		t.Errorf("state changed by a degenerate group: %+v", s)
	}
	if !s.Observe(cfg, []float64{0, 1, 1}, []float64{0, 0.5, 1}) {
		t.Error("valid group not pushed")
	}
	if s.Groups != 1 || math.Abs(s.Eta2-1.0/3) > 1e-12 {
		t.Errorf("state %+v, want one group with Eta2 1/3", s)
	}
}

func TestPushPanicsOnBadInput(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		s2   float64
	}{
		{name: "negative", cfg: Config{HalfLife: 1, WarmUp: 1}, s2: -1},
		{name: "NaN", cfg: Config{HalfLife: 1, WarmUp: 1}, s2: math.NaN()},
		{name: "bad config", cfg: Config{}, s2: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			var s State
			s.Push(tt.cfg, tt.s2)
		})
	}
}

func TestStateJSON(t *testing.T) {
	s := State{Eta2: 0.25, Groups: 12, Eta2Cal: 0.125, Calibrated: true}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"eta2":0.25,"groups":12,"eta2_cal":0.125,"calibrated":true}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, s) {
		t.Errorf("round trip %+v, %v", back, err)
	}
}

// noisyGroup returns real scores y ~ U(0,1) and world-model scores d: the
// real scores plus N(0, sd²) noise when accurate, independent U(0,1) draws
// when pure noise.
func noisyGroup(r *rand.Rand, n int, pureNoise bool, sd float64) (d, y []float64) {
	d, y = make([]float64, n), make([]float64, n)
	for i := range y {
		y[i] = r.Float64()
		if pureNoise {
			d[i] = r.Float64()
		} else {
			d[i] = y[i] + sd*r.NormFloat64()
		}
	}
	return d, y
}

func TestRhoWorldModelDegrades(t *testing.T) {
	// Accurate during warm-up: noise sd 0.03 on scores with variance 1/12
	// gives a ratio of expectations 0.0009/0.0833 ≈ 0.011; the expected
	// ratio is larger (about 0.02 with n = 8) because 1/var(y) of eight
	// draws is skewed upwards. Then pure noise: d independent of y with equal
	// variance, so s² ≈ 2 by the same reasoning. ρ should climb to about
	// 1 + 2/0.02 ≈ 100; the seeded run below gives 113 and we require 80.
	r := rand.New(rand.NewPCG(1, 2))
	cfg := Config{HalfLife: 20, WarmUp: 40}
	var s State
	for s.Groups < cfg.WarmUp {
		d, y := noisyGroup(r, 8, false, 0.03)
		s.Observe(cfg, d, y)
	}
	if got := s.Rho(cfg); got != 2 {
		t.Fatalf("rho at calibration = %v, want 2", got)
	}
	for range 200 {
		d, y := noisyGroup(r, 8, true, 0)
		s.Observe(cfg, d, y)
	}
	got := s.Rho(cfg)
	t.Logf("eta2_cal %.4f, eta2 %.3f, rho %.1f", s.Eta2Cal, s.Eta2, got)
	if got < 80 {
		t.Errorf("rho = %v after the world model became noise, want at least 80", got)
	}
}

func TestRhoNoisyFromStart(t *testing.T) {
	// The frozen calibration compares the world model with itself at
	// warm-up: pure noise from the first group gives η̂² ≈ η̂²_cal and ρ ≈ 2.
	// The EMA fluctuates around its mean, so allow [1.3, 3].
	r := rand.New(rand.NewPCG(3, 4))
	cfg := Config{HalfLife: 20, WarmUp: 40}
	var s State
	for range 400 {
		d, y := noisyGroup(r, 8, true, 0)
		s.Observe(cfg, d, y)
	}
	got := s.Rho(cfg)
	t.Logf("eta2_cal %.3f, eta2 %.3f, rho %.2f", s.Eta2Cal, s.Eta2, got)
	if got < 1.3 || got > 3 {
		t.Errorf("rho = %v for a world model noisy from the start, want about 2", got)
	}
}

// TestPushWeighted: weight 1 is Push; an integer weight w is Push w times
// (up to rounding) except for the group count; a heavy group moves η̂² more.
func TestPushWeighted(t *testing.T) {
	cfg := Config{HalfLife: 4, WarmUp: 3}
	var a, b State
	for _, s2 := range []float64{0.5, 0.2, 0.9, 0.1} {
		a.Push(cfg, s2)
		b.PushWeighted(cfg, s2, 1)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("weight 1: %+v, Push %+v", b, a)
	}
	var w, c State
	w.Push(cfg, 0.5)
	c.Push(cfg, 0.5)
	w.PushWeighted(cfg, 0.1, 3)
	for range 3 {
		c.Push(cfg, 0.1)
	}
	if math.Abs(w.Eta2-c.Eta2) > 1e-12 {
		t.Errorf("weight 3: η̂² %v, three pushes %v", w.Eta2, c.Eta2)
	}
	if w.Groups != 2 {
		t.Errorf("weight 3: %d groups, want 2 (the warm-up counts groups)", w.Groups)
	}
	var light, heavy State
	light.Push(cfg, 0.5)
	heavy.Push(cfg, 0.5)
	light.PushWeighted(cfg, 0.1, 0.5)
	heavy.PushWeighted(cfg, 0.1, 2)
	if !(heavy.Eta2 < light.Eta2 && light.Eta2 < 0.5) {
		t.Errorf("η̂² after a light group %v, a heavy one %v: want heavy < light < 0.5", light.Eta2, heavy.Eta2)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PushWeighted weight %v did not panic", bad)
				}
			}()
			var s State
			s.PushWeighted(cfg, 0.1, bad)
		}()
	}
}

func TestEffectiveRhoCapsTheWorldModelShare(t *testing.T) {
	cfg := Config{WMShareMax: 0.25}
	// 2 anchor and 6 world-model trajectories: ρ must reach 6/2·0.75/0.25 = 9.
	if got := EffectiveRho(cfg, 3, 2, 6); math.Abs(got-9) > 1e-12 {
		t.Fatalf("EffectiveRho(3) = %v, want 9", got)
	}
	if got := EffectiveRho(cfg, 12, 2, 6); got != 12 {
		t.Fatalf("EffectiveRho(12) = %v, want 12 (already above the floor)", got)
	}
	rho := EffectiveRho(cfg, 1, 2, 6)
	if share := 6 / (2*rho + 6); math.Abs(share-0.25) > 1e-12 {
		t.Fatalf("world-model share %v, want 0.25", share)
	}
	for _, c := range []struct{ k, m int }{{0, 6}, {2, 0}} {
		if got := EffectiveRho(cfg, 3, c.k, c.m); got != 3 {
			t.Fatalf("EffectiveRho with k=%d m=%d = %v, want ρ unchanged", c.k, c.m, got)
		}
	}
	if got := EffectiveRho(Config{}, 3, 2, 6); got != 3 {
		t.Fatalf("no cap: EffectiveRho = %v, want 3", got)
	}
	for _, bad := range []float64{-0.1, 1, 2, math.NaN()} {
		c := Config{HalfLife: 32, WarmUp: 16, RhoMax: 10, WMShareMax: bad}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "wm_share_max") {
			t.Fatalf("wm_share_max %v: err %v, want one naming wm_share_max", bad, err)
		}
	}
}
