package tinkerserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/seed"
	"github.com/wmrl/wmrl/internal/serve/servicetime"
)

// maxSamples bounds num_samples.
const maxSamples = 1024

// sdkLearningRate is the SDK's default AdamParams.learning_rate.
const sdkLearningRate = 1e-4

// sampleRequest is the SDK's SampleRequest; absent fields take the SDK's
// defaults (SDK ≤ 0.16 leaves unset fields out).
type sampleRequest struct {
	NumSamples     *int              `json:"num_samples"`
	Prompt         tinker.ModelInput `json:"prompt"`
	SamplingParams struct {
		MaxTokens   *int     `json:"max_tokens"`
		Seed        *int64   `json:"seed"`
		Stop        any      `json:"stop"`
		Temperature *float64 `json:"temperature"`
		TopK        *int     `json:"top_k"`
		TopP        *float64 `json:"top_p"`
	} `json:"sampling_params"`
	BaseModel          *string `json:"base_model"`
	ModelPath          *string `json:"model_path"`
	SamplingSessionID  *string `json:"sampling_session_id"`
	SeqID              *int64  `json:"seq_id"`
	PromptLogprobs     *bool   `json:"prompt_logprobs"`
	TopkPromptLogprobs *int    `json:"topk_prompt_logprobs"`
	Type               string  `json:"type"`
}

func (s *Server) asample(ctx context.Context, body []byte, idem string) (any, error) {
	var req sampleRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	n := 1
	if req.NumSamples != nil {
		n = *req.NumSamples
	}
	sp := req.SamplingParams
	switch {
	case n < 1 || n > maxSamples:
		return nil, bad("num_samples", "%d: want 1..%d", n, maxSamples)
	case optionalFloat(sp.Temperature, 1) != 1:
		return nil, bad("sampling_params.temperature", "%v: the built-in policy samples at temperature 1 only", *sp.Temperature)
	case optionalFloat(sp.TopP, 1) != 1:
		return nil, bad("sampling_params.top_p", "%v: the built-in policy samples its full distribution (top_p 1) only", *sp.TopP)
	case sp.TopK != nil && *sp.TopK != -1 && *sp.TopK != 0:
		return nil, bad("sampling_params.top_k", "%d: the built-in policy samples its full distribution (top_k -1) only", *sp.TopK)
	case req.PromptLogprobs != nil && *req.PromptLogprobs:
		return nil, bad("prompt_logprobs", "true: the built-in policy scores completions, not prompts")
	case req.TopkPromptLogprobs != nil && *req.TopkPromptLogprobs != 0:
		return nil, bad("topk_prompt_logprobs", "%d: the built-in policy scores completions, not prompts", *req.TopkPromptLogprobs)
	}
	// What to sample from: a sampling session, saved sampler weights or
	// the base model.
	var ss samplingSession
	switch {
	case req.SamplingSessionID != nil && *req.SamplingSessionID != "":
		var herr *httpError
		if ss, herr = s.getSamplingSession(ctx, *req.SamplingSessionID); herr != nil {
			return nil, herr
		}
	case req.ModelPath != nil && *req.ModelPath != "":
		ss.ModelPath = *req.ModelPath
	case req.BaseModel != nil && *req.BaseModel != "":
		if herr := checkBaseModel(*req.BaseModel); herr != nil {
			return nil, herr
		}
		ss.BaseModel = *req.BaseModel
	default:
		return nil, bad("model_path", "required: model_path, base_model or sampling_session_id")
	}
	toks, bad1 := req.Prompt.Tokens()
	if bad1 >= 0 {
		return nil, bad(fmt.Sprintf("prompt.chunks[%d].type", bad1), "%q: want %q", req.Prompt.Chunks[bad1].Type, tinker.ChunkEncodedText)
	}
	// The prompt: a task's bytes, or a multi-turn trajectory's sequence so
	// far (turns.go), which ends with an observation.
	tr, herr := s.parseTrajectory(ctx, toks, "prompt")
	if herr != nil {
		return nil, herr
	}
	if len(tr.observed) != len(tr.actions) {
		return nil, bad("prompt", "ends with an action: want the prompt, or a trajectory's turns each followed by its observation")
	}
	if idem != "" {
		if out, ok, err := s.futureByKey(ctx, s.db, idem); err != nil || ok {
			return out, err
		}
	}
	var pol *policy.Policy
	model := ""
	if ss.ModelPath != "" {
		var name string
		var ok bool
		model, name, ok = parseSamplerPath(ss.ModelPath)
		if !ok {
			return nil, bad("model_path", "%q: want tinker://<model>/sampler_weights/<name>", ss.ModelPath)
		}
		var data []byte
		err := s.db.QueryRow(ctx, `SELECT policy FROM tinker_weights WHERE model_id = $1 AND kind = 'sampler' AND name = $2`, model, name).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, notFound("model_path", "no sampler weights %s", ss.ModelPath)
		}
		if err != nil {
			return nil, fmt.Errorf("load weights: %w", err)
		}
		if pol, err = s.policyOf(data); err != nil {
			return nil, fmt.Errorf("weights %s: %w", ss.ModelPath, err)
		}
	} else {
		var err error
		dim := len(tr.features)
		if len(tr.actions) > 0 {
			dim += builtin.FeedbackDim()
		}
		if pol, err = s.basePolicy(dim); err != nil {
			return nil, fmt.Errorf("base model: %w", err)
		}
	}
	card, herr := tr.cardAt(pol, len(tr.actions), "prompt")
	if herr != nil {
		return nil, herr
	}
	if mt := sp.MaxTokens; mt != nil && *mt < pol.Config().MaxLen {
		return nil, bad("sampling_params.max_tokens", "%d: the built-in policy's completions take up to %d tokens", *mt, pol.Config().MaxLen)
	}
	// The seed: the request's; else one derived from the sampling session
	// and seq_id (a retried request samples the same); else a fresh one.
	var base uint64
	switch {
	case sp.Seed != nil:
		base = uint64(*sp.Seed)
	case req.SamplingSessionID != nil && req.SeqID != nil:
		base = seed.Derive(seed.String(*req.SamplingSessionID), uint64(*req.SeqID))
	default:
		base = randomSeed()
	}
	out := tinker.SampleResponse{Type: "sample", Sequences: make([]tinker.SampledSequence, n)}
	for i := range out.Sequences {
		smp, err := pol.Sample(card, seed.Derive(sampleTag, base, uint64(i)))
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
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
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
		if s.opts.StrictSeq {
			// A model's requests in the SDK's order 1, 2, 3, ...: a
			// new model (last -1 after create_model, 0 after a load
			// that created it) takes 1 first.
			next := max(last, 0) + 1
			switch {
			case seq == nil:
				return bad("seq_id", "required: this server takes a model's requests in seq_id order (strict seq)")
			case *seq != next:
				return &httpError{status: 409, field: "seq_id", msg: fmt.Sprintf("%d: model %s takes seq_id %d next (strict seq: 1, 2, 3, ... without gaps)", *seq, model, next)}
			}
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

// fbRequest is a forward_backward request, decoded from either of its
// encodings: the SDK's JSON ForwardBackwardRequest or the protobuf one
// (proto.go). Both go through forwardBackwardOp, and errors name the
// fields by their JSON path (as the SDK's Python types name them).
type fbRequest struct {
	ModelID      string
	SeqID        *int64
	Data         []tinker.Datum
	LossFn       string
	LossFnConfig map[string]float64
	// ForwardOnly computes the loss outputs without accumulating a
	// gradient (the protobuf body's forward_only).
	ForwardOnly bool
}

func (s *Server) forwardBackward(ctx context.Context, body []byte, idem string) (any, error) {
	var req tinker.ForwardBackwardRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	// loss_fn_config is the SDK's, not a field of wmrl's client.
	var cfg struct {
		Input struct {
			LossFnConfig map[string]float64 `json:"loss_fn_config"`
		} `json:"forward_backward_input"`
	}
	if err := decode(body, &cfg); err != nil {
		return nil, err
	}
	in := req.ForwardBackwardInput
	return s.forwardBackwardOp(ctx, fbRequest{ModelID: req.ModelID, SeqID: req.SeqID, Data: in.Data, LossFn: in.LossFn,
		LossFnConfig: cfg.Input.LossFnConfig}, idem)
}

// forwardBackwardOp is forward_backward: the gradient of the batch's loss
// is added to the model's, and the future's result has one loss output per
// datum (its logprobs) and the metrics.
func (s *Server) forwardBackwardOp(ctx context.Context, in fbRequest, idem string) (any, error) {
	if in.LossFn != tinker.LossImportanceSampling && in.LossFn != tinker.LossPPO {
		return nil, bad("forward_backward_input.loss_fn", "%q: this server has %s and %s", in.LossFn, tinker.LossImportanceSampling, tinker.LossPPO)
	}
	for k := range in.LossFnConfig {
		// The server takes every update as on-policy (ρ = 1), where PPO's
		// clipping of ρ changes nothing; it has no other configuration.
		if in.LossFn != tinker.LossPPO || (k != "clip_low_threshold" && k != "clip_high_threshold") {
			return nil, bad("forward_backward_input.loss_fn_config."+k, "the built-in policy's %s takes no such configuration", in.LossFn)
		}
	}
	// Decode every datum before taking the model's lock.
	type item struct {
		tr     trajectory
		a      float64 // the datum's advantage
		lp     float64 // Σ of the datum's logprobs
		prefix string
		n      int // the input's length
	}
	items := make([]item, len(in.Data))
	for i, d := range in.Data {
		f := fmt.Sprintf("forward_backward_input.data[%d]", i)
		tr, a, lp, herr := s.example(ctx, d, f)
		if herr != nil {
			return nil, herr
		}
		items[i] = item{tr: tr, a: a, lp: lp, prefix: f, n: len(d.LossFnInputs["target_tokens"].Data)}
	}
	kind := "forward_backward"
	if in.ForwardOnly {
		kind = "forward"
	}
	return s.modelOp(ctx, kind, in.ModelID, in.SeqID, idem, func(_ pgx.Tx, m *modelState) (any, error) {
		// Metric names carry their reduction across chunks (name:reduction),
		// as the SDK's merging of chunked results requires.
		metrics := map[string]float64{"loss:sum": 0, "logprob_diff:max": 0, "grad_norm:mean": 0}
		outputs := make([]map[string]tinker.TensorData, len(items))
		var batch []policy.Example
		for i, it := range items {
			// logprobs: the model's logprob of each target token, 0 at
			// the positions predicting prompt or observation bytes (the
			// built-in policy conditions on them, it does not model
			// them). Each action is an example under the input it was
			// sampled from.
			per := make([]float64, it.n)
			lp := 0.0
			for j, toks := range it.tr.actions {
				card, herr := it.tr.cardAt(m.pol, j, it.prefix+".model_input")
				if herr != nil {
					return nil, herr
				}
				tlp, err := m.pol.TokenLogProbs(card, toks)
				if err != nil {
					return nil, bad(it.prefix+".loss_fn_inputs.target_tokens", "not a completion of the policy: %v", err)
				}
				for k, x := range tlp {
					per[it.tr.starts[j]-1+k] = x
					lp += x
				}
				batch = append(batch, policy.Example{Card: card, Tokens: toks, Advantage: it.a, Weight: 1})
			}
			outputs[i] = map[string]tinker.TensorData{"logprobs": {Data: per, Dtype: "float32", Shape: []int{it.n}}}
			metrics["loss:sum"] -= it.a * lp
			metrics["logprob_diff:max"] = math.Max(metrics["logprob_diff:max"], math.Abs(lp-it.lp))
		}
		if in.ForwardOnly {
			// forward: the outputs at the current weights, no gradient.
			delete(metrics, "grad_norm:mean")
			return tinker.ForwardBackwardOutput{LossFnOutputType: "TensorData", LossFnOutputs: outputs, Metrics: metrics}, nil
		}
		if len(batch) > 0 {
			// PolicyGradient sums: w = 1 and A = a give Σ_i a_i ∇log π(τ_i).
			g, _, err := m.pol.PolicyGradient(batch)
			if err != nil {
				return nil, bad("forward_backward_input.data", "%v", err)
			}
			norm := 0.0
			for i, x := range g {
				m.grad[i] += x
				norm += x * x
			}
			metrics["grad_norm:mean"] = math.Sqrt(norm)
		}
		m.fbBatches++
		return tinker.ForwardBackwardOutput{LossFnOutputType: "TensorData", LossFnOutputs: outputs, Metrics: metrics}, nil
	})
}

// example decodes one datum: its sequence (the prompt, then one action,
// or a multi-turn trajectory's actions with an observation between each
// two), the advantage a all its action positions carry, and the sum of
// its logprobs.
func (s *Server) example(ctx context.Context, d tinker.Datum, f string) (trajectory, float64, float64, *httpError) {
	input, badChunk := d.ModelInput.Tokens()
	if badChunk >= 0 {
		return trajectory{}, 0, 0, bad(fmt.Sprintf("%s.model_input.chunks[%d].type", f, badChunk), "want %q", tinker.ChunkEncodedText)
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
		return trajectory{}, 0, 0, herr
	}
	logprobs, herr := get("logprobs")
	if herr != nil {
		return trajectory{}, 0, 0, herr
	}
	adv, herr := get("advantages")
	if herr != nil {
		return trajectory{}, 0, 0, herr
	}
	if n == 0 {
		return trajectory{}, 0, 0, bad(f+".model_input", "empty")
	}
	// The full sequence: the input, then the last target; the targets must
	// be the input shifted by one.
	full := append(append([]int(nil), input...), int(target[n-1]))
	for i := range n {
		if target[i] != math.Trunc(target[i]) || int(target[i]) != full[i+1] {
			return trajectory{}, 0, 0, bad(f+".loss_fn_inputs.target_tokens", "position %d is %v, want the next input token %d", i, target[i], full[i+1])
		}
	}
	if len(full) < 2 || full[0] >= tinker.ProgramTokenOffset || full[len(full)-1] < tinker.ProgramTokenOffset {
		return trajectory{}, 0, 0, bad(f+".model_input", "want prompt bytes followed by program tokens (and, for a multi-turn trajectory, observation bytes and program tokens in turn)")
	}
	tr, herr := s.parseTrajectory(ctx, full, f+".model_input")
	if herr != nil {
		return trajectory{}, 0, 0, herr
	}
	// The positions predicting action tokens carry the datum's one
	// advantage; those predicting prompt or observation bytes 0, and
	// logprob 0 (masked out of the loss).
	isAction := make([]bool, n)
	for j, a := range tr.actions {
		for k := range a {
			isAction[tr.starts[j]-1+k] = true
		}
	}
	a := adv[tr.starts[0]-1]
	lp := 0.0
	for t := range n {
		switch {
		case !isAction[t] && (adv[t] != 0 || logprobs[t] != 0):
			return trajectory{}, 0, 0, bad(f+".loss_fn_inputs.advantages", "position %d predicts a prompt or observation token: want advantage and logprob 0", t)
		case isAction[t] && adv[t] != a:
			return trajectory{}, 0, 0, bad(f+".loss_fn_inputs.advantages", "position %d is %v, position %d %v: the built-in policy takes one advantage per trajectory", t, adv[t], tr.starts[0]-1, a)
		case isAction[t]:
			lp += logprobs[t]
		}
	}
	return tr, a, lp, nil
}

func (s *Server) optimStep(ctx context.Context, body []byte, idem string) (any, error) {
	// Absent Adam parameters take the SDK's defaults (SDK ≤ 0.16 leaves
	// unset fields out of the body).
	var req struct {
		AdamParams struct {
			LearningRate *float64 `json:"learning_rate"`
			Beta1        *float64 `json:"beta1"`
			Beta2        *float64 `json:"beta2"`
			Eps          *float64 `json:"eps"`
			WeightDecay  *float64 `json:"weight_decay"`
			GradClipNorm *float64 `json:"grad_clip_norm"`
		} `json:"adam_params"`
		ModelID string `json:"model_id"`
		SeqID   *int64 `json:"seq_id"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	ap := req.AdamParams
	a := tinker.AdamParams{LearningRate: optionalFloat(ap.LearningRate, sdkLearningRate), Beta1: optionalFloat(ap.Beta1, tinker.DefaultBeta1),
		Beta2: optionalFloat(ap.Beta2, tinker.DefaultBeta2), Eps: optionalFloat(ap.Eps, tinker.DefaultEps)}
	switch {
	case optionalFloat(ap.WeightDecay, 0) != 0:
		return nil, bad("adam_params.weight_decay", "%v: the built-in policy's Adam has no weight decay (want 0)", *ap.WeightDecay)
	case optionalFloat(ap.GradClipNorm, 0) != 0:
		return nil, bad("adam_params.grad_clip_norm", "%v: the built-in policy's Adam does not clip (want 0)", *ap.GradClipNorm)
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
		if err := servicetime.Wait(ctx, "update time", s.opts.UpdateTime); err != nil {
			return nil, err
		}
		// Tinker's optimiser descends the loss −Σ adv·log π: the built-in
		// step ascends Σ adv·log π along the same accumulated gradient.
		st, err := m.pol.AdamStep(m.grad, policy.Adam{LearningRate: a.LearningRate, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps})
		if err != nil {
			return nil, bad("adam_params", "%v", err)
		}
		m.grad = nil
		m.optimSteps++
		return tinker.OptimStepResponse{Type: "optim_step", Metrics: map[string]float64{"grad_norm:mean": st.GradNorm, "step:max": float64(st.Step)}}, nil
	})
}

// saveForSampler saves the model's weights for sampling
// (save_weights_for_sampler) under the request's name; without one (the
// SDK's save_weights_and_get_sampling_client), under a name derived from
// the seq_id, and it opens the sampling session sampling_session_seq_id of
// the model's session on them: the answer then has a sampling_session_id
// and no path.
func (s *Server) saveForSampler(ctx context.Context, body []byte, idem string) (any, error) {
	var req struct {
		ModelID              string `json:"model_id"`
		Path                 string `json:"path"`
		SeqID                *int64 `json:"seq_id"`
		SamplingSessionSeqID *int64 `json:"sampling_session_seq_id"`
		TTLSeconds           *int64 `json:"ttl_seconds"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	ephemeral := req.Path == ""
	switch {
	case ephemeral && req.SamplingSessionSeqID == nil:
		return nil, bad("path", "required unless sampling_session_seq_id is given")
	case !ephemeral && !namePattern.MatchString(req.Path):
		return nil, bad("path", "%q: want a name of [A-Za-z0-9_-], 1 to 255 characters", req.Path)
	}
	return s.modelOp(ctx, "save_weights_for_sampler", req.ModelID, req.SeqID, idem, func(tx pgx.Tx, m *modelState) (any, error) {
		name := req.Path
		if ephemeral {
			name = "sampler-" + strconv.FormatInt(*req.SamplingSessionSeqID, 10)
			if req.SeqID != nil {
				name = "seq-" + strconv.FormatInt(*req.SeqID, 10) + "-" + name
			}
		}
		hash := m.pol.Hash()
		tag, err := tx.Exec(ctx, `INSERT INTO tinker_weights (model_id, kind, name, policy, hash) VALUES ($1, 'sampler', $2, $3, $4)
			ON CONFLICT DO NOTHING`, m.id, name, m.pol.Encode(), hash)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, &httpError{status: 409, field: "path", msg: fmt.Sprintf("model %s already has sampler weights %q", m.id, name)}
		}
		if !ephemeral {
			return tinker.SaveWeightsForSamplerResponse{Path: samplerPath(m.id, name), Type: "save_weights_for_sampler", ContentHash: hash}, nil
		}
		var session string
		if err := tx.QueryRow(ctx, `SELECT session_id FROM tinker_models WHERE model_id = $1`, m.id).Scan(&session); err != nil {
			return nil, err
		}
		id := samplingID(session, *req.SamplingSessionSeqID)
		if err := putSamplingSession(ctx, tx, id, samplingSession{ModelPath: samplerPath(m.id, name)}); err != nil {
			return nil, err
		}
		return map[string]string{"sampling_session_id": id, "type": "save_weights_for_sampler", "content_hash": hash}, nil
	})
}

// saveWeights saves the model's training state (save_weights): the policy's
// encoding, which holds its parameters, Adam moments and step, as
// tinker_weights of kind 'training'. An accumulated gradient not yet
// applied is not part of it (as in Tinker, whose optimiser state is the
// moments).
func (s *Server) saveWeights(ctx context.Context, body []byte, idem string) (any, error) {
	var req struct {
		ModelID    string `json:"model_id"`
		Path       string `json:"path"`
		SeqID      *int64 `json:"seq_id"`
		TTLSeconds *int64 `json:"ttl_seconds"`
		Overwrite  bool   `json:"overwrite"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.Path != "" && !namePattern.MatchString(req.Path) {
		return nil, bad("path", "%q: want a name of [A-Za-z0-9_-], 1 to 255 characters", req.Path)
	}
	return s.modelOp(ctx, "save_weights", req.ModelID, req.SeqID, idem, func(tx pgx.Tx, m *modelState) (any, error) {
		if req.Path == "" {
			// No name: one derived from the request's place.
			req.Path = "state-" + strconv.FormatInt(m.optimSteps, 10)
			if req.SeqID != nil {
				req.Path = "seq-" + strconv.FormatInt(*req.SeqID, 10)
			}
		}
		hash := m.pol.Hash()
		conflict := `ON CONFLICT DO NOTHING`
		if req.Overwrite {
			conflict = `ON CONFLICT (model_id, kind, name) DO UPDATE SET policy = EXCLUDED.policy, hash = EXCLUDED.hash, created_at = now()`
		}
		tag, err := tx.Exec(ctx, `INSERT INTO tinker_weights (model_id, kind, name, policy, hash) VALUES ($1, 'training', $2, $3, $4) `+conflict,
			m.id, req.Path, m.pol.Encode(), hash)
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
	var req struct {
		ModelID      string         `json:"model_id"`
		SeqID        *int64         `json:"seq_id"`
		SessionID    string         `json:"session_id"`
		ModelSeqID   *int64         `json:"model_seq_id"`
		BaseModel    string         `json:"base_model"`
		UserMetadata map[string]any `json:"user_metadata"`
		Path         string         `json:"path"`
		Optimizer    bool           `json:"optimizer"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	src, name, ok := parseTrainingPath(req.Path)
	switch {
	case !ok:
		return nil, bad("path", "%q: want tinker://<model>/weights/<name> (training weights of save_weights)", req.Path)
	case !req.Optimizer:
		return nil, bad("optimizer", "false: this server loads training weights with their optimiser state only (load_state_with_optimizer, create_training_client_from_state_with_optimizer)")
	case req.SessionID != "" && req.ModelID != "":
		return nil, bad("session_id", "give model_id or session_id + model_seq_id, not both")
	case req.SessionID != "" && req.ModelSeqID == nil:
		return nil, bad("model_seq_id", "required with session_id")
	case req.SessionID != "":
		return s.createFromState(ctx, req.SessionID, *req.ModelSeqID, req.BaseModel, req.UserMetadata, src, name, req.Path, idem)
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
		return map[string]string{"path": req.Path, "model_id": m.id, "type": "load_weights"}, nil
	})
}

// createFromState creates model <session>:train:<model_seq_id> from saved
// training weights (load_weights with session addressing, the SDK's
// create_model_via_load_weights): the model takes the base model, rank and
// (unless the request gives its own) user metadata of the weights' model,
// and the load is its request 0. A repeated (session, model_seq_id) gets
// the first load's future.
func (s *Server) createFromState(ctx context.Context, session string, modelSeq int64, baseModel string, meta map[string]any,
	src, name, path, idem string) (any, error) {
	model := session + ":train:" + strconv.FormatInt(modelSeq, 10)
	var out any
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM tinker_sessions WHERE session_id = $1`, session).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notFound("session_id", "no session %q", session)
		}
		var existing string
		err := tx.QueryRow(ctx, `SELECT model_id FROM tinker_models WHERE session_id = $1 AND model_seq_id = $2`, session, modelSeq).Scan(&existing)
		if err == nil {
			var id int64
			if err := tx.QueryRow(ctx, `SELECT request_id FROM tinker_futures WHERE model_id = $1 AND seq_id = 0`, existing).Scan(&id); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return &httpError{status: 409, field: "model_seq_id", msg: fmt.Sprintf("%d: session %s already has model %s", modelSeq, session, existing)}
				}
				return err
			}
			out = tinker.FutureResponse{RequestID: strconv.FormatInt(id, 10), ModelID: existing}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var data, srcMeta []byte
		var base string
		var rank int
		err = tx.QueryRow(ctx, `SELECT w.policy, m.base_model, m.lora_rank, m.user_metadata FROM tinker_weights w JOIN tinker_models m USING (model_id)
			WHERE w.model_id = $1 AND w.kind = 'training' AND w.name = $2`, src, name).Scan(&data, &base, &rank, &srcMeta)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("path", "no training weights %s", path)
		}
		if err != nil {
			return err
		}
		if baseModel != "" && baseModel != base {
			return bad("base_model", "%q: %s are weights of %q", baseModel, path, base)
		}
		if meta != nil {
			if srcMeta, err = json.Marshal(meta); err != nil {
				return err
			}
		}
		if _, err := policy.Decode(data, policy.ProgramGrammar{}); err != nil {
			return fmt.Errorf("weights %s: %w", path, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tinker_models (model_id, session_id, model_seq_id, base_model, lora_rank, user_metadata, policy, last_seq_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 0)`, model, session, modelSeq, base, rank, srcMeta, data); err != nil {
			return err
		}
		zero := int64(0)
		id, err := insertFuture(ctx, tx, "load_weights", model, &zero, idem, map[string]string{"path": path, "model_id": model, "type": "load_weights"})
		if err != nil {
			return err
		}
		out = tinker.FutureResponse{RequestID: id, ModelID: model}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkBaseModel refuses a base model other than the built-in policy's.
func checkBaseModel(name string) *httpError {
	if name != tinker.BuiltinBaseModel {
		return bad("base_model", "%q: this server has only %q", name, tinker.BuiltinBaseModel)
	}
	return nil
}
