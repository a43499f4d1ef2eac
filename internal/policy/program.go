package policy

import (
	"fmt"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/seed"
)

// ProgramGrammar is the pipeline language of internal/program as a Grammar:
// sequences run from program.BOS to program.EOS, and program.Decode turns a
// sample's tokens into a Program.
type ProgramGrammar struct{}

var (
	_ Grammar = ProgramGrammar{}
	_ Coster  = ProgramGrammar{}
)

// Vocab returns program.Vocab().
func (ProgramGrammar) Vocab() []string { return program.Vocab() }

// EOS returns program.EOS.
func (ProgramGrammar) EOS() int { return program.EOS }

// MaxLen returns program.MaxTokens.
func (ProgramGrammar) MaxLen() int { return program.MaxTokens }

// Legal returns program.Legal(prefix).
func (ProgramGrammar) Legal(prefix []int) []int { return program.Legal(prefix) }

// Cost is 1 for the name token of a preprocessing step and 0 otherwise, so
// Config.SimpleBias makes the initial policy prefer pipelines with few steps.
func (ProgramGrammar) Cost(tok int) float64 {
	op := program.TokenOp(tok)
	if op == "" || program.IsModel(op) || program.Vocab()[tok] != op {
		return 0
	}
	return 1
}

// sampleTag separates the policy's sample seeds from other seeds derived
// from the same run seed.
const sampleTag = "wmrl/policy/sample"

// SampleSeed is the seed of one trajectory: a hash of the run seed, the
// step, the group and the sample index (internal/seed.Derive), so a retried
// or replayed rollout draws the same trajectory.
func SampleSeed(runSeed, step, group, sample uint64) uint64 {
	return seed.Derive(seed.String(sampleTag), runSeed, step, group, sample)
}

// SampleProgram draws one program for card (p.Sample with seed) from a
// policy over ProgramGrammar and decodes it. It returns the sample and the
// program's canonical text (program.Program.String), the form in which
// trajectories are stored, executed and scored.
func (p *Policy) SampleProgram(card []float64, seed uint64) (Sample, string, error) {
	smp, err := p.Sample(card, seed)
	if err != nil {
		return Sample{}, "", err
	}
	prog, err := program.Decode(smp.Tokens)
	if err != nil {
		return Sample{}, "", fmt.Errorf("decode: %w", err)
	}
	return smp, prog.String(), nil
}
