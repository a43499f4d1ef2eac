package policy

import (
	"context"
	"slices"
	"testing"

	"github.com/wmrl/wmrl/internal/advantage"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tabular"
)

// TestLearnsFromSuiteCards trains on the card vectors of real (small) suite
// tasks with a synthetic reward that needs the card: 1 for a logistic model
// on a classification task and for ridge on a regression task. The policy
// must raise its held-out reward.
func TestLearnsFromSuiteCards(t *testing.T) {
	s, err := suite.Generate(context.Background(), suite.Options{
		Seed: suite.DefaultSeed, Train: 8, HeldOut: 8, MinRows: 120, MaxRows: 160, MaxFeatures: 6, PanelSize: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	cards := func(sp suite.Split) (vs [][]float64, kinds []tabular.Kind) {
		for _, tk := range s.Split(sp) {
			vs = append(vs, tk.Card.Vector())
			kinds = append(kinds, tk.Kind)
		}
		return vs, kinds
	}
	train, trainKinds := cards(suite.Train)
	held, heldKinds := cards(suite.HeldOut)
	// The reward needs the card only if both kinds occur in both splits.
	for _, kinds := range [][]tabular.Kind{trainKinds, heldKinds} {
		if !slices.Contains(kinds, tabular.Classification) || !slices.Contains(kinds, tabular.Regression) {
			t.Fatalf("kinds %v: want both classification and regression", kinds)
		}
	}
	want := func(k tabular.Kind) string {
		if k == tabular.Classification {
			return "logistic"
		}
		return "ridge"
	}
	reward := func(p *Policy, card []float64, k tabular.Kind, seed uint64) (Sample, float64) {
		smp, err := p.Sample(card, seed)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := program.Decode(smp.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		if prog.Model.Name == want(k) {
			return smp, 1
		}
		return smp, 0
	}
	heldReward := func(p *Policy) float64 {
		total := 0.0
		for i, card := range held {
			for j := range 20 {
				_, r := reward(p, card, heldKinds[i], SampleSeed(99, 0, uint64(i), uint64(j)))
				total += r
			}
		}
		return total / float64(20*len(held))
	}
	p := mustInit(t, DefaultConfig(ProgramGrammar{}, suite.VectorLen), ProgramGrammar{}, 1)
	before := heldReward(p)
	for step := range uint64(60) {
		var batch []Example
		for gi := range uint64(4) {
			ti := int(step*4+gi) % len(train)
			samples := make([]Sample, 8)
			rewards := make([]float64, 8)
			for i := range samples {
				samples[i], rewards[i] = reward(p, train[ti], trainKinds[ti], SampleSeed(1, step, gi, uint64(i)))
			}
			adv, ok := advantage.Group(rewards, nil, advantage.Default())
			if !ok {
				continue
			}
			for i, a := range adv {
				batch = append(batch, Example{Card: train[ti], Tokens: samples[i].Tokens, Advantage: a, Weight: 1})
			}
		}
		if _, err := p.Update(batch); err != nil {
			t.Fatal(err)
		}
	}
	after := heldReward(p)
	t.Logf("held-out reward on suite cards %.3f -> %.3f after %d updates", before, after, p.Step())
	if after < before+0.4 {
		t.Errorf("held-out reward %.3f -> %.3f: want a rise of at least 0.4", before, after)
	}
}
