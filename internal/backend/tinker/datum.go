package tinker

import (
	"errors"
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
// A multi-turn trajectory (Datum.Turns) is one datum too, as tinker-cookbook
// merges the turns of an episode: its sequence is the one its last turn was
// sampled from (Sequence: the prompt, then each earlier turn's action and
// the observation that answered it) followed by the last action; every
// action token carries A_i·W_i and its sampling logprob, every prompt and
// observation token advantage 0 and logprob 0, so only the policy's own
// tokens are trained.
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
	out, _, err := buildDatums(tok, batch)
	return out, err
}

// actionTokens are the positions of a datum's target arrays that predict
// the policy's own (action) tokens, and those tokens' sampling logprobs.
type actionTokens struct {
	at       []int
	logprobs []float64
}

// buildDatums is BuildDatums, with the action positions of every datum it
// returns.
func buildDatums(tok Tokenizer, batch []backend.Datum) ([]Datum, []actionTokens, error) {
	var out []Datum
	var acts []actionTokens
	for i, d := range batch {
		if d.Weight == 0 {
			continue
		}
		fail := func(err error) ([]Datum, []actionTokens, error) {
			return nil, nil, fmt.Errorf("datum %d (group %d, sample %d): %w", i, d.Group, d.Sample, err)
		}
		if d.Weight < 0 {
			return fail(fmt.Errorf("weight %v < 0", d.Weight))
		}
		full, act, err := datumSequence(tok, d)
		if err != nil {
			return fail(err)
		}
		n := len(full) - 1
		target := make([]float64, n)
		logprobs := make([]float64, n)
		adv := make([]float64, n)
		for t := range n {
			target[t] = float64(full[t+1])
		}
		a := d.Advantage * d.Weight
		for j, t := range act.at {
			logprobs[t] = act.logprobs[j]
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
		acts = append(acts, act)
	}
	return out, acts, nil
}

// datumSequence is a datum's full token sequence and its action tokens'
// positions in the target arrays (position t predicts token t+1).
func datumSequence(tok Tokenizer, d backend.Datum) ([]int, actionTokens, error) {
	var act actionTokens
	actions := []backend.Exchange{{Tokens: d.Tokens, LogProbs: d.LogProbs}}
	if len(d.Turns) > 0 {
		actions = make([]backend.Exchange, len(d.Turns))
		for j, t := range d.Turns {
			actions[j] = t.Exchange
		}
	}
	last := actions[len(actions)-1]
	for j, e := range actions {
		what := "completion"
		if len(d.Turns) > 0 {
			what = fmt.Sprintf("turn %d", j+1)
		}
		switch {
		case len(e.Tokens) == 0:
			return nil, act, fmt.Errorf("%s: no completion tokens", what)
		case len(e.LogProbs) != len(e.Tokens):
			return nil, act, fmt.Errorf("%s: %d logprobs for %d tokens", what, len(e.LogProbs), len(e.Tokens))
		}
	}
	prefix, starts, err := sequence(tok, d.Task, actions[:len(actions)-1])
	if err != nil {
		return nil, act, err
	}
	full := append(prefix, last.Tokens...)
	starts = append(starts, len(prefix))
	for j, e := range actions {
		for k, lp := range e.LogProbs {
			act.at = append(act.at, starts[j]+k-1)
			act.logprobs = append(act.logprobs, lp)
		}
	}
	return full, act, nil
}

// Sequence is the token sequence a multi-turn trajectory's next turn is
// sampled from: the task's prompt, then each earlier turn's action tokens
// and the observation that answered it (encoded by tok, which must be an
// ObservationEncoder). With no earlier turn it is the prompt.
func Sequence(tok Tokenizer, task backend.Task, history []backend.Exchange) ([]int, error) {
	s, _, err := sequence(tok, task, history)
	return s, err
}

// sequence is Sequence, with the index in it of each turn's first action
// token.
func sequence(tok Tokenizer, task backend.Task, history []backend.Exchange) ([]int, []int, error) {
	prompt, err := tok.Prompt(task)
	if err != nil {
		return nil, nil, fmt.Errorf("prompt of task %s: %w", task.ID, err)
	}
	if len(prompt) == 0 {
		return nil, nil, fmt.Errorf("task %s has an empty prompt", task.ID)
	}
	out := append([]int(nil), prompt...)
	if len(history) == 0 {
		return out, nil, nil
	}
	enc, ok := tok.(ObservationEncoder)
	if !ok {
		return nil, nil, errors.New("the policy's tokenizer cannot encode observations: multi-turn trajectories need one (an ObservationEncoder)")
	}
	starts := make([]int, len(history))
	for j, e := range history {
		if len(e.Tokens) == 0 {
			return nil, nil, fmt.Errorf("turn %d: no action tokens stored (the policy gave none)", j+1)
		}
		if e.Observation == "" {
			return nil, nil, fmt.Errorf("turn %d: no observation", j+1)
		}
		obs, err := enc.Observation(e.Observation)
		if err != nil {
			return nil, nil, fmt.Errorf("turn %d: observation: %w", j+1, err)
		}
		if len(obs) == 0 {
			return nil, nil, fmt.Errorf("turn %d: the observation encodes to no tokens", j+1)
		}
		starts[j] = len(out)
		out = append(append(out, e.Tokens...), obs...)
	}
	return out, starts, nil
}
