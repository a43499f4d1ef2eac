package policy

import "slices"

// toyGrammar is a small pipeline language for tests: up to two distinct
// preprocessing steps, then one model, then one of that model's parameter
// values, then EOS.
type toyGrammar struct{}

var (
	_ Grammar = toyGrammar{}
	_ Coster  = toyGrammar{}
)

const (
	toyEOS = iota
	toyStd
	toyClip
	toyPoly
	toyRidge
	toyKNN
	toyGBT
	toyRidgeA1
	toyRidgeA2
	toyKNNK1
	toyKNNK2
	toyGBTD1
	toyGBTD2
	toyVocab
)

func (toyGrammar) Vocab() []string {
	return []string{"<eos>", "std", "clip", "poly", "ridge", "knn", "gbt",
		"ridge.alpha=0.1", "ridge.alpha=1", "knn.k=5", "knn.k=15", "gbt.depth=2", "gbt.depth=4"}
}

func (toyGrammar) EOS() int    { return toyEOS }
func (toyGrammar) MaxLen() int { return 5 }

func (toyGrammar) Legal(prefix []int) []int {
	var steps []int
	model := -1
	for i, t := range prefix {
		switch {
		case t == toyEOS:
			return nil
		case t >= toyStd && t <= toyPoly:
			if model >= 0 || slices.Contains(steps, t) || len(steps) == 2 {
				return nil
			}
			steps = append(steps, t)
		case t >= toyRidge && t <= toyGBT:
			if model >= 0 {
				return nil
			}
			model = t
		default:
			if model < 0 || i != len(prefix)-1 || toyParamModel(t) != model {
				return nil
			}
			return []int{toyEOS}
		}
	}
	if model >= 0 {
		first := toyRidgeA1 + 2*(model-toyRidge)
		return []int{first, first + 1}
	}
	var out []int
	if len(steps) < 2 {
		for t := toyStd; t <= toyPoly; t++ {
			if !slices.Contains(steps, t) {
				out = append(out, t)
			}
		}
	}
	return append(out, toyRidge, toyKNN, toyGBT)
}

// Cost counts preprocessing steps.
func (toyGrammar) Cost(tok int) float64 {
	if tok >= toyStd && tok <= toyPoly {
		return 1
	}
	return 0
}

func toyParamModel(t int) int {
	if t < toyRidgeA1 || t >= toyVocab {
		return -1
	}
	return toyRidge + (t-toyRidgeA1)/2
}

// toyModel returns the model token of a toy sequence.
func toyModel(tokens []int) int {
	for _, t := range tokens {
		if t >= toyRidge && t <= toyGBT {
			return t
		}
	}
	return -1
}

// enumerate calls f on every complete sequence of g (small grammars only).
func enumerate(g Grammar, prefix []int, f func([]int)) {
	for _, t := range g.Legal(prefix) {
		seq := append(slices.Clone(prefix), t)
		if t == g.EOS() {
			f(seq)
			continue
		}
		enumerate(g, seq, f)
	}
}
