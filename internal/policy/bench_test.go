package policy

import (
	"testing"

	"github.com/wmrl/wmrl/internal/program"
)

func BenchmarkSample(b *testing.B) {
	p := programPolicy(b, 1)
	card := testCard(0)
	var seed uint64
	for b.Loop() {
		if _, err := p.Sample(card, seed); err != nil {
			b.Fatal(err)
		}
		seed++
	}
}

// BenchmarkLegal is the grammar's share of a sample's cost.
func BenchmarkLegal(b *testing.B) {
	tokens, err := program.Encode(program.Program{Steps: []program.Op{{Name: "standardize"}}, Model: program.Op{Name: "gbt"}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for t := range tokens {
			program.Legal(tokens[:t])
		}
	}
}

func benchUpdate(b *testing.B, klCoef float64) {
	cfg := DefaultConfig(ProgramGrammar{}, testCardDim)
	cfg.KLCoef = klCoef
	p := mustInit(b, cfg, ProgramGrammar{}, 1)
	// One step's batch: 4 groups of 8 trajectories.
	var batch []Example
	for i := range 32 {
		card := testCard(i / 8)
		s, err := p.Sample(card, uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, Example{Card: card, Tokens: s.Tokens, Advantage: float64(i%8) - 3.5, Weight: 1})
	}
	for b.Loop() {
		if _, err := p.Update(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate is one update on 32 trajectories (4 groups of 8).
func BenchmarkUpdate(b *testing.B)   { benchUpdate(b, 0) }
func BenchmarkUpdateKL(b *testing.B) { benchUpdate(b, 0.1) }

func BenchmarkSaveLoad(b *testing.B) {
	p := programPolicy(b, 1)
	dir := b.TempDir()
	for b.Loop() {
		path, err := p.Save(dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Load(path, ProgramGrammar{}); err != nil {
			b.Fatal(err)
		}
	}
}
