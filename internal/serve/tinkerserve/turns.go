package tinkerserve

import (
	"context"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/turns"
)

// A multi-turn trajectory's tokens (docs/design.md, "Multi-turn
// trajectories"): the prompt's bytes, then each turn's action (program
// tokens, ProgramTokenOffset and up) and the observation that answered it
// (the bytes of turns.Render's text). The server tells them apart by their
// ids. A model of a multi-turn run (user metadata wmrl_turns > 1) has the
// built-in policy's feedback input: it samples turn t from the task's
// features and the previous attempt, read from the sequence (turn t−1's
// program and its observation's status and score bucket), and trains each
// action under the input it was sampled from.

// trajectory is a token sequence split into its parts.
type trajectory struct {
	// features are the prompt's task's.
	features []float64
	// actions are the program tokens of each action (unshifted), starts
	// the index in the sequence of each one's first token.
	actions [][]int
	starts  []int
	// observed are the answers read from the observations, one after each
	// action (after every action but the last when the sequence ends with
	// one).
	observed []turns.Parsed
}

// parseTrajectory splits toks into prompt, actions and observations;
// field names the sequence in errors.
func (s *Server) parseTrajectory(ctx context.Context, toks []int, field string) (trajectory, *httpError) {
	var tr trajectory
	isProgram := func(id int) bool { return id >= tinker.ProgramTokenOffset }
	// runs of one kind: [start, end)
	var runs [][2]int
	for i := 0; i < len(toks); {
		j := i
		for j < len(toks) && isProgram(toks[j]) == isProgram(toks[i]) {
			j++
		}
		runs = append(runs, [2]int{i, j})
		i = j
	}
	if len(runs) == 0 || isProgram(toks[0]) {
		return tr, bad(field, "want the prompt's bytes first")
	}
	var herr *httpError
	if tr.features, herr = s.card(ctx, toks[:runs[0][1]], field); herr != nil {
		return tr, herr
	}
	for k, r := range runs[1:] {
		seg := toks[r[0]:r[1]]
		if k%2 == 0 { // an action
			p, err := tinker.ProgramTokens(seg)
			if err != nil {
				return tr, bad(field, "%v", err)
			}
			tr.actions = append(tr.actions, p)
			tr.starts = append(tr.starts, r[0])
			continue
		}
		text, err := tinker.DecodePrompt(seg)
		if err != nil {
			return tr, bad(field, "observation %d: %v", len(tr.observed)+1, err)
		}
		ans, err := turns.ParseObservation(text)
		if err != nil {
			return tr, bad(field, "observation %d: %v", len(tr.observed)+1, err)
		}
		tr.observed = append(tr.observed, ans)
	}
	return tr, nil
}

// previous is the attempt before action j (j >= 1) as the built-in policy
// takes it.
func (tr trajectory) previous(j int) (*backend.Previous, error) {
	ids := make([]int, len(tr.actions[j-1]))
	for i, t := range tr.actions[j-1] {
		ids[i] = t + tinker.ProgramTokenOffset
	}
	text, err := tinker.BuiltinTokenizer{}.Decode(ids)
	if err != nil {
		return nil, err
	}
	o := tr.observed[j-1]
	return &backend.Previous{Text: text, Status: o.Status, Graded: o.Graded, Bucket: o.Bucket}, nil
}

// cardAt is the policy's input for action j of the trajectory (j =
// len(actions): the next one to sample): the task's features for a
// single-shot policy, which takes one action only; the features and the
// previous attempt for a multi-turn one.
func (tr trajectory) cardAt(pol *policy.Policy, j int, field string) ([]float64, *httpError) {
	multi := pol.Config().CardDim == len(tr.features)+builtin.FeedbackDim()
	switch {
	case !multi && j > 0:
		return nil, bad(field, "%d earlier turns: the model is a single-shot policy (create_model without user_metadata.wmrl_turns > 1)", j)
	case !multi:
		return tr.features, nil
	case j == 0:
		c, err := builtin.FeedbackCard(tr.features, nil)
		if err != nil {
			return nil, bad(field, "%v", err)
		}
		return c, nil
	}
	prev, err := tr.previous(j)
	if err != nil {
		return nil, bad(field, "turn %d: %v", j, err)
	}
	c, err := builtin.FeedbackCard(tr.features, prev)
	if err != nil {
		return nil, bad(field, "turn %d: %v", j+1, err)
	}
	return c, nil
}
