package policy

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"

	"github.com/wmrl/wmrl/internal/backend"
)

// Policy is the model with its optimiser state. Sample, LogProb, Hash,
// Encode and Save only read it and may run concurrently with each other;
// Update replaces its state and must not run concurrently with anything.
type Policy struct {
	cfg      Config
	g        Grammar
	l        layout
	vocab    [32]byte // fingerprint of the grammar's vocabulary
	initSeed uint64
	step     uint64    // updates applied so far
	theta    []float64 // parameters
	m, v     []float64 // Adam moments
	ref      []float64 // initial parameters, for the KL term
}

// pcgStream is the second PCG word; any fixed value works, it only has to
// stay fixed.
const (
	pcgStreamInit   = 0x706f6c6963792d69 // "policy-i"
	pcgStreamSample = 0x706f6c6963792d73 // "policy-s"
)

// Init returns the initial policy for cfg and g, a deterministic function of
// cfg, the grammar's vocabulary and seed. Weights are Gaussian with standard
// deviation InitScale/sqrt(fan-in); the bigram and card-to-logit terms and
// the biases start at zero, except for the logit biases set by SimpleBias.
func Init(cfg Config, g Grammar, seed uint64) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("policy config: %w", err)
	}
	if err := checkGrammar(g, cfg); err != nil {
		return nil, err
	}
	l := newLayout(cfg)
	p := &Policy{
		cfg: cfg, g: g, l: l, vocab: vocabHash(g.Vocab()), initSeed: seed,
		theta: make([]float64, l.n), m: make([]float64, l.n), v: make([]float64, l.n),
	}
	r := rand.New(rand.NewPCG(seed, pcgStreamInit))
	fill := func(off, size int, std float64) {
		for i := off; i < off+size; i++ {
			p.theta[i] = std * r.NormFloat64()
		}
	}
	s := cfg.InitScale
	fill(l.wc, l.h*l.c, s/math.Sqrt(float64(l.c)))
	fill(l.eprev, (l.v+1)*l.h, s/math.Sqrt(3))
	fill(l.epos, l.p*l.h, s/math.Sqrt(3))
	fill(l.wbag, l.v*l.h, s/math.Sqrt(3*float64(l.p)))
	fill(l.u, l.v*l.h, s/math.Sqrt(float64(l.h)))
	if cfg.SimpleBias > 0 {
		if c, ok := g.(Coster); ok {
			for tok := range l.v {
				p.theta[l.b2+tok] = -cfg.SimpleBias * c.Cost(tok)
			}
		} else {
			p.theta[l.b2+g.EOS()] = cfg.SimpleBias
		}
	}
	p.ref = append([]float64(nil), p.theta...)
	return p, nil
}

// Config returns the policy's configuration.
func (p *Policy) Config() Config { return p.cfg }

// Step returns the number of updates applied since Init.
func (p *Policy) Step() uint64 { return p.step }

// NumParams returns the number of model parameters.
func (p *Policy) NumParams() int { return p.l.n }

// Clone returns an independent copy of p (sharing only the grammar).
func (p *Policy) Clone() *Policy {
	q := *p
	q.theta = append([]float64(nil), p.theta...)
	q.m = append([]float64(nil), p.m...)
	q.v = append([]float64(nil), p.v...)
	q.ref = append([]float64(nil), p.ref...)
	return &q
}

// Sample is one sampled token sequence.
type Sample struct {
	// Tokens is the sequence as the grammar sees it, ending with EOS.
	Tokens []int `json:"tokens"`
	// LogProb is log π(Tokens | card), the sum over positions.
	LogProb float64 `json:"log_prob"`
	// TokenLogProbs is the logprob of each token (0 for a token the
	// grammar forces); it sums to LogProb. It is not serialised.
	TokenLogProbs []float64 `json:"-"`
}

// Sample draws one token sequence for card, a deterministic function of the
// policy, card and seed. Derive seed from (run seed, step, group, sample)
// so that every trajectory has its own stream.
func (p *Policy) Sample(card []float64, seed uint64) (Sample, error) {
	l := &p.l
	if len(card) != l.c {
		return Sample{}, fmt.Errorf("card has %d values, want %d", len(card), l.c)
	}
	r := rand.New(rand.NewPCG(seed, pcgStreamSample))
	st := l.seqTerms(p.theta, card)
	bag := make([]float64, l.h)
	h := make([]float64, l.h)
	lp := make([]float64, 0, l.v)
	eos := p.g.EOS()
	var out Sample
	prev := l.v
	for t := 0; ; t++ {
		if t >= l.p {
			return Sample{}, fmt.Errorf("sample: no EOS within max length %d", l.p)
		}
		legal := p.g.Legal(out.Tokens)
		var tok int
		switch len(legal) {
		case 0:
			return Sample{}, fmt.Errorf("sample: grammar allows no token after %v", out.Tokens)
		case 1:
			tok = legal[0]
			out.TokenLogProbs = append(out.TokenLogProbs, 0)
		default:
			lp = lp[:len(legal)]
			l.hidden(p.theta, st, prev, t, bag, h)
			l.logProbs(p.theta, st, prev, h, legal, lp)
			i := draw(r.Float64(), lp)
			tok = legal[i]
			out.LogProb += lp[i]
			out.TokenLogProbs = append(out.TokenLogProbs, lp[i])
		}
		if tok < 0 || tok >= l.v {
			return Sample{}, fmt.Errorf("sample: grammar returned token %d outside the vocabulary", tok)
		}
		out.Tokens = append(out.Tokens, tok)
		if tok == eos {
			return out, nil
		}
		floats.Add(bag, row(p.theta, l.wbag, tok, l.h))
		prev = tok
	}
}

// draw inverts the cumulative distribution of exp(lp) at u in [0, 1).
func draw(u float64, lp []float64) int {
	acc := 0.0
	for i, x := range lp {
		acc += math.Exp(x)
		if u < acc {
			return i
		}
	}
	return len(lp) - 1 // u beyond the rounded total
}

// LogProb returns log π(tokens | card). It fails when a token is not legal
// after its prefix.
func (p *Policy) LogProb(card []float64, tokens []int) (float64, error) {
	_, lp, err := p.l.forward(p.g, p.theta, nil, card, tokens)
	return lp, err
}

// TokenLogProbs returns the logprob of each of tokens given its prefix (0
// for a token the grammar forces), as Sample reports them; they sum to
// LogProb. It fails when a token is not legal after its prefix.
func (p *Policy) TokenLogProbs(card []float64, tokens []int) ([]float64, error) {
	caches, _, err := p.l.forward(p.g, p.theta, nil, card, tokens)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(caches))
	for t, c := range caches {
		if c.lp != nil {
			out[t] = c.lp[c.tok]
		}
	}
	return out, nil
}

// Example is one trajectory of an update batch.
type Example struct {
	Card   []float64 `json:"card"`
	Tokens []int     `json:"tokens"`
	// Advantage is A_i, the group-relative advantage.
	Advantage float64 `json:"advantage"`
	// Weight is w_i >= 0: ρ for an anchor trajectory, 1 for a world-model
	// one (docs/design.md, "GRPO advantages and the fused update"); 0
	// removes the trajectory from the update.
	Weight float64 `json:"weight"`
	// SampleLogProbs are the logprob of each of Tokens under the policy
	// that sampled them (0 for a token the grammar forces), as
	// TokenLogProbs reports them, for an update of another policy
	// (UpdateOffPolicy); nil for an on-policy update, which ignores it.
	SampleLogProbs []float64 `json:"sample_log_probs,omitempty"`
}

// UpdateStats describes one update (the policy port's backend.UpdateStats);
// the objective and KL are measured at the parameters before the step.
type UpdateStats = backend.UpdateStats

// Update applies one fused GRPO step on batch: it computes
//
//	g = ∇θ Σ_i w_i [A_i log π(τ_i) − β Σ_t KL_t(τ_i)] / Σ_i w_i
//
// clips it when ClipNorm > 0, and takes one Adam ascent step. The batch is
// processed in order. On error the policy is unchanged.
func (p *Policy) Update(batch []Example) (UpdateStats, error) {
	grad, stats, err := p.gradient(p.theta, batch)
	if err != nil {
		return UpdateStats{}, err
	}
	c := p.cfg
	return p.step1(grad, Adam{LearningRate: c.LearningRate, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.AdamEps, ClipNorm: c.ClipNorm}, stats)
}

// UpdateOffPolicy is Update for a batch sampled from another checkpoint of
// the policy (an asynchronous pipeline's older one), every example with its
// SampleLogProbs. Each token's log π(τ_t) term becomes PPO's clipped
// surrogate of its importance ratio r_t = π_θ(τ_t)/π_sample(τ_t):
//
//	g = ∇θ Σ_i w_i [Σ_t min(r_t A_i, clip(r_t, 1−ε, 1+ε) A_i) − β Σ_t KL_t(τ_i)] / Σ_i w_i
//
// whose gradient is w_i A_i r_t ∇log π(τ_t) where the ratio is inside the
// clip range on the side A_i pushes, and 0 where it is outside. At r_t = 1
// (the policy that sampled is the one updated) it is Update's gradient, bit
// for bit. clip is ε in (0, 1). The stats' objective is the surrogate's
// value, and RatioMean and RatioMax are r_t's over the sampled tokens (not
// the forced ones) of the weighted examples. On error the policy is
// unchanged.
func (p *Policy) UpdateOffPolicy(batch []Example, clip float64) (UpdateStats, error) {
	if !(clip > 0 && clip < 1) {
		return UpdateStats{}, fmt.Errorf("update: ratio clip %v: want in (0, 1)", clip)
	}
	for i, e := range batch {
		if e.Weight == 0 {
			continue
		}
		if len(e.SampleLogProbs) != len(e.Tokens) {
			return UpdateStats{}, fmt.Errorf("update: example %d: %d sampling logprobs for %d tokens", i, len(e.SampleLogProbs), len(e.Tokens))
		}
		for _, x := range e.SampleLogProbs {
			if math.IsNaN(x) || math.IsInf(x, 0) || x > 0 {
				return UpdateStats{}, fmt.Errorf("update: example %d: sampling logprob %v: want finite and <= 0", i, x)
			}
		}
	}
	grad, stats, err := p.gradientClip(p.theta, batch, p.cfg.KLCoef, true, clip)
	if err != nil {
		return UpdateStats{}, err
	}
	c := p.cfg
	return p.step1(grad, Adam{LearningRate: c.LearningRate, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.AdamEps, ClipNorm: c.ClipNorm}, stats)
}

// clippedToken is one token's term of the clipped surrogate with advantage
// a (the weighted one, w_i A_i) and clip ε: its ratio r = exp(lp − lq), the
// term's value min(r a, clip(r, 1−ε, 1+ε) a) and its coefficient on
// ∇log π(τ_t), r a inside the range and 0 where the clip holds the term
// constant. The bound itself counts as inside.
func clippedToken(lp, lq, a, eps float64) (ratio, value, coef float64) {
	r := math.Exp(lp - lq)
	lo, hi := 1-eps, 1+eps
	switch {
	case a > 0 && r > hi:
		return r, hi * a, 0
	case a < 0 && r < lo:
		return r, lo * a, 0
	}
	return r, r * a, r * a
}

// Adam are the hyperparameters of one Adam step (AdamStep).
type Adam struct {
	LearningRate, Beta1, Beta2, Eps float64
	// ClipNorm rescales a gradient whose norm exceeds it; 0 never clips.
	ClipNorm float64
}

// PolicyGradient returns the gradient of the summed objective
// Σ_i w_i A_i log π(τ_i) at the current parameters: Update's gradient
// without the KL term (whatever KLCoef is) and without the division by
// Σ_i w_i, which is the same when the weights sum to 1. A training service
// whose loss sums over datums (Tinker's), accumulating gradients over
// batches before an optimiser step (AdamStep), uses it. Weights may all be
// 0 (a zero gradient); the stats' objective is the summed one.
func (p *Policy) PolicyGradient(batch []Example) ([]float64, UpdateStats, error) {
	return p.gradientBeta(p.theta, batch, 0, false)
}

// AdamStep takes one Adam ascent step along grad (len NumParams) with a's
// hyperparameters instead of the configured ones, clipping grad first when
// a.ClipNorm > 0. A zero gradient still moves the parameters by the Adam
// moments and advances the step. On error the policy is unchanged.
func (p *Policy) AdamStep(grad []float64, a Adam) (UpdateStats, error) {
	if len(grad) != p.l.n {
		return UpdateStats{}, fmt.Errorf("step: gradient has %d values, want %d", len(grad), p.l.n)
	}
	switch {
	case !(a.LearningRate > 0) || math.IsInf(a.LearningRate, 0):
		return UpdateStats{}, fmt.Errorf("step: learning rate %v: want finite and > 0", a.LearningRate)
	case !(a.Beta1 >= 0 && a.Beta1 < 1):
		return UpdateStats{}, fmt.Errorf("step: beta1 %v: want in [0, 1)", a.Beta1)
	case !(a.Beta2 >= 0 && a.Beta2 < 1):
		return UpdateStats{}, fmt.Errorf("step: beta2 %v: want in [0, 1)", a.Beta2)
	case !(a.Eps > 0) || math.IsInf(a.Eps, 0):
		return UpdateStats{}, fmt.Errorf("step: eps %v: want finite and > 0", a.Eps)
	case !(a.ClipNorm >= 0) || math.IsInf(a.ClipNorm, 0):
		return UpdateStats{}, fmt.Errorf("step: clip norm %v: want finite and >= 0", a.ClipNorm)
	}
	return p.step1(append([]float64(nil), grad...), a, UpdateStats{})
}

// step1 clips grad (in place) and applies one Adam ascent step.
func (p *Policy) step1(grad []float64, a Adam, stats UpdateStats) (UpdateStats, error) {
	norm := 0.0
	for _, x := range grad {
		norm += x * x
	}
	norm = math.Sqrt(norm)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return UpdateStats{}, errors.New("update: gradient not finite")
	}
	stats.GradNorm = norm
	if c := a.ClipNorm; c > 0 && norm > c {
		s := c / norm
		for i := range grad {
			grad[i] *= s
		}
		stats.Clipped = true
	}
	t := p.step + 1
	b1, b2 := a.Beta1, a.Beta2
	c1 := 1 - math.Pow(b1, float64(t))
	c2 := 1 - math.Pow(b2, float64(t))
	lr, eps := a.LearningRate, a.Eps
	theta := append([]float64(nil), p.theta...)
	m := append([]float64(nil), p.m...)
	v := append([]float64(nil), p.v...)
	for i, gi := range grad {
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		theta[i] += lr * (m[i] / c1) / (math.Sqrt(v[i]/c2) + eps)
	}
	for _, x := range theta {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return UpdateStats{}, errors.New("update: parameters not finite")
		}
	}
	p.theta, p.m, p.v, p.step = theta, m, v, t
	stats.Step = t
	return stats, nil
}

// checkBatch validates a batch and returns Σ w_i.
func (p *Policy) checkBatch(batch []Example, normalise bool) (float64, error) {
	if len(batch) == 0 && normalise {
		return 0, errors.New("update: empty batch")
	}
	wsum := 0.0
	for i, e := range batch {
		switch {
		case math.IsNaN(e.Weight) || math.IsInf(e.Weight, 0) || e.Weight < 0:
			return 0, fmt.Errorf("update: example %d: weight %v: want finite and >= 0", i, e.Weight)
		case math.IsNaN(e.Advantage) || math.IsInf(e.Advantage, 0):
			return 0, fmt.Errorf("update: example %d: advantage not finite", i)
		case len(e.Tokens) == 0 || e.Tokens[len(e.Tokens)-1] != p.g.EOS():
			return 0, fmt.Errorf("update: example %d: tokens do not end with EOS", i)
		case len(e.Card) != p.l.c:
			return 0, fmt.Errorf("update: example %d: card has %d values, want %d", i, len(e.Card), p.l.c)
		}
		for _, x := range e.Card {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return 0, fmt.Errorf("update: example %d: card not finite", i)
			}
		}
		wsum += e.Weight
	}
	if wsum <= 0 && normalise {
		return 0, errors.New("update: weights sum to 0")
	}
	return wsum, nil
}

// gradient returns ∇L at theta and L itself (in the stats).
func (p *Policy) gradient(theta []float64, batch []Example) ([]float64, UpdateStats, error) {
	return p.gradientBeta(theta, batch, p.cfg.KLCoef, true)
}

// gradientBeta is gradient with KL coefficient beta, divided by Σ w_i
// when normalise is set.
func (p *Policy) gradientBeta(theta []float64, batch []Example, beta float64, normalise bool) ([]float64, UpdateStats, error) {
	return p.gradientClip(theta, batch, beta, normalise, 0)
}

// gradientClip is gradientBeta with the clipped surrogate of
// UpdateOffPolicy when clip > 0, its examples' SampleLogProbs checked by
// the caller; clip 0 is the on-policy gradient and ignores them.
func (p *Policy) gradientClip(theta []float64, batch []Example, beta float64, normalise bool, clip float64) ([]float64, UpdateStats, error) {
	wsum, err := p.checkBatch(batch, normalise)
	if err != nil {
		return nil, UpdateStats{}, err
	}
	var ref []float64
	if beta > 0 {
		ref = p.ref
	}
	grad := make([]float64, p.l.n)
	var stats UpdateStats
	stats.WeightSum = wsum
	ratioSum, ratioN := 0.0, 0
	for i, e := range batch {
		if e.Weight == 0 {
			continue
		}
		caches, lp, err := p.l.forward(p.g, theta, ref, e.Card, e.Tokens)
		if err != nil {
			return nil, UpdateStats{}, fmt.Errorf("update: example %d: %w", i, err)
		}
		kl := 0.0
		if ref != nil {
			for _, c := range caches {
				if c.lq != nil {
					kl += klOf(c.lp, c.lq)
				}
			}
		}
		w := e.Weight
		if normalise {
			w /= wsum
		}
		stats.KL += w * kl
		stats.Trajectories++
		if clip == 0 {
			stats.Objective += w * (e.Advantage*lp - beta*kl)
			p.l.backward(theta, e.Card, e.Tokens, caches, w*e.Advantage, nil, w*beta, grad)
			continue
		}
		a := w * e.Advantage
		coefs := make([]float64, len(caches))
		surrogate := 0.0
		for t, c := range caches {
			if c.lp == nil {
				continue // a forced token: no probability mass, no gradient
			}
			r, v, k := clippedToken(c.lp[c.tok], e.SampleLogProbs[t], a, clip)
			surrogate += v
			coefs[t] = k
			ratioSum += r
			ratioN++
			stats.RatioMax = max(stats.RatioMax, r)
		}
		stats.Objective += surrogate - w*beta*kl
		p.l.backward(theta, e.Card, e.Tokens, caches, 0, coefs, w*beta, grad)
	}
	if ratioN > 0 {
		stats.RatioMean = ratioSum / float64(ratioN)
	}
	return grad, stats, nil
}

// objective returns L at theta (used by the gradient check).
func (p *Policy) objective(theta []float64, batch []Example) (float64, error) {
	_, stats, err := p.gradient(theta, batch)
	return stats.Objective, err
}
