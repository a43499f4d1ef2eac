package policy

import (
	"math"
	"slices"
	"testing"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/program"
)

// testCardDim is the length of internal/suite card vectors.
const testCardDim = 32

func programPolicy(t testing.TB, seed uint64) *Policy {
	t.Helper()
	return mustInit(t, DefaultConfig(ProgramGrammar{}, testCardDim), ProgramGrammar{}, seed)
}

func testCard(i int) []float64 {
	c := make([]float64, testCardDim)
	for j := range c {
		c[j] = math.Sin(float64(7*i + 3*j + 1))
	}
	return c
}

func TestProgramSamplesDecode(t *testing.T) {
	g := ProgramGrammar{}
	for _, bias := range []float64{0, 2} {
		cfg := DefaultConfig(g, testCardDim)
		cfg.SimpleBias = bias
		p := mustInit(t, cfg, g, 1)
		models := map[string]int{}
		steps := 0
		const n = 500
		for i := range n {
			card := testCard(i)
			s, err := p.Sample(card, SampleSeed(1, 0, uint64(i), 0))
			if err != nil {
				t.Fatal(err)
			}
			for j, tok := range s.Tokens {
				if !slices.Contains(program.Legal(s.Tokens[:j]), tok) {
					t.Fatalf("sample %d: token %d at %d is illegal: %v", i, tok, j, s.Tokens)
				}
			}
			prog, err := program.Decode(s.Tokens)
			if err != nil {
				t.Fatalf("sample %d %v: %v", i, s.Tokens, err)
			}
			if err := prog.Validate(); err != nil {
				t.Fatalf("sample %d %s: %v", i, prog, err)
			}
			back, err := program.Encode(prog)
			if err != nil || !slices.Equal(back, s.Tokens) {
				t.Fatalf("sample %d: Encode(Decode(%v)) = %v, %v", i, s.Tokens, back, err)
			}
			lp, err := p.LogProb(card, s.Tokens)
			if err != nil || lp != s.LogProb {
				t.Fatalf("sample %d: LogProb %v (%v), sampled %v", i, lp, err, s.LogProb)
			}
			models[prog.Model.Name]++
			steps += len(prog.Steps)
		}
		// The initial policy explores: every model family appears.
		for _, m := range program.Models() {
			if models[m] == 0 {
				t.Errorf("simple bias %v: model %s never sampled in %d samples", bias, m, n)
			}
		}
		t.Logf("simple bias %v: mean steps %.2f, models %v", bias, float64(steps)/n, models)
	}
}

func TestProgramSimpleBias(t *testing.T) {
	meanSteps := func(bias float64) float64 {
		cfg := DefaultConfig(ProgramGrammar{}, testCardDim)
		cfg.SimpleBias = bias
		p := mustInit(t, cfg, ProgramGrammar{}, 1)
		n := 0
		for i := range 300 {
			s, err := p.Sample(testCard(i), uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			prog, _ := program.Decode(s.Tokens)
			n += len(prog.Steps)
		}
		return float64(n) / 300
	}
	plain, simple := meanSteps(0), meanSteps(2)
	if simple > plain/2 {
		t.Errorf("mean steps %.2f with simple bias, %.2f without: want at most half", simple, plain)
	}
}

func TestProgramEncodedReferenceScores(t *testing.T) {
	p := programPolicy(t, 1)
	for _, text := range []string{"ridge alpha=1", "standardize | clip z=3 | gbt trees=100 depth=3 lr=0.1", "mean"} {
		prog, err := program.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		tokens, err := program.Encode(prog)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := p.LogProb(testCard(0), tokens)
		if err != nil || lp >= 0 || math.IsInf(lp, 0) {
			t.Errorf("%q: log-probability %v, %v; want finite and negative", text, lp, err)
		}
	}
}

// wantModel is the synthetic reward's target family: it depends on the card.
func wantModel(card []float64) string {
	if card[0] > 0 {
		return "ridge"
	}
	return "gbt"
}

func programReward(t testing.TB, p *Policy, card []float64, seed uint64) (Sample, float64) {
	s, err := p.Sample(card, seed)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := program.Decode(s.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	if prog.Model.Name == wantModel(card) {
		return s, 1
	}
	return s, 0
}

// meanReward estimates the expected synthetic reward on held-out cards with
// fixed seeds.
func meanReward(t testing.TB, p *Policy, cards [][]float64) float64 {
	total := 0.0
	for ci, card := range cards {
		for i := range 30 {
			_, r := programReward(t, p, card, SampleSeed(999, 0, uint64(ci), uint64(i)))
			total += r
		}
	}
	return total / float64(30*len(cards))
}

func TestProgramGRPOLearnsCardDependentFamily(t *testing.T) {
	p := programPolicy(t, 3)
	var train, held [][]float64
	for i := range 8 {
		train = append(train, testCard(i))
		held = append(held, testCard(100+i))
	}
	before := meanReward(t, p, held)
	const steps, groups, n = 100, 4, 8
	for s := range uint64(steps) {
		var batch []Example
		for gi := range uint64(groups) {
			card := train[(int(s)*groups+int(gi))%len(train)]
			samples := make([]Sample, n)
			rewards := make([]float64, n)
			for i := range n {
				samples[i], rewards[i] = programReward(t, p, card, SampleSeed(7, s, gi, uint64(i)))
			}
			adv, ok := advantage.Group(rewards, nil, advantage.Default())
			if !ok {
				continue
			}
			for i, a := range adv {
				batch = append(batch, Example{Card: card, Tokens: samples[i].Tokens, Advantage: a, Weight: 1})
			}
		}
		if _, err := p.Update(batch); err != nil {
			t.Fatal(err)
		}
	}
	after := meanReward(t, p, held)
	t.Logf("held-out expected reward %.3f -> %.3f after %d updates", before, after, p.Step())
	if after < before+0.4 {
		t.Errorf("held-out reward %.3f -> %.3f: want a rise of at least 0.4", before, after)
	}
}

func TestSampleSeed(t *testing.T) {
	seen := map[uint64]bool{}
	for _, parts := range [][4]uint64{{1, 0, 0, 0}, {1, 0, 0, 1}, {1, 0, 1, 0}, {1, 1, 0, 0}, {2, 0, 0, 0}} {
		s := SampleSeed(parts[0], parts[1], parts[2], parts[3])
		if s != SampleSeed(parts[0], parts[1], parts[2], parts[3]) {
			t.Fatal("SampleSeed not deterministic")
		}
		if seen[s] {
			t.Errorf("SampleSeed%v collides", parts)
		}
		seen[s] = true
	}
}

func TestProgramRunDeterministic(t *testing.T) {
	train := func(runSeed uint64) string {
		cfg := DefaultConfig(ProgramGrammar{}, testCardDim)
		cfg.KLCoef = 0.05
		p := mustInit(t, cfg, ProgramGrammar{}, runSeed)
		for s := range uint64(5) {
			var batch []Example
			for i := range uint64(8) {
				card := testCard(int(i % 2))
				smp, r := programReward(t, p, card, SampleSeed(runSeed, s, i%2, i))
				batch = append(batch, Example{Card: card, Tokens: smp.Tokens, Advantage: r - 0.2, Weight: 1 + float64(i%2)})
			}
			if _, err := p.Update(batch); err != nil {
				t.Fatal(err)
			}
		}
		return p.Hash()
	}
	a, b, c := train(1), train(1), train(2)
	if a != b {
		t.Errorf("same run seed: hashes %s and %s", a, b)
	}
	if a == c {
		t.Error("different run seeds: same hash")
	}
	t.Logf("%d parameters, hash after 5 updates %s", programPolicy(t, 1).NumParams(), a)
}

func TestSampleProgram(t *testing.T) {
	g := ProgramGrammar{}
	p := mustInit(t, DefaultConfig(g, testCardDim), g, 3)
	for i := range 20 {
		card, sd := testCard(i), SampleSeed(3, 0, uint64(i), 0)
		smp, text, err := p.SampleProgram(card, sd)
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.Sample(card, sd)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := program.Decode(want.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(smp.Tokens, want.Tokens) || smp.LogProb != want.LogProb || text != prog.String() {
			t.Fatalf("sample %d: SampleProgram = %v %v %q, Sample and Decode give %v %v %q",
				i, smp.Tokens, smp.LogProb, text, want.Tokens, want.LogProb, prog.String())
		}
	}
}
