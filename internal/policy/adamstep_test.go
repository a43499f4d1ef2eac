package policy

import (
	"math"
	"testing"
)

func TestTokenLogProbsSumToLogProb(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 3)
	for seed := range uint64(20) {
		s, err := p.Sample([]float64{0.3, -1}, seed)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.TokenLogProbs) != len(s.Tokens) {
			t.Fatalf("seed %d: %d token logprobs for %d tokens", seed, len(s.TokenLogProbs), len(s.Tokens))
		}
		sum := 0.0
		for _, x := range s.TokenLogProbs {
			sum += x
		}
		if math.Abs(sum-s.LogProb) > 1e-12 {
			t.Fatalf("seed %d: token logprobs sum to %v, LogProb %v", seed, sum, s.LogProb)
		}
		lp, err := p.LogProb([]float64{0.3, -1}, s.Tokens)
		if err != nil || math.Abs(lp-s.LogProb) > 1e-9 {
			t.Fatalf("seed %d: LogProb %v (%v), sample says %v", seed, lp, err, s.LogProb)
		}
	}
}

// Without a KL term and with weights summing to 1, PolicyGradient then
// AdamStep with the configured hyperparameters is Update, bit for bit.
func TestPolicyGradientAdamStepIsUpdate(t *testing.T) {
	cfg := toyConfig()
	cfg.KLCoef = 0
	a := mustInit(t, cfg, toyGrammar{}, 4)
	var batch []Example
	weights := []float64{0.25, 0.125, 0.25, 0, 0.25, 0.125}
	for i := range 6 {
		card := []float64{float64(i) / 3, 1 - float64(i)/5}
		s, err := a.Sample(card, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, Example{Card: card, Tokens: s.Tokens, Advantage: float64(i) - 2.5, Weight: weights[i]})
	}
	b := a.Clone()
	for range 3 {
		if _, err := a.Update(batch); err != nil {
			t.Fatal(err)
		}
		g, _, err := b.PolicyGradient(batch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.AdamStep(g, Adam{LearningRate: cfg.LearningRate, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.AdamEps, ClipNorm: cfg.ClipNorm}); err != nil {
			t.Fatal(err)
		}
	}
	if a.Hash() != b.Hash() {
		t.Fatalf("Update gives %s, PolicyGradient+AdamStep %s", a.Hash(), b.Hash())
	}
	// The summed gradient scales with the weights; an empty batch has a
	// zero gradient.
	g1, _, _ := b.PolicyGradient(batch)
	doubled := append([]Example(nil), batch...)
	for i := range doubled {
		doubled[i].Weight *= 2
	}
	g2, _, _ := b.PolicyGradient(doubled)
	for i := range g1 {
		if g2[i] != 2*g1[i] {
			t.Fatalf("gradient %d: %v with doubled weights, %v", i, g2[i], g1[i])
		}
	}
	if g, _, err := b.PolicyGradient(nil); err != nil || len(g) != b.NumParams() {
		t.Fatalf("empty batch: %d values, %v", len(g), err)
	}
	// A zero gradient still advances the step, and bad hyperparameters fail.
	if _, err := b.AdamStep(make([]float64, b.NumParams()), Adam{LearningRate: 0.1, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}); err != nil || b.Step() != 4 {
		t.Fatalf("zero step: %v, step %d", err, b.Step())
	}
	for _, bad := range []Adam{{LearningRate: 0, Beta1: 0.9, Beta2: 0.9, Eps: 1}, {LearningRate: 1, Beta1: 1, Beta2: 0.9, Eps: 1}, {LearningRate: 1, Beta1: 0.9, Beta2: 0.9, Eps: 0}} {
		if _, err := b.AdamStep(make([]float64, b.NumParams()), bad); err == nil {
			t.Errorf("AdamStep(%+v) succeeded", bad)
		}
	}
	if _, err := b.AdamStep([]float64{1}, Adam{LearningRate: 0.1, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}); err == nil {
		t.Error("AdamStep with a short gradient succeeded")
	}
}

func TestTokenLogProbsReplaysSample(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 3)
	card := []float64{0.3, -1}
	for seed := range uint64(20) {
		s, err := p.Sample(card, seed)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.TokenLogProbs(card, s.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(s.TokenLogProbs) {
			t.Fatalf("seed %d: %d logprobs, want %d", seed, len(got), len(s.TokenLogProbs))
		}
		for i := range got {
			if math.Abs(got[i]-s.TokenLogProbs[i]) > 1e-12 {
				t.Fatalf("seed %d position %d: %v, sampled %v", seed, i, got[i], s.TokenLogProbs[i])
			}
		}
	}
}
