package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestClippedTokenHandWorked: the clipped surrogate of two tokens whose
// logprobs are known, ε = 0.2. Token 1 has π_θ = 0.5 against π_sample =
// 0.25 (r = 2), token 2 π_θ = 0.3 against 0.6 (r = 0.5). With A = +1 the
// clip holds token 1 (r > 1.2: value 1.2, no gradient) and passes token 2
// (value and coefficient r·A = 0.5); with A = −1 it passes token 1 (−2)
// and holds token 2 (r < 0.8: value −0.8, no gradient). A ratio inside
// the range passes on both sides.
func TestClippedTokenHandWorked(t *testing.T) {
	const eps = 0.2
	tests := []struct {
		name               string
		lp, lq, a          float64
		ratio, value, coef float64
	}{
		{"r=2, A=+1: clipped above", math.Log(0.5), math.Log(0.25), 1, 2, 1.2, 0},
		{"r=0.5, A=+1: passes", math.Log(0.3), math.Log(0.6), 1, 0.5, 0.5, 0.5},
		{"r=2, A=-1: passes", math.Log(0.5), math.Log(0.25), -1, 2, -2, -2},
		{"r=0.5, A=-1: clipped below", math.Log(0.3), math.Log(0.6), -1, 0.5, -0.8, 0},
		{"r=1.1, A=+1: inside", math.Log(0.55), math.Log(0.5), 1, 1.1, 1.1, 1.1},
		{"r=1.1, A=-1: inside", math.Log(0.55), math.Log(0.5), -1, 1.1, -1.1, -1.1},
		{"r=2, A=+3 (weighted): clipped above", math.Log(0.5), math.Log(0.25), 3, 2, 3.6, 0},
		{"r=1, A=+1: on-policy", math.Log(0.4), math.Log(0.4), 1, 1, 1, 1},
	}
	for _, tt := range tests {
		r, v, k := clippedToken(tt.lp, tt.lq, tt.a, eps)
		if !near(r, tt.ratio) || !near(v, tt.value) || !near(k, tt.coef) {
			t.Errorf("%s: ratio %v, value %v, coefficient %v; want %v, %v, %v", tt.name, r, v, k, tt.ratio, tt.value, tt.coef)
		}
	}
	// The two tokens as one sequence: A = +1 gives 1.2 + 0.5 = 1.7 and
	// A = −1 gives −2 − 0.8 = −2.8; the ratios' mean is 1.25, their max 2.
	for _, tt := range []struct{ a, want float64 }{{1, 1.7}, {-1, -2.8}} {
		_, v1, _ := clippedToken(math.Log(0.5), math.Log(0.25), tt.a, eps)
		_, v2, _ := clippedToken(math.Log(0.3), math.Log(0.6), tt.a, eps)
		if !near(v1+v2, tt.want) {
			t.Errorf("A = %v: surrogate %v, want %v", tt.a, v1+v2, tt.want)
		}
	}
}

func near(x, y float64) bool { return math.Abs(x-y) <= 1e-12*(1+math.Abs(y)) }

// twoTokenExample is toyGrammar's "ridge ridge.alpha=0.1 <eos>": two
// sampled tokens and a forced EOS, with sampling logprobs that put the
// first token's ratio at r1 and the second's at r2 under p.
func twoTokenExample(t *testing.T, p *Policy, adv, r1, r2 float64) Example {
	t.Helper()
	card := []float64{0.3, -0.7}
	tokens := []int{toyRidge, toyRidgeA1, toyEOS}
	lp, err := p.TokenLogProbs(card, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if lp[0] == 0 || lp[1] == 0 || lp[2] != 0 {
		t.Fatalf("token logprobs %v: want two sampled tokens and a forced EOS", lp)
	}
	return Example{Card: card, Tokens: tokens, Advantage: adv, Weight: 2,
		SampleLogProbs: []float64{lp[0] - math.Log(r1), lp[1] - math.Log(r2), 0}}
}

// TestUpdateOffPolicyTwoTokens runs the hand-worked example through the
// policy: the stats report the ratios (mean 1.25, max 2, the forced EOS
// not counted) and the surrogate (1.2 + 0.5 for A = +1, −2 − 0.8 for
// A = −1, the single example's weight normalised to 1); when the clip
// holds every token the policy-gradient term is exactly zero, and when it
// holds one the gradient is r·A times that token's alone.
func TestUpdateOffPolicyTwoTokens(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 4)
	for _, tt := range []struct{ a, want float64 }{{1, 1.7}, {-1, -2.8}} {
		e := twoTokenExample(t, p, tt.a, 2, 0.5)
		_, stats, err := p.gradientClip(p.theta, []Example{e}, 0, true, 0.2)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(stats.Objective-tt.want) > 1e-9 || math.Abs(stats.RatioMean-1.25) > 1e-9 || math.Abs(stats.RatioMax-2) > 1e-9 {
			t.Errorf("A = %v: objective %v, ratio mean %v, max %v; want %v, 1.25, 2", tt.a, stats.Objective, stats.RatioMean, stats.RatioMax, tt.want)
		}
	}
	// Both ratios above 1+ε with A > 0: nothing moves.
	grad, _, err := p.gradientClip(p.theta, []Example{twoTokenExample(t, p, 1, 2, 1.5)}, 0, true, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(grad, func(x float64) bool { return x != 0 }) {
		t.Error("every token clipped: want a zero gradient")
	}
	// A = +1, r1 = 2 (held), r2 = 0.5 (passes): 0.5 × ∇log π(τ_2), which is
	// the gradient with r1 = 2 and r2 = 1 (∇log π(τ_2) alone) halved.
	half, _, err := p.gradientClip(p.theta, []Example{twoTokenExample(t, p, 1, 2, 0.5)}, 0, true, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	one, _, err := p.gradientClip(p.theta, []Example{twoTokenExample(t, p, 1, 2, 1)}, 0, true, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for i := range one {
		if math.Abs(half[i]-0.5*one[i]) > 1e-12*(1+math.Abs(one[i])) {
			t.Fatalf("param %d: gradient %v, want half of %v", i, half[i], one[i])
		}
		if one[i] != 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Fatal("the passing token's gradient is all zero")
	}
}

// TestUpdateOffPolicyIdentityAtRatioOne: a batch whose sampling logprobs
// are the updated policy's own (the d = 0 case, here taken from Sample
// itself) gives Update's gradient bit for bit, with and without the KL
// term, and the same next checkpoint (same hash); its ratios are exactly 1.
func TestUpdateOffPolicyIdentityAtRatioOne(t *testing.T) {
	for _, kl := range []float64{0, 0.3} {
		cfg := toyConfig()
		cfg.KLCoef = kl
		p := mustInit(t, cfg, toyGrammar{}, 9)
		trainSteps(t, p, 3) // away from the reference, so the KL term is not zero
		r := rand.New(rand.NewPCG(5, 6))
		var batch []Example
		for i := range 12 {
			card := []float64{r.NormFloat64(), r.NormFloat64()}
			s, err := p.Sample(card, 100+uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, Example{Card: card, Tokens: s.Tokens, Advantage: r.NormFloat64(), Weight: 0.5 + r.Float64(),
				SampleLogProbs: s.TokenLogProbs})
		}
		want, _, err := p.gradient(p.theta, batch)
		if err != nil {
			t.Fatal(err)
		}
		got, stats, err := p.gradientClip(p.theta, batch, cfg.KLCoef, true, 0.2)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("kl %v: the clipped gradient at ratio 1 differs from Update's", kl)
		}
		if stats.RatioMean != 1 || stats.RatioMax != 1 {
			t.Errorf("kl %v: ratio mean %v, max %v; want exactly 1", kl, stats.RatioMean, stats.RatioMax)
		}
		on, off := p.Clone(), p.Clone()
		if _, err := on.Update(batch); err != nil {
			t.Fatal(err)
		}
		if _, err := off.UpdateOffPolicy(batch, 0.2); err != nil {
			t.Fatal(err)
		}
		if on.Hash() != off.Hash() {
			t.Errorf("kl %v: next checkpoint %s on-policy, %s through UpdateOffPolicy", kl, on.Hash(), off.Hash())
		}
	}
}

// trainSteps applies n on-policy updates of sampled batches.
func trainSteps(t *testing.T, p *Policy, n int) {
	t.Helper()
	for i := range n {
		if _, err := p.Update(sampleBatch(t, p, 8, uint64(50+i))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOffPolicyGradientMatchesFiniteDifferences: the clipped surrogate's
// gradient is its derivative, for a batch sampled from an older checkpoint
// (ratios spread on both sides of the range), with and without the KL
// term.
func TestOffPolicyGradientMatchesFiniteDifferences(t *testing.T) {
	for _, kl := range []float64{0, 0.7} {
		cfg := DefaultConfig(toyGrammar{}, 3)
		cfg.Hidden = 5
		cfg.KLCoef = kl
		old := mustInit(t, cfg, toyGrammar{}, 1)
		r := rand.New(rand.NewPCG(2, 3))
		for i := range old.theta {
			old.theta[i] = 0.6 * r.NormFloat64()
			old.ref[i] = old.theta[i] + 0.4*r.NormFloat64()
		}
		p := old.Clone()
		for i := range p.theta {
			p.theta[i] += 0.3 * r.NormFloat64()
		}
		var batch []Example
		for i := range 6 {
			card := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			s, err := old.Sample(card, uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, Example{Card: card, Tokens: s.Tokens, Advantage: r.NormFloat64(), Weight: 0.5 + r.Float64(),
				SampleLogProbs: s.TokenLogProbs})
		}
		const eps, h = 0.2, 1e-6
		grad, stats, err := p.gradientClip(p.theta, batch, kl, true, eps)
		if err != nil {
			t.Fatal(err)
		}
		// The test means something only if some tokens are clipped and
		// some are not, and none sits on a bound (where the surrogate has
		// a kink).
		clipped, passed := 0, 0
		for _, e := range batch {
			lp, _ := p.TokenLogProbs(e.Card, e.Tokens)
			for t2, x := range lp {
				if x == 0 {
					continue
				}
				ratio, _, k := clippedToken(x, e.SampleLogProbs[t2], e.Advantage, eps)
				if math.Abs(ratio-(1+eps)) < 1e-3 || math.Abs(ratio-(1-eps)) < 1e-3 {
					t.Fatalf("a ratio %v at a bound: pick another seed", ratio)
				}
				if k == 0 {
					clipped++
				} else {
					passed++
				}
			}
		}
		if clipped == 0 || passed == 0 {
			t.Fatalf("kl %v: %d tokens clipped, %d passed: want both (ratio mean %v, max %v)", kl, clipped, passed, stats.RatioMean, stats.RatioMax)
		}
		theta := slices.Clone(p.theta)
		surrogate := func() float64 {
			_, s, err := p.gradientClip(theta, batch, kl, true, eps)
			if err != nil {
				t.Fatal(err)
			}
			return s.Objective
		}
		nonzero := 0
		for i := range theta {
			theta[i] = p.theta[i] + h
			up := surrogate()
			theta[i] = p.theta[i] - h
			down := surrogate()
			theta[i] = p.theta[i]
			fd := (up - down) / (2 * h)
			if math.Abs(fd-grad[i]) > 1e-6+1e-5*math.Abs(fd) {
				t.Errorf("kl %v: param %d: analytic %.10g, finite difference %.10g", kl, i, grad[i], fd)
			}
			if grad[i] != 0 {
				nonzero++
			}
		}
		if nonzero == 0 {
			t.Fatal("gradient all zero")
		}
		t.Logf("kl %v: %d tokens clipped, %d passed, ratio mean %.3f max %.3f, %d non-zero gradients", kl, clipped, passed, stats.RatioMean, stats.RatioMax, nonzero)
	}
}

// TestUpdateOffPolicyRejectsBadInput: the clip must be in (0, 1) and every
// weighted example must carry one finite, non-positive sampling logprob
// per token; the policy is unchanged on error.
func TestUpdateOffPolicyRejectsBadInput(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 4)
	good := twoTokenExample(t, p, 1, 1, 1)
	h := p.Hash()
	for name, tt := range map[string]struct {
		clip float64
		give func(e *Example)
	}{
		"clip 0":           {0, func(*Example) {}},
		"clip 1":           {1, func(*Example) {}},
		"clip NaN":         {math.NaN(), func(*Example) {}},
		"no logprobs":      {0.2, func(e *Example) { e.SampleLogProbs = nil }},
		"too few logprobs": {0.2, func(e *Example) { e.SampleLogProbs = e.SampleLogProbs[:2] }},
		"positive logprob": {0.2, func(e *Example) { e.SampleLogProbs = []float64{0.1, -1, 0} }},
		"infinite logprob": {0.2, func(e *Example) { e.SampleLogProbs = []float64{math.Inf(-1), -1, 0} }},
	} {
		e := good
		e.SampleLogProbs = slices.Clone(good.SampleLogProbs)
		tt.give(&e)
		if _, err := p.UpdateOffPolicy([]Example{e}, tt.clip); err == nil {
			t.Errorf("%s: no error", name)
		}
		if p.Hash() != h || p.Step() != 0 {
			t.Errorf("%s: the policy changed", name)
		}
	}
	if _, err := p.UpdateOffPolicy([]Example{good}, 0.2); err != nil {
		t.Errorf("good example: %v", err)
	}
}
