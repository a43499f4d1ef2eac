package tinker

import (
	"fmt"

	"github.com/wmrl/wmrl/internal/backend"
)

// BuildDatums turns a fused batch into Tinker training data the way
// tinker-cookbook builds RL data: the full sequence is the prompt's tokens
// followed by the completion's; the model input is the sequence without its
// last token and target_tokens the sequence without its first, so position
// i predicts token i+1. logprobs holds the completion's sampling logprobs
// and advantages A_i·W_i at the positions that predict completion tokens,
// 0 at those predicting prompt tokens. A datum with weight 0 is left out
// (it contributes nothing).
//
// Tinker's losses sum over tokens and datums (no normalisation): the
// importance-sampling loss is −Σ_i Σ_t ρ_t·adv_t with ρ_t the ratio of the
// trained to the sampling probability of token t (1 on-policy), so its
// gradient at the sampling weights is −Σ_i W_i A_i ∇log π(τ_i), the
// fused objective of docs/design.md with the weights W_i as backend.Datum
// gives them (already normalised over the batch): the client does not divide
// again. Scaling all weights scales the step's gradient (Adam mostly
// undoes a global scale); the built-in policy instead divides by Σ w_i.
func BuildDatums(tok Tokenizer, batch []backend.Datum) ([]Datum, error) {
	var out []Datum
	for i, d := range batch {
		if d.Weight == 0 {
			continue
		}
		if d.Weight < 0 {
			return nil, fmt.Errorf("datum %d (group %d, sample %d): weight %v < 0", i, d.Group, d.Sample, d.Weight)
		}
		if len(d.Tokens) == 0 {
			return nil, fmt.Errorf("datum %d (group %d, sample %d): no completion tokens", i, d.Group, d.Sample)
		}
		if len(d.LogProbs) != len(d.Tokens) {
			return nil, fmt.Errorf("datum %d (group %d, sample %d): %d logprobs for %d tokens", i, d.Group, d.Sample, len(d.LogProbs), len(d.Tokens))
		}
		prompt, err := tok.Prompt(d.Task)
		if err != nil {
			return nil, fmt.Errorf("datum %d: prompt of task %s: %w", i, d.Task.ID, err)
		}
		if len(prompt) == 0 {
			return nil, fmt.Errorf("datum %d: task %s has an empty prompt", i, d.Task.ID)
		}
		full := append(append(make([]int, 0, len(prompt)+len(d.Tokens)), prompt...), d.Tokens...)
		n := len(full) - 1
		target := make([]float64, n)
		logprobs := make([]float64, n)
		adv := make([]float64, n)
		for t := range n {
			target[t] = float64(full[t+1])
		}
		a := d.Advantage * d.Weight
		for j := range d.Tokens {
			t := len(prompt) + j - 1 // the position predicting completion token j
			logprobs[t] = d.LogProbs[j]
			adv[t] = a
		}
		out = append(out, Datum{
			ModelInput: ModelInput{Chunks: []ModelInputChunk{{Type: ChunkEncodedText, Tokens: full[:n]}}},
			LossFnInputs: map[string]TensorData{
				"target_tokens": {Data: target, Dtype: "int64", Shape: []int{n}},
				"logprobs":      {Data: logprobs, Dtype: "float32", Shape: []int{n}},
				"advantages":    {Data: adv, Dtype: "float32", Shape: []int{n}},
			},
		})
	}
	return out, nil
}
