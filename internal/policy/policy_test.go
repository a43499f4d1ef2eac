package policy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func toyConfig() Config {
	cfg := DefaultConfig(toyGrammar{}, 2)
	cfg.Hidden = 8
	cfg.LearningRate = 0.05
	return cfg
}

func mustInit(t testing.TB, cfg Config, g Grammar, seed uint64) *Policy {
	t.Helper()
	p, err := Init(cfg, g, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// grpoAdvantages is the standardised group advantage of docs/design.md.
func grpoAdvantages(r []float64) []float64 {
	mean := 0.0
	for _, x := range r {
		mean += x
	}
	mean /= float64(len(r))
	v := 0.0
	for _, x := range r {
		v += (x - mean) * (x - mean)
	}
	std := math.Sqrt(v / float64(len(r)))
	out := make([]float64, len(r))
	for i, x := range r {
		out[i] = (x - mean) / (std + 1e-4)
	}
	return out
}

func TestGradientMatchesFiniteDifferences(t *testing.T) {
	tests := []struct {
		name string
		give float64 // KL coefficient
	}{
		{name: "policy gradient only", give: 0},
		{name: "with KL", give: 0.7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig(toyGrammar{}, 3)
			cfg.Hidden = 5
			cfg.KLCoef = tt.give
			p := mustInit(t, cfg, toyGrammar{}, 1)
			// Every parameter random (Init leaves some blocks at 0), and a
			// reference that differs from the parameters.
			r := rand.New(rand.NewPCG(2, 3))
			for i := range p.theta {
				p.theta[i] = 0.6 * r.NormFloat64()
				p.ref[i] = p.theta[i] + 0.4*r.NormFloat64()
			}
			var batch []Example
			for i := range 5 {
				card := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
				s, err := p.Sample(card, uint64(i))
				if err != nil {
					t.Fatal(err)
				}
				batch = append(batch, Example{Card: card, Tokens: s.Tokens, Advantage: r.NormFloat64(), Weight: 0.5 + r.Float64()})
			}
			grad, _, err := p.gradient(p.theta, batch)
			if err != nil {
				t.Fatal(err)
			}
			const h = 1e-6
			theta := slices.Clone(p.theta)
			worst, nonzero := 0.0, 0
			for i := range theta {
				theta[i] = p.theta[i] + h
				up, err := p.objective(theta, batch)
				if err != nil {
					t.Fatal(err)
				}
				theta[i] = p.theta[i] - h
				down, _ := p.objective(theta, batch)
				theta[i] = p.theta[i]
				fd := (up - down) / (2 * h)
				diff := math.Abs(fd - grad[i])
				if diff > 1e-6+1e-5*math.Abs(fd) {
					t.Errorf("param %d: analytic %.10g, finite difference %.10g", i, grad[i], fd)
				}
				worst = max(worst, diff)
				if grad[i] != 0 {
					nonzero++
				}
			}
			// Every block gets some gradient; a gradient that is zero would
			// pass the comparison vacuously.
			l := p.l
			blocks := []struct {
				name      string
				off, size int
			}{
				{"wc", l.wc, l.h * l.c}, {"b1", l.b1, l.h}, {"eprev", l.eprev, (l.v + 1) * l.h},
				{"epos", l.epos, l.p * l.h}, {"wbag", l.wbag, l.v * l.h}, {"u", l.u, l.v * l.h},
				{"big", l.big, (l.v + 1) * l.v}, {"wcl", l.wcl, l.v * l.c}, {"b2", l.b2, l.v},
			}
			for _, b := range blocks {
				if !slices.ContainsFunc(grad[b.off:b.off+b.size], func(x float64) bool { return x != 0 }) {
					t.Errorf("block %s: gradient all zero", b.name)
				}
			}
			t.Logf("%d params, %d non-zero, worst abs diff %.3g", len(theta), nonzero, worst)
		})
	}
}

func TestSamplesAreLegalAndNormalised(t *testing.T) {
	g := toyGrammar{}
	p := mustInit(t, toyConfig(), g, 7)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range 2000 {
		card := []float64{r.NormFloat64(), r.NormFloat64()}
		s, err := p.Sample(card, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		for j, tok := range s.Tokens {
			if !slices.Contains(g.Legal(s.Tokens[:j]), tok) {
				t.Fatalf("sample %d: token %d at %d illegal in %v", i, tok, j, s.Tokens)
			}
		}
		if s.Tokens[len(s.Tokens)-1] != g.EOS() {
			t.Fatalf("sample %d: %v does not end with EOS", i, s.Tokens)
		}
		lp, err := p.LogProb(card, s.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		if lp != s.LogProb {
			t.Fatalf("sample %d: LogProb %v, sampled log-probability %v", i, lp, s.LogProb)
		}
	}
	// The probabilities of all legal sequences sum to 1: no mass on illegal ones.
	card := []float64{0.3, -1.2}
	total, n := 0.0, 0
	enumerate(g, nil, func(seq []int) {
		lp, err := p.LogProb(card, seq)
		if err != nil {
			t.Fatal(err)
		}
		total += math.Exp(lp)
		n++
	})
	if math.Abs(total-1) > 1e-12 {
		t.Errorf("probabilities of %d legal sequences sum to %v, want 1", n, total)
	}
	if _, err := p.LogProb(card, []int{toyRidge, toyKNN, toyEOS}); err == nil {
		t.Error("LogProb of an illegal sequence: want error")
	}
}

func TestSampleDeterministic(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 7)
	card := []float64{0.5, 0.5}
	distinct := map[string]bool{}
	for seed := range uint64(50) {
		a, _ := p.Sample(card, seed)
		b, _ := p.Sample(card, seed)
		if !slices.Equal(a.Tokens, b.Tokens) || a.LogProb != b.LogProb {
			t.Fatalf("seed %d: %v then %v", seed, a, b)
		}
		distinct[fmt.Sprint(a.Tokens)] = true
	}
	if len(distinct) < 5 {
		t.Errorf("50 seeds gave only %d distinct samples", len(distinct))
	}
}

// synthTarget is the synthetic reward's wanted model: ridge when the card's
// first value is positive, k-nearest neighbours otherwise.
func synthTarget(card []float64) int {
	if card[0] > 0 {
		return toyRidge
	}
	return toyKNN
}

// expectedReward is the exact expected synthetic reward over the two cards,
// by enumeration of the toy grammar.
func expectedReward(t testing.TB, p *Policy, cards [][]float64) float64 {
	t.Helper()
	total := 0.0
	for _, card := range cards {
		enumerate(toyGrammar{}, nil, func(seq []int) {
			if toyModel(seq) != synthTarget(card) {
				return
			}
			lp, err := p.LogProb(card, seq)
			if err != nil {
				t.Fatal(err)
			}
			total += math.Exp(lp)
		})
	}
	return total / float64(len(cards))
}

var synthCards = [][]float64{{1, 0.5}, {-1, 0.5}}

// trainSynth runs GRPO on the synthetic reward: each step, one group of n
// samples per card, standardised group advantages, weight 1.
func trainSynth(t testing.TB, p *Policy, steps, n int) {
	t.Helper()
	for s := range steps {
		var batch []Example
		for gi, card := range synthCards {
			rewards := make([]float64, n)
			samples := make([]Sample, n)
			for i := range n {
				smp, err := p.Sample(card, uint64(s*1000+gi*100+i))
				if err != nil {
					t.Fatal(err)
				}
				samples[i] = smp
				if toyModel(smp.Tokens) == synthTarget(card) {
					rewards[i] = 1
				}
			}
			for i, a := range grpoAdvantages(rewards) {
				batch = append(batch, Example{Card: card, Tokens: samples[i].Tokens, Advantage: a, Weight: 1})
			}
		}
		if _, err := p.Update(batch); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGRPOLearnsSyntheticReward(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 11)
	before := expectedReward(t, p, synthCards)
	trainSynth(t, p, 200, 8)
	after := expectedReward(t, p, synthCards)
	t.Logf("expected reward %.3f -> %.3f after %d updates", before, after, p.Step())
	if after < before+0.4 || after < 0.9 {
		t.Errorf("expected reward %.3f -> %.3f, want a rise of at least 0.4 to at least 0.9", before, after)
	}
}

// exactKL is KL(π‖π_ref) over whole sequences for card, by enumeration.
func exactKL(t testing.TB, p *Policy, card []float64) float64 {
	t.Helper()
	ref := p.Clone()
	ref.theta = slices.Clone(p.ref)
	kl := 0.0
	enumerate(toyGrammar{}, nil, func(seq []int) {
		lp, err := p.LogProb(card, seq)
		if err != nil {
			t.Fatal(err)
		}
		lq, _ := ref.LogProb(card, seq)
		kl += math.Exp(lp) * (lp - lq)
	})
	return kl
}

func TestKLPenaltyKeepsPolicyNearReference(t *testing.T) {
	tests := []struct {
		give float64
	}{{give: 0}, {give: 2}}
	var kls []float64
	for _, tt := range tests {
		cfg := toyConfig()
		cfg.KLCoef = tt.give
		p := mustInit(t, cfg, toyGrammar{}, 11)
		trainSynth(t, p, 100, 8)
		kl := (exactKL(t, p, synthCards[0]) + exactKL(t, p, synthCards[1])) / 2
		t.Logf("beta %v: KL to reference %.4f, expected reward %.3f", tt.give, kl, expectedReward(t, p, synthCards))
		kls = append(kls, kl)
	}
	if !(kls[1] < 0.5*kls[0]) {
		t.Errorf("KL with penalty %.4f, without %.4f: want less than half", kls[1], kls[0])
	}
}

func sampleBatch(t testing.TB, p *Policy, n int, seed uint64) []Example {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0))
	var batch []Example
	for i := range n {
		card := []float64{r.NormFloat64(), r.NormFloat64()}
		s, err := p.Sample(card, seed*1000+uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, Example{Card: card, Tokens: s.Tokens, Advantage: r.NormFloat64(), Weight: 1 + r.Float64()})
	}
	return batch
}

func TestZeroWeightRemovesTrajectory(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 3)
	batch := sampleBatch(t, p, 6, 1)
	extra := sampleBatch(t, p, 1, 2)[0]
	extra.Advantage = 3

	update := func(b []Example) string {
		q := p.Clone()
		if _, err := q.Update(b); err != nil {
			t.Fatal(err)
		}
		return q.Hash()
	}
	without := update(batch)
	extra.Weight = 0
	withZero := update(append(slices.Clone(batch[:3]), append([]Example{extra}, batch[3:]...)...))
	extra.Weight = 1
	withOne := update(append(slices.Clone(batch[:3]), append([]Example{extra}, batch[3:]...)...))
	if withZero != without {
		t.Errorf("zero-weight trajectory changed the update: %s vs %s", withZero, without)
	}
	if withOne == without {
		t.Error("weight-1 trajectory did not change the update")
	}
}

func TestWeightsScaleInfluence(t *testing.T) {
	// Doubling every weight leaves g unchanged (normalised by Σw); doubling
	// one trajectory's weight equals listing it twice.
	p := mustInit(t, toyConfig(), toyGrammar{}, 3)
	batch := sampleBatch(t, p, 4, 5)
	g1, _, err := p.gradient(p.theta, batch)
	if err != nil {
		t.Fatal(err)
	}
	doubled := slices.Clone(batch)
	for i := range doubled {
		doubled[i].Weight *= 2
	}
	g2, _, _ := p.gradient(p.theta, doubled)
	heavy := slices.Clone(batch)
	heavy[0].Weight *= 2
	twice := append(slices.Clone(batch), batch[0])
	g3, _, _ := p.gradient(p.theta, heavy)
	g4, _, _ := p.gradient(p.theta, twice)
	for i := range g1 {
		if math.Abs(g1[i]-g2[i]) > 1e-12 || math.Abs(g3[i]-g4[i]) > 1e-12 {
			t.Fatalf("param %d: g %v vs doubled %v; heavy %v vs twice %v", i, g1[i], g2[i], g3[i], g4[i])
		}
	}
}

func TestUpdateRejectsBadBatch(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 3)
	good := sampleBatch(t, p, 2, 1)
	mod := func(f func(*Example)) []Example {
		b := slices.Clone(good)
		b[1].Card = slices.Clone(b[1].Card)
		f(&b[1])
		return b
	}
	tests := []struct {
		name string
		give []Example
		want string
	}{
		{"empty", nil, "empty batch"},
		{"negative weight", mod(func(e *Example) { e.Weight = -1 }), "weight"},
		{"nan weight", mod(func(e *Example) { e.Weight = math.NaN() }), "weight"},
		{"all zero", []Example{{Card: good[0].Card, Tokens: good[0].Tokens}}, "sum to 0"},
		{"nan advantage", mod(func(e *Example) { e.Advantage = math.NaN() }), "advantage"},
		{"short card", mod(func(e *Example) { e.Card = e.Card[:1] }), "card has 1 values"},
		{"inf card", mod(func(e *Example) { e.Card[0] = math.Inf(1) }), "card not finite"},
		{"illegal token", mod(func(e *Example) { e.Tokens = []int{toyRidge, toyRidge, toyEOS} }), "not legal"},
		{"out of range token", mod(func(e *Example) { e.Tokens = []int{99, toyEOS} }), "not legal"},
		{"too long", mod(func(e *Example) { e.Tokens = make([]int, 9) }), "exceed max length"},
		{"incomplete", mod(func(e *Example) { e.Tokens = []int{toyStd, toyRidge} }), "do not end with EOS"},
		{"no tokens", mod(func(e *Example) { e.Tokens = nil }), "do not end with EOS"},
	}
	before := p.Hash()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Update(tt.give)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
			if p.Hash() != before {
				t.Error("failed update changed the policy")
			}
		})
	}
}

func TestClipping(t *testing.T) {
	tests := []struct {
		give float64
		want bool
	}{{give: 1e-6, want: true}, {give: 1e6, want: false}, {give: 0, want: false}}
	for _, tt := range tests {
		cfg := toyConfig()
		cfg.ClipNorm = tt.give
		p := mustInit(t, cfg, toyGrammar{}, 3)
		st, err := p.Update(sampleBatch(t, p, 4, 1))
		if err != nil {
			t.Fatal(err)
		}
		if st.Clipped != tt.want || st.GradNorm <= 0 {
			t.Errorf("clip %v: clipped %v (norm %v), want %v", tt.give, st.Clipped, st.GradNorm, tt.want)
		}
	}
}

// run is a fixed training run: Init, then updates on sampled batches.
func run(t testing.TB, seed uint64, steps int) *Policy {
	cfg := toyConfig()
	cfg.KLCoef = 0.1
	cfg.ClipNorm = 5
	p := mustInit(t, cfg, toyGrammar{}, seed)
	trainSynth(t, p, steps, 4)
	return p
}

func TestHashDeterministic(t *testing.T) {
	a, b, c := run(t, 5, 20), run(t, 5, 20), run(t, 6, 20)
	if a.Hash() != b.Hash() {
		t.Errorf("same seed, different hashes: %s vs %s", a.Hash(), b.Hash())
	}
	if a.Hash() == c.Hash() {
		t.Error("different seeds, same hash")
	}
	if len(a.Hash()) != 64 {
		t.Errorf("hash %q: want 64 hex digits", a.Hash())
	}
}

func TestInit(t *testing.T) {
	cfg := toyConfig()
	a, b := mustInit(t, cfg, toyGrammar{}, 1), mustInit(t, cfg, toyGrammar{}, 1)
	if a.Hash() != b.Hash() || a.Hash() == mustInit(t, cfg, toyGrammar{}, 2).Hash() {
		t.Error("Init is not a function of its seed")
	}
	// A positive SimpleBias makes the initial policy prefer short programs.
	meanLen := func(p *Policy) float64 {
		n := 0
		for i := range 400 {
			s, _ := p.Sample([]float64{0, 0}, uint64(i))
			n += len(s.Tokens)
		}
		return float64(n) / 400
	}
	cfg.SimpleBias = 0
	plain := meanLen(mustInit(t, cfg, toyGrammar{}, 1))
	cfg.SimpleBias = 2
	simple := meanLen(mustInit(t, cfg, toyGrammar{}, 1))
	if simple >= plain-0.5 {
		t.Errorf("mean length with simple bias %.2f, without %.2f: want shorter", simple, plain)
	}
	bad := cfg
	bad.VocabSize++
	if _, err := Init(bad, toyGrammar{}, 1); err == nil {
		t.Error("Init with a vocabulary size that differs from the grammar: want error")
	}
}

func TestConfigValidate(t *testing.T) {
	base := toyConfig()
	tests := []struct {
		name string
		give func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"zero hidden", func(c *Config) { c.Hidden = 0 }, "hidden"},
		{"huge vocab", func(c *Config) { c.VocabSize = 1 << 20 }, "vocab_size"},
		{"zero lr", func(c *Config) { c.LearningRate = 0 }, "learning_rate"},
		{"beta1 one", func(c *Config) { c.Beta1 = 1 }, "beta1"},
		{"nan kl", func(c *Config) { c.KLCoef = math.NaN() }, "kl_coef"},
		{"negative clip", func(c *Config) { c.ClipNorm = -1 }, "clip_norm"},
	}
	for _, tt := range tests {
		c := base
		tt.give(&c)
		err := c.Validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := run(t, 5, 3)
	path, err := p.Save(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "policy-00000003.ckpt" {
		t.Errorf("path %s: want the step in the name", path)
	}
	q, err := Load(path, toyGrammar{})
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash() != p.Hash() || q.Step() != 3 || q.Config() != p.Config() {
		t.Fatalf("loaded %s step %d, saved %s step %d", q.Hash(), q.Step(), p.Hash(), p.Step())
	}
	// The optimiser state and reference came back too: the next update is
	// the same.
	batch := sampleBatch(t, p, 4, 9)
	if _, err := p.Update(batch); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Update(batch); err != nil {
		t.Fatal(err)
	}
	if q.Hash() != p.Hash() {
		t.Error("update after load differs from update without save")
	}
	if _, err := p.Save(dir); err != nil {
		t.Fatal(err)
	}
	latest, step, found, err := Latest(dir)
	if err != nil || !found || step != 4 || filepath.Base(latest) != FileName(4) {
		t.Errorf("Latest = %s, %d, %v, %v; want step 4", latest, step, found, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d files in the checkpoint directory, want 2 (no temporaries left)", len(entries))
	}
}

func TestLoadRefusesDamagedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	p := run(t, 5, 2)
	good := p.Encode()
	flip := func(i int) []byte { b := slices.Clone(good); b[i] ^= 0x10; return b }
	tests := []struct {
		name string
		give []byte
		want string
	}{
		{"magic", flip(0), "bad magic"},
		{"version", flip(8), "format version"},
		{"length up", setLen(good, +8), "truncated"},
		{"length down", setLen(good, -8), "trailing bytes"},
		{"payload", flip(headerLen + 200), "sha256 mismatch"},
		{"last parameter", flip(len(good) - 33), "sha256 mismatch"},
		{"stored hash", flip(len(good) - 1), "sha256 mismatch"},
		{"truncated by one", good[:len(good)-1], "truncated"},
		{"truncated header", good[:10], "truncated"},
		{"empty", nil, "truncated"},
		{"extended", append(slices.Clone(good), 0), "trailing bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad-"+strings.ReplaceAll(tt.name, " ", "-")+".ckpt")
			if err := os.WriteFile(path, tt.give, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, toyGrammar{})
			if err == nil {
				t.Fatal("damaged checkpoint loaded")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want ErrCorrupt, the path and %q", err, tt.want)
			}
		})
	}
	// Single-byte corruptions anywhere are caught (every header byte, then
	// a stride through the rest).
	for i := 0; i < len(good); {
		if _, err := Decode(flip(i), toyGrammar{}); err == nil {
			t.Fatalf("byte %d flipped: decoded", i)
		}
		if i < headerLen {
			i++
		} else {
			i += 13
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.ckpt"), toyGrammar{}); err == nil || !strings.Contains(err.Error(), "missing.ckpt") {
		t.Errorf("missing file: error %v", err)
	}
}

// setLen returns b with its payload length field moved by d.
func setLen(b []byte, d int) []byte {
	out := slices.Clone(b)
	n := binary.LittleEndian.Uint64(out[12:20])
	binary.LittleEndian.PutUint64(out[12:20], uint64(int(n)+d))
	return out
}

// renamedGrammar has the toy grammar's size but different token strings.
type renamedGrammar struct{ toyGrammar }

func (renamedGrammar) Vocab() []string {
	v := toyGrammar{}.Vocab()
	v[4], v[5] = v[5], v[4]
	return v
}

func TestLoadRefusesOtherVocabulary(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 1)
	_, err := Decode(p.Encode(), renamedGrammar{})
	if err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("error %v, want a vocabulary mismatch", err)
	}
}

func TestConcurrentSamplesMatchSequential(t *testing.T) {
	p := mustInit(t, toyConfig(), toyGrammar{}, 7)
	card := []float64{0.1, -0.4}
	want := make([]Sample, 64)
	for i := range want {
		want[i], _ = p.Sample(card, uint64(i))
	}
	got := make([]Sample, len(want))
	done := make(chan struct{})
	for w := range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := w; i < len(got); i += 2 {
				got[i], _ = p.Sample(card, uint64(i))
			}
		}()
	}
	<-done
	<-done
	for i := range want {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || got[i].LogProb != want[i].LogProb {
			t.Fatalf("sample %d: concurrent %v, sequential %v", i, got[i], want[i])
		}
	}
}

func TestLatest(t *testing.T) {
	tests := []struct {
		name  string
		give  []string
		want  uint64
		found bool
	}{
		{name: "empty", give: nil, found: false},
		{name: "only others", give: []string{"policy-1.ckpt", "policy-00000002.ckpt.tmp", ".policy-00000003.ckpt.123.tmp", "notes.txt"}, found: false},
		{name: "highest", give: []string{"policy-00000002.ckpt", "policy-00000010.ckpt", "policy-00000009.ckpt"}, want: 10, found: true},
		{name: "beyond eight digits", give: []string{"policy-99999999.ckpt", "policy-100000000.ckpt"}, want: 100000000, found: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range tt.give {
				if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			path, step, found, err := Latest(dir)
			if err != nil || found != tt.found || step != tt.want || (found && path != filepath.Join(dir, FileName(tt.want))) {
				t.Errorf("Latest = %q, %d, %v, %v; want step %d, found %v", path, step, found, err, tt.want, tt.found)
			}
		})
	}
	if _, _, _, err := Latest(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Latest of a missing directory: want error")
	}
}
