package anchors

import (
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/seed"
)

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

func TestProbabilities(t *testing.T) {
	tests := []struct {
		name string
		u    []float64
		k    int
		a    Active
		want []float64
	}{
		{name: "uniform mix 0", u: []float64{1, 2, 3, 4}, k: 2, a: Active{Mix: 0}, want: []float64{.5, .5, .5, .5}},
		{name: "equal uncertainty", u: []float64{3, 3, 3, 3}, k: 1, a: Active{Mix: 1, Floor: .1}, want: []float64{.25, .25, .25, .25}},
		{name: "no uncertainty", u: []float64{0, 0, 0, 0}, k: 2, a: Active{Mix: .5}, want: []float64{.5, .5, .5, .5}},
		{name: "proportional", u: []float64{1, 1, 2, 4}, k: 1, a: Active{Mix: 1, Floor: .1}, want: []float64{.125, .125, .25, .5}},
		{name: "mixture", u: []float64{0, 0, 0, 1}, k: 1, a: Active{Mix: .5}, want: []float64{.125, .125, .125, .625}},
		// π ∝ u would give the last group 3/1.5·... > 1: it is capped and
		// the rest spread over the others in proportion.
		{name: "capped", u: []float64{1, 1, 1, 10}, k: 2, a: Active{Mix: 1, Floor: .1}, want: []float64{1. / 3, 1. / 3, 1. / 3, 1}},
		// The floor 0.5·2/4 = 0.25 lifts the zero-uncertainty groups.
		{name: "floor", u: []float64{0, 0, 1, 1}, k: 2, a: Active{Mix: 1, Floor: .5}, want: []float64{.25, .25, .75, .75}},
		{name: "none", u: []float64{1, 2}, k: 0, a: Active{Mix: 1, Floor: .1}, want: []float64{0, 0}},
		{name: "all", u: []float64{1, 2}, k: 2, a: Active{Mix: 1, Floor: .1}, want: []float64{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Probabilities(tt.u, tt.k, tt.a)
			if err != nil {
				t.Fatal(err)
			}
			for g := range got {
				if math.Abs(got[g]-tt.want[g]) > 1e-12 {
					t.Fatalf("π = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestProbabilitiesInvalid(t *testing.T) {
	tests := []struct {
		name, field string
		u           []float64
		k           int
		a           Active
	}{
		{"mix", "mix", []float64{1}, 1, Active{Mix: 1.5}},
		{"floor", "floor", []float64{1}, 1, Active{Mix: .5, Floor: -1}},
		{"unbounded", "floor", []float64{1}, 1, Active{Mix: 1}},
		{"k", "k", []float64{1}, 2, Active{Mix: .5}},
		{"negative uncertainty", "uncertainty", []float64{-1, 1}, 1, Active{Mix: .5}},
		{"NaN uncertainty", "uncertainty", []float64{math.NaN(), 1}, 1, Active{Mix: .5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Probabilities(tt.u, tt.k, tt.a)
			if err == nil || !strings.HasPrefix(err.Error(), tt.field) {
				t.Errorf("error %v, want one naming %s", err, tt.field)
			}
		})
	}
}

// TestPropProbabilities: π is a valid design for any input: Σπ = k, every π
// in [Floor·k/G, 1], and a group with more uncertainty never has a smaller π.
func TestPropProbabilities(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		G := rapid.IntRange(1, 40).Draw(t, "G")
		u := rapid.SliceOfN(rapid.Float64Range(0, 5), G, G).Draw(t, "u")
		k := rapid.IntRange(0, G).Draw(t, "k")
		a := Active{Mix: rapid.Float64Range(0, 1).Draw(t, "mix"), Floor: rapid.Float64Range(0.01, 1).Draw(t, "floor")}
		pi, err := Probabilities(u, k, a)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(sum(pi)-float64(k)) > 1e-9 {
			t.Fatalf("Σπ = %v, want %d", sum(pi), k)
		}
		lo := a.Floor * float64(k) / float64(G)
		for g, p := range pi {
			if p < lo-1e-12 || p > 1+1e-12 {
				t.Fatalf("π[%d] = %v outside [%v, 1]", g, p, lo)
			}
			for h := range pi {
				if u[g] > u[h] && p < pi[h]-1e-12 {
					t.Fatalf("u[%d] = %v > u[%d] = %v but π %v < %v", g, u[g], h, u[h], p, pi[h])
				}
			}
		}
		sel, err := SelectActive(rapid.Uint64().Draw(t, "seed"), 0, u, float64(k)/float64(G), 0, -1, a)
		if err != nil {
			t.Fatal(err)
		}
		if len(sel.Groups) != k || !slices.IsSorted(sel.Groups) {
			t.Fatalf("selected %v, want %d ascending groups", sel.Groups, k)
		}
		for i, g := range sel.Groups {
			if pi[g] == 0 || math.Abs(sel.Weights[i]*sel.Prob[i]-float64(k)/float64(G)) > 1e-12 {
				t.Fatalf("group %d: π %v, weight %v", g, sel.Prob[i], sel.Weights[i])
			}
		}
	})
}

// TestSelectActiveInclusion: over many steps, each group is an anchor with
// frequency π_g within sampling error, and every step has exactly k anchors.
func TestSelectActiveInclusion(t *testing.T) {
	u := []float64{0.05, 0.05, 0.1, 0.1, 0.2, 0.3, 0.4, 0.8, 0, 0.15, 0.6, 0.05}
	const fraction, steps = 0.25, 20000
	a := Active{Mix: 0.7, Floor: 0.3}
	k, _ := Count(len(u), fraction, 1, -1)
	pi, err := Probabilities(u, k, a)
	if err != nil {
		t.Fatal(err)
	}
	hits := make([]int, len(u))
	for step := range steps {
		sel, err := SelectActive(7, step, u, fraction, 1, -1, a)
		if err != nil {
			t.Fatal(err)
		}
		if len(sel.Groups) != k {
			t.Fatalf("step %d: %d anchors, want %d", step, len(sel.Groups), k)
		}
		for i, g := range sel.Groups {
			hits[g]++
			if sel.Prob[i] != pi[g] {
				t.Fatalf("step %d group %d: π %v, want %v", step, g, sel.Prob[i], pi[g])
			}
		}
	}
	for g, h := range hits {
		f := float64(h) / steps
		se := math.Sqrt(pi[g] * (1 - pi[g]) / steps)
		if math.Abs(f-pi[g]) > 4*se+1e-9 {
			t.Errorf("group %d: frequency %.4f, π %.4f (4 s.e. %.4f)", g, f, pi[g], 4*se)
		}
	}
}

func TestSelectActiveDeterministic(t *testing.T) {
	u := []float64{0.1, 0.5, 0.2, 0.9, 0.3, 0.1, 0.1, 0.4}
	a := Active{Mix: 0.5, Floor: 0.25}
	first, err := SelectActive(42, 3, u, 0.25, 1, -1, a)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, _ := SelectActive(42, 3, u, 0.25, 1, -1, a)
		if !slices.Equal(first.Groups, again.Groups) || !slices.Equal(first.Weights, again.Weights) {
			t.Fatalf("SelectActive not deterministic: %+v then %+v", first, again)
		}
	}
	// Min and capacity rules are Count's.
	if s, _ := SelectActive(42, 3, u, 0, 2, -1, a); len(s.Groups) != 2 {
		t.Errorf("min 2: %d anchors", len(s.Groups))
	}
	if s, _ := SelectActive(42, 3, u, 1, 0, 3, a); len(s.Groups) != 3 {
		t.Errorf("capacity 3: %d anchors", len(s.Groups))
	}
	if _, err := SelectActive(42, -1, u, 0.25, 1, -1, a); err == nil || !strings.HasPrefix(err.Error(), "step") {
		t.Errorf("negative step: %v", err)
	}
}

// population is a synthetic step: G groups of n pairs. Half the groups are
// on tasks the world model knows (uncertainty 0.05, y = x + small noise),
// half on tasks it does not (uncertainty 0.4, y = x − 0.2 + noise), so the
// population's mean residual is −0.1 and active selection, which favours
// the uncertain groups, over-represents the biased ones.
type population struct {
	u    []float64
	x, y [][]float64
}

func newPopulation(G, n int) population {
	p := population{u: make([]float64, G), x: make([][]float64, G), y: make([][]float64, G)}
	for g := range G {
		hard := g%2 == 1
		p.u[g] = 0.05
		if hard {
			p.u[g] = 0.4
		}
		for i := range n {
			x := seed.Unit(seed.Derive(1, uint64(g), uint64(i)))
			e := seed.Unit(seed.Derive(2, uint64(g), uint64(i))) - 0.5
			y := x + 0.05*e
			if hard {
				y = x - 0.2 + 0.4*e
			}
			p.x[g] = append(p.x[g], x)
			p.y[g] = append(p.y[g], y)
		}
	}
	return p
}

// TestWeightedCalibrationUnbiased is the Monte Carlo check of the estimator
// in docs/design.md. Under active selection, the weighted mean residual of a
// step (Horvitz–Thompson) is unbiased for the population's over steps, and
// the weighted isotonic fit on a run's window of pairs (every pair of many
// steps, as the debiaser fits it) matches the fit on the whole population,
// while the unweighted ones are biased toward the groups chosen more often.
func TestWeightedCalibrationUnbiased(t *testing.T) {
	const G, n, fraction = 40, 8, 0.25
	p := newPopulation(G, n)
	a := Active{Mix: 1, Floor: 0.2}
	var popMean float64
	var allX, allY []float64
	for g := range G {
		for i := range n {
			popMean += p.y[g][i] - p.x[g][i]
			allX, allY = append(allX, p.x[g][i]), append(allY, p.y[g][i])
		}
	}
	popMean /= G * n
	popFit, err := isotonic.Fit(allX, allY, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The step estimate, over 4000 steps.
	const steps = 4000
	var ht, unw float64
	htVals := make([]float64, 0, steps)
	for step := range steps {
		sel, err := SelectActive(11, step, p.u, fraction, 0, -1, a)
		if err != nil {
			t.Fatal(err)
		}
		k := float64(len(sel.Groups))
		var sw, su float64
		for i, g := range sel.Groups {
			for j := range n {
				r := p.y[g][j] - p.x[g][j]
				sw += sel.Weights[i] * r
				su += r
			}
		}
		// Σ_sel w_g·Σ_j r / (k·n) = (1/(G·n)) Σ_sel Σ_j r/π_g: Horvitz–Thompson.
		htVals = append(htVals, sw/(k*n))
		ht += sw / (k * n)
		unw += su / (k * n)
	}
	ht /= steps
	unw /= steps
	var sd float64
	for _, v := range htVals {
		sd += (v - ht) * (v - ht)
	}
	se := math.Sqrt(sd/(steps-1)) / math.Sqrt(steps)
	t.Logf("mean residual: population %.4f, weighted %.4f (s.e. %.4f), unweighted %.4f", popMean, ht, se, unw)
	if math.Abs(ht-popMean) > 4*se {
		t.Errorf("weighted mean residual %.4f, population %.4f: off by more than 4 s.e. (%.4f)", ht, popMean, se)
	}
	if math.Abs(unw-popMean) < 0.05 {
		t.Errorf("unweighted mean residual %.4f is close to the population's %.4f: the test population does not separate them", unw, popMean)
	}

	// The window fit: 20 runs of 100 steps, each run's pairs pooled.
	const runs, runSteps = 20, 100
	probes := []float64{0.25, 0.5, 0.75}
	wFit := make([]float64, len(probes))
	uFit := make([]float64, len(probes))
	for run := range runs {
		var x, y, w []float64
		for step := range runSteps {
			sel, err := SelectActive(uint64(100+run), step, p.u, fraction, 0, -1, a)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range sel.Groups {
				for j := range n {
					x, y, w = append(x, p.x[g][j]), append(y, p.y[g][j]), append(w, sel.Weights[i])
				}
			}
		}
		mw, err := isotonic.Fit(x, y, w)
		if err != nil {
			t.Fatal(err)
		}
		mu, err := isotonic.Fit(x, y, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range probes {
			wFit[i] += mw.Apply(v) / runs
			uFit[i] += mu.Apply(v) / runs
		}
	}
	for i, v := range probes {
		w, u, want := wFit[i], uFit[i], popFit.Apply(v)
		t.Logf("f̂(%.2f): population %.4f, weighted %.4f, unweighted %.4f", v, want, w, u)
		if math.Abs(w-want) > 0.01 {
			t.Errorf("weighted fit at %v: %.4f, population %.4f", v, w, want)
		}
		if math.Abs(u-want) < 0.03 {
			t.Errorf("unweighted fit at %v: %.4f is close to the population's %.4f", v, u, want)
		}
	}
}

func TestUncertainty(t *testing.T) {
	// Before any pair every task gets the default prior.
	u := Uncertainty([]int{0, 1}, nil)
	if u[0] != DefaultPriorResidual || u[1] != DefaultPriorResidual {
		t.Errorf("no pairs: %v", u)
	}
	var past []Residual
	for range 24 {
		past = append(past, Residual{Task: 0, Value: 0.5}, Residual{Task: 1, Value: 0.1, Weight: 3})
	}
	u = Uncertainty([]int{0, 1, 2, 0}, past)
	// The prior is the weighted mean square: (24·0.25 + 72·0.01)/96 = 0.07.
	prior := 0.07
	want0 := math.Sqrt((PriorPairs*prior + 24*0.25) / (PriorPairs + 24))
	want1 := math.Sqrt((PriorPairs*prior + 24*0.01) / (PriorPairs + 24))
	want := []float64{want0, want1, math.Sqrt(prior), want0}
	for g := range want {
		if math.Abs(u[g]-want[g]) > 1e-12 {
			t.Fatalf("u = %v, want %v", u, want)
		}
	}
	if !(u[0] > u[2] && u[2] > u[1]) {
		t.Errorf("a badly predicted task should be more uncertain than an unseen one, and that than a well predicted one: %v", u)
	}
}

func TestAdapt(t *testing.T) {
	a := Adaptive{TargetRho: 1.5, Floor: 0.05, Ceiling: 0.4, Gain: 0.1}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		f, rho    float64
		want      float64
		direction int
	}{
		{name: "noisy raises", f: 0.1, rho: 2, want: 0.15},
		{name: "quiet lowers", f: 0.1, rho: 1.2, want: 0.07},
		{name: "at target holds", f: 0.1, rho: 1.5, want: 0.1},
		{name: "ceiling", f: 0.38, rho: 10, want: 0.4},
		{name: "floor", f: 0.06, rho: 1, want: 0.05},
		{name: "out of bounds clamps", f: 0.9, rho: 1.5, want: 0.4},
		{name: "NaN rho holds", f: 0.2, rho: math.NaN(), want: 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Adapt(tt.f, tt.rho, a); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Adapt(%v, %v) = %v, want %v", tt.f, tt.rho, got, tt.want)
			}
		})
	}
}

// TestAdaptClosedLoop runs the controller against a plant in which ρ falls
// as the anchor fraction grows (more anchors, a better calibrated world
// model): the fraction settles where ρ is at the target, within bounds.
func TestAdaptClosedLoop(t *testing.T) {
	a := Adaptive{TargetRho: 1.5, Floor: 0.05, Ceiling: 0.5, Gain: 0.05}
	rhoOf := func(f float64) float64 { return 1 + 0.1/f } // ρ = 1.5 at f = 0.2
	for _, start := range []float64{0.05, 0.1, 0.5} {
		f := start
		var trace []float64
		for range 200 {
			f = Adapt(f, rhoOf(f), a)
			if f < a.Floor || f > a.Ceiling {
				t.Fatalf("fraction %v out of [%v, %v]", f, a.Floor, a.Ceiling)
			}
			trace = append(trace, f)
		}
		if math.Abs(f-0.2) > 1e-3 {
			t.Errorf("start %v: settled at %v, want 0.2 (trace tail %v)", start, f, trace[len(trace)-5:])
		}
	}
	// A plant that never reaches the target pins the fraction at the ceiling.
	f := 0.1
	for range 100 {
		f = Adapt(f, 5, a)
	}
	if f != a.Ceiling {
		t.Errorf("unreachable target: fraction %v, want the ceiling %v", f, a.Ceiling)
	}
}

func TestAdaptiveValidate(t *testing.T) {
	tests := []struct {
		give  Adaptive
		field string
	}{
		{Adaptive{TargetRho: 0.5, Floor: 0, Ceiling: 1, Gain: 1}, "target_rho"},
		{Adaptive{TargetRho: 2, Floor: -1, Ceiling: 1, Gain: 1}, "floor"},
		{Adaptive{TargetRho: 2, Floor: 0.5, Ceiling: 0.4, Gain: 1}, "ceiling"},
		{Adaptive{TargetRho: 2, Floor: 0, Ceiling: 1, Gain: 0}, "gain"},
	}
	for _, tt := range tests {
		if err := tt.give.Validate(); err == nil || !strings.HasPrefix(err.Error(), tt.field) {
			t.Errorf("%+v: %v, want an error naming %s", tt.give, err, tt.field)
		}
	}
}
