package tinkerserve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/seed"
)

// maxSamples bounds num_samples.
const maxSamples = 1024

func (s *Server) asample(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.SampleRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	model, name, ok := parseSamplerPath(req.ModelPath)
	switch {
	case req.ModelPath == "":
		return nil, bad("model_path", "required (this server cannot sample a base model)")
	case !ok:
		return nil, bad("model_path", "%q: want tinker://<model>/sampler_weights/<name>", req.ModelPath)
	case req.NumSamples < 1 || req.NumSamples > maxSamples:
		return nil, bad("num_samples", "%d: want 1..%d", req.NumSamples, maxSamples)
	case req.SamplingParams.Seed == nil:
		return nil, bad("sampling_params.seed", "required: the built-in server samples deterministically from it")
	case req.SamplingParams.Temperature != 1:
		return nil, bad("sampling_params.temperature", "%v: the built-in policy samples at temperature 1", req.SamplingParams.Temperature)
	}
	toks, bad1 := req.Prompt.Tokens()
	if bad1 >= 0 {
		return nil, bad(fmt.Sprintf("prompt.chunks[%d].type", bad1), "%q: want %q", req.Prompt.Chunks[bad1].Type, tinker.ChunkEncodedText)
	}
	card, herr := s.card(ctx, toks, "prompt")
	if herr != nil {
		return nil, herr
	}
	if idem != "" {
		if out, ok, err := s.futureByKey(ctx, s.db, idem); err != nil || ok {
			return out, err
		}
	}
	var data []byte
	err := s.db.QueryRow(ctx, `SELECT policy FROM tinker_weights WHERE model_id = $1 AND kind = 'sampler' AND name = $2`, model, name).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("model_path", "no sampler weights %s", req.ModelPath)
	}
	if err != nil {
		return nil, fmt.Errorf("load weights: %w", err)
	}
	pol, err := s.policyOf(data)
	if err != nil {
		return nil, fmt.Errorf("weights %s: %w", req.ModelPath, err)
	}
	if mt := req.SamplingParams.MaxTokens; mt != nil && *mt < pol.Config().MaxLen {
		return nil, bad("sampling_params.max_tokens", "%d: the built-in policy's completions take up to %d tokens", *mt, pol.Config().MaxLen)
	}
	out := tinker.SampleResponse{Type: "sample", Sequences: make([]tinker.SampledSequence, req.NumSamples)}
	for i := range out.Sequences {
		smp, err := pol.Sample(card, seed.Derive(sampleTag, uint64(*req.SamplingParams.Seed), uint64(i)))
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		ids := make([]int, len(smp.Tokens))
		for j, t := range smp.Tokens {
			ids[j] = t + tinker.ProgramTokenOffset
		}
		out.Sequences[i] = tinker.SampledSequence{StopReason: "stop", Tokens: ids, Logprobs: smp.TokenLogProbs}
	}
	var fr any
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if idem != "" {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, idem); err != nil {
				return err
			}
			f, ok, err := s.futureByKey(ctx, tx, idem)
			if err != nil || ok {
				fr = f
				return err
			}
		}
		id, err := insertFuture(ctx, tx, "sample", model, nil, idem, out)
		fr = tinker.FutureResponse{RequestID: id}
		return err
	})
	return fr, err
}

// card decodes a prompt of BuiltinTokenizer ("suite/id" bytes) and returns
// its task's feature vector.
func (s *Server) card(ctx context.Context, toks []int, field string) ([]float64, *httpError) {
	text, err := tinker.DecodePrompt(toks)
	if err != nil {
		return nil, bad(field, "%v", err)
	}
	suite, id, err := tinker.ParseTaskPrompt(text)
	if err != nil {
		return nil, bad(field, "%v", err)
	}
	t, err := s.tasks.Task(ctx, suite, id)
	if err != nil {
		if backend.IsPermanent(err) {
			return nil, bad(field, "task %s of suite %d: %v", id, suite, err)
		}
		return nil, &httpError{status: 503, field: field, msg: fmt.Sprintf("task source: %v", err)}
	}
	if len(t.Features) == 0 {
		return nil, bad(field, "task %s of suite %d has no features", id, suite)
	}
	return t.Features, nil
}

// modelState is a model's row, locked for the transaction.
type modelState struct {
	id         string
	pol        *policy.Policy
	grad       []float64
	fbBatches  int64
	optimSteps int64
}

// modelOp applies one request to a model in a transaction that holds the
// model's row lock: a request whose (model, seq_id) or idempotency key has
// a future gets that future back; otherwise apply computes the result and
// the new state, and the future is written with it.
func (s *Server) modelOp(ctx context.Context, kind, model string, seq *int64, idem string,
	apply func(tx pgx.Tx, m *modelState) (result any, err error)) (any, error) {
	if model == "" {
		return nil, bad("model_id", "empty")
	}
	var out any
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var data, grad []byte
		var last int64
		m := &modelState{id: model}
		err := tx.QueryRow(ctx, `SELECT policy, grad, last_seq_id, fb_batches, optim_steps FROM tinker_models WHERE model_id = $1 FOR UPDATE`, model).
			Scan(&data, &grad, &last, &m.fbBatches, &m.optimSteps)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("model_id", "no model %q", model)
		}
		if err != nil {
			return err
		}
		if seq != nil {
			var id int64
			var k string
			err := tx.QueryRow(ctx, `SELECT request_id, kind FROM tinker_futures WHERE model_id = $1 AND seq_id = $2`, model, *seq).Scan(&id, &k)
			if err == nil {
				if k != kind {
					return &httpError{status: 409, field: "seq_id", msg: fmt.Sprintf("%d was a %s request of model %s, not %s", *seq, k, model, kind)}
				}
				out = tinker.FutureResponse{RequestID: strconv.FormatInt(id, 10)}
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if idem != "" {
			var id int64
			var k string
			var m2 *string
			err := tx.QueryRow(ctx, `SELECT request_id, kind, model_id FROM tinker_futures WHERE idempotency_key = $1`, idem).Scan(&id, &k, &m2)
			if err == nil {
				if k != kind || m2 == nil || *m2 != model {
					return &httpError{status: 409, field: tinker.HeaderIdempotencyKey, msg: fmt.Sprintf("%q was the key of another request (%s)", idem, k)}
				}
				out = tinker.FutureResponse{RequestID: strconv.FormatInt(id, 10)}
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if seq != nil && *seq <= last {
			return &httpError{status: 409, field: "seq_id", msg: fmt.Sprintf("%d: model %s is at seq_id %d", *seq, model, last)}
		}
		if m.pol, err = policy.Decode(data, policy.ProgramGrammar{}); err != nil {
			return fmt.Errorf("model %s: %w", model, err)
		}
		if m.grad, err = decodeGrad(grad, m.pol.NumParams()); err != nil {
			return fmt.Errorf("model %s: %w", model, err)
		}
		result, err := apply(tx, m)
		if err != nil {
			return err
		}
		var g []byte
		if m.grad != nil {
			g = encodeGrad(m.grad)
		}
		newLast := last
		if seq != nil {
			newLast = *seq
		}
		if _, err := tx.Exec(ctx, `UPDATE tinker_models SET policy = $2, grad = $3, last_seq_id = $4, fb_batches = $5, optim_steps = $6 WHERE model_id = $1`,
			model, m.pol.Encode(), g, newLast, m.fbBatches, m.optimSteps); err != nil {
			return err
		}
		id, err := insertFuture(ctx, tx, kind, model, seq, idem, result)
		out = tinker.FutureResponse{RequestID: id}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Server) forwardBackward(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.ForwardBackwardRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	in := req.ForwardBackwardInput
	if in.LossFn != tinker.LossImportanceSampling && in.LossFn != tinker.LossPPO {
		return nil, bad("forward_backward_input.loss_fn", "%q: this server has %s and %s", in.LossFn, tinker.LossImportanceSampling, tinker.LossPPO)
	}
	// Decode every datum before taking the model's lock.
	type item struct {
		ex     policy.Example
		lp     float64 // Σ of the datum's logprobs
		prefix string
	}
	items := make([]item, len(in.Data))
	for i, d := range in.Data {
		f := fmt.Sprintf("forward_backward_input.data[%d]", i)
		ex, lp, herr := s.example(ctx, d, f)
		if herr != nil {
			return nil, herr
		}
		items[i] = item{ex: ex, lp: lp, prefix: f}
	}
	return s.modelOp(ctx, "forward_backward", req.ModelID, req.SeqID, idem, func(_ pgx.Tx, m *modelState) (any, error) {
		metrics := map[string]float64{"loss:sum": 0, "logprob_diff:max": 0, "grad_norm": 0}
		if len(items) > 0 {
			// PolicyGradient sums: w = 1 and A = a give Σ_i a_i ∇log π(τ_i).
			batch := make([]policy.Example, len(items))
			for i, it := range items {
				batch[i] = it.ex
				lp, err := m.pol.LogProb(it.ex.Card, it.ex.Tokens)
				if err != nil {
					return nil, bad(it.prefix+".loss_fn_inputs.target_tokens", "not a completion of the policy: %v", err)
				}
				metrics["loss:sum"] -= it.ex.Advantage * lp
				metrics["logprob_diff:max"] = math.Max(metrics["logprob_diff:max"], math.Abs(lp-it.lp))
			}
			g, _, err := m.pol.PolicyGradient(batch)
			if err != nil {
				return nil, bad("forward_backward_input.data", "%v", err)
			}
			norm := 0.0
			for i, x := range g {
				m.grad[i] += x
				norm += x * x
			}
			metrics["grad_norm"] = math.Sqrt(norm)
		}
		m.fbBatches++
		return tinker.ForwardBackwardOutput{LossFnOutputType: "TensorData", LossFnOutputs: []map[string]tinker.TensorData{}, Metrics: metrics}, nil
	})
}

// example decodes one datum into an example whose Advantage is the datum's
// per-token advantage a (Weight 1), and the sum of its logprobs.
func (s *Server) example(ctx context.Context, d tinker.Datum, f string) (policy.Example, float64, *httpError) {
	input, badChunk := d.ModelInput.Tokens()
	if badChunk >= 0 {
		return policy.Example{}, 0, bad(fmt.Sprintf("%s.model_input.chunks[%d].type", f, badChunk), "want %q", tinker.ChunkEncodedText)
	}
	n := len(input)
	get := func(k string) ([]float64, *httpError) {
		t, ok := d.LossFnInputs[k]
		if !ok {
			return nil, bad(f+".loss_fn_inputs."+k, "required")
		}
		if len(t.Data) != n {
			return nil, bad(f+".loss_fn_inputs."+k, "%d values for %d input tokens", len(t.Data), n)
		}
		for _, x := range t.Data {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, bad(f+".loss_fn_inputs."+k, "not finite")
			}
		}
		return t.Data, nil
	}
	target, herr := get("target_tokens")
	if herr != nil {
		return policy.Example{}, 0, herr
	}
	logprobs, herr := get("logprobs")
	if herr != nil {
		return policy.Example{}, 0, herr
	}
	adv, herr := get("advantages")
	if herr != nil {
		return policy.Example{}, 0, herr
	}
	if n == 0 {
		return policy.Example{}, 0, bad(f+".model_input", "empty")
	}
	// The full sequence: the input, then the last target; the targets must
	// be the input shifted by one.
	full := append(append([]int(nil), input...), int(target[n-1]))
	for i := range n {
		if target[i] != math.Trunc(target[i]) || int(target[i]) != full[i+1] {
			return policy.Example{}, 0, bad(f+".loss_fn_inputs.target_tokens", "position %d is %v, want the next input token %d", i, target[i], full[i+1])
		}
	}
	p := 0
	for p < len(full) && full[p] < tinker.ProgramTokenOffset {
		p++
	}
	if p == 0 || p == len(full) {
		return policy.Example{}, 0, bad(f+".model_input", "want prompt bytes followed by program tokens")
	}
	card, herr := s.card(ctx, full[:p], f+".model_input")
	if herr != nil {
		return policy.Example{}, 0, herr
	}
	toks, err := tinker.ProgramTokens(full[p:])
	if err != nil {
		return policy.Example{}, 0, bad(f+".model_input", "%v", err)
	}
	a := adv[p-1]
	lp := 0.0
	for t := range n {
		switch {
		case t < p-1 && (adv[t] != 0 || logprobs[t] != 0):
			return policy.Example{}, 0, bad(f+".loss_fn_inputs.advantages", "position %d predicts a prompt token: want advantage and logprob 0", t)
		case t >= p-1 && adv[t] != a:
			return policy.Example{}, 0, bad(f+".loss_fn_inputs.advantages", "position %d is %v, position %d %v: the built-in policy takes one advantage per completion", t, adv[t], p-1, a)
		case t >= p-1:
			lp += logprobs[t]
		}
	}
	return policy.Example{Card: card, Tokens: toks, Advantage: a, Weight: 1}, lp, nil
}

func (s *Server) optimStep(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.OptimStepRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	a := req.AdamParams
	switch {
	case !(a.LearningRate > 0) || math.IsInf(a.LearningRate, 0):
		return nil, bad("adam_params.learning_rate", "%v: want finite and > 0", a.LearningRate)
	case !(a.Beta1 >= 0 && a.Beta1 < 1):
		return nil, bad("adam_params.beta1", "%v: want in [0, 1)", a.Beta1)
	case !(a.Beta2 >= 0 && a.Beta2 < 1):
		return nil, bad("adam_params.beta2", "%v: want in [0, 1)", a.Beta2)
	case !(a.Eps > 0) || math.IsInf(a.Eps, 0):
		return nil, bad("adam_params.eps", "%v: want finite and > 0", a.Eps)
	}
	return s.modelOp(ctx, "optim_step", req.ModelID, req.SeqID, idem, func(_ pgx.Tx, m *modelState) (any, error) {
		// Tinker's optimiser descends the loss −Σ adv·log π: the built-in
		// step ascends Σ adv·log π along the same accumulated gradient.
		st, err := m.pol.AdamStep(m.grad, policy.Adam{LearningRate: a.LearningRate, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps})
		if err != nil {
			return nil, bad("adam_params", "%v", err)
		}
		m.grad = nil
		m.optimSteps++
		return tinker.OptimStepResponse{Type: "optim_step", Metrics: map[string]float64{"grad_norm": st.GradNorm, "step": float64(st.Step)}}, nil
	})
}

func (s *Server) saveForSampler(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.SaveWeightsForSamplerRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if !namePattern.MatchString(req.Path) {
		return nil, bad("path", "%q: want a name of [A-Za-z0-9_-], 1 to 255 characters", req.Path)
	}
	return s.modelOp(ctx, "save_weights_for_sampler", req.ModelID, req.SeqID, idem, func(tx pgx.Tx, m *modelState) (any, error) {
		hash := m.pol.Hash()
		tag, err := tx.Exec(ctx, `INSERT INTO tinker_weights (model_id, kind, name, policy, hash) VALUES ($1, 'sampler', $2, $3, $4)
			ON CONFLICT DO NOTHING`, m.id, req.Path, m.pol.Encode(), hash)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, &httpError{status: 409, field: "path", msg: fmt.Sprintf("model %s already has sampler weights %q", m.id, req.Path)}
		}
		return tinker.SaveWeightsForSamplerResponse{Path: samplerPath(m.id, req.Path), Type: "save_weights_for_sampler", ContentHash: hash}, nil
	})
}

// saveWeights saves the model's training state (save_weights): the policy's
// encoding, which holds its parameters, Adam moments and step, as
// tinker_weights of kind 'training'. An accumulated gradient not yet
// applied is not part of it (as in Tinker, whose optimiser state is the
// moments).
func (s *Server) saveWeights(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.SaveWeightsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if !namePattern.MatchString(req.Path) {
		return nil, bad("path", "%q: want a name of [A-Za-z0-9_-], 1 to 255 characters", req.Path)
	}
	return s.modelOp(ctx, "save_weights", req.ModelID, req.SeqID, idem, func(tx pgx.Tx, m *modelState) (any, error) {
		hash := m.pol.Hash()
		tag, err := tx.Exec(ctx, `INSERT INTO tinker_weights (model_id, kind, name, policy, hash) VALUES ($1, 'training', $2, $3, $4)
			ON CONFLICT DO NOTHING`, m.id, req.Path, m.pol.Encode(), hash)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, &httpError{status: 409, field: "path", msg: fmt.Sprintf("model %s already has training weights %q", m.id, req.Path)}
		}
		return tinker.SaveWeightsResponse{Path: trainingPath(m.id, req.Path), Type: "save_weights", ContentHash: hash}, nil
	})
}

// loadWeights loads saved training weights, of this model or another of
// the same base model and LoRA rank, into the model (load_weights): its
// policy becomes the saved one, Adam state and step included, and an
// accumulated gradient is dropped. The built-in policy cannot reset its
// Adam state alone, so optimizer must be true.
func (s *Server) loadWeights(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.LoadWeightsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	src, name, ok := parseTrainingPath(req.Path)
	switch {
	case !ok:
		return nil, bad("path", "%q: want tinker://<model>/weights/<name> (training weights of save_weights)", req.Path)
	case !req.Optimizer:
		return nil, bad("optimizer", "false: this server loads training weights with their optimiser state only")
	}
	return s.modelOp(ctx, "load_weights", req.ModelID, req.SeqID, idem, func(tx pgx.Tx, m *modelState) (any, error) {
		var data []byte
		var srcBase, base string
		var srcRank, rank int
		err := tx.QueryRow(ctx, `SELECT w.policy, sm.base_model, sm.lora_rank, tm.base_model, tm.lora_rank
			FROM tinker_weights w JOIN tinker_models sm ON sm.model_id = w.model_id, tinker_models tm
			WHERE w.model_id = $1 AND w.kind = 'training' AND w.name = $2 AND tm.model_id = $3`, src, name, m.id).
			Scan(&data, &srcBase, &srcRank, &base, &rank)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, notFound("path", "no training weights %s", req.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("load weights: %w", err)
		}
		if srcBase != base || srcRank != rank {
			return nil, bad("path", "%s: weights of %s rank %d, model %s is %s rank %d", req.Path, srcBase, srcRank, m.id, base, rank)
		}
		pol, err := policy.Decode(data, policy.ProgramGrammar{})
		if err != nil {
			return nil, fmt.Errorf("weights %s: %w", req.Path, err)
		}
		m.pol, m.grad = pol, nil
		return tinker.LoadWeightsResponse{Path: req.Path, Type: "load_weights"}, nil
	})
}
