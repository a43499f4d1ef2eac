package tinker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/store"
)

// Policy is a backend.Policy over the Tinker training API. A run is one
// Tinker model (a LoRA adapter on Config.BaseModel, created by Init); its
// checkpoint v is the sampler weights saved under the name "wmrl-v<v>", and
// Checkpoint.Location is their tinker:// path, from which the model id is
// read back. It is safe for concurrent use.
type Policy struct {
	cfg     Config
	base    string
	tok     Tokenizer
	journal Journal
	hc      *http.Client

	mu       sync.Mutex
	session  string
	beat     time.Time
	modelSeq int64
}

var (
	_ backend.Policy    = (*Policy)(nil)
	_ backend.Continuer = (*Policy)(nil)
)

// New returns the policy for cfg (defaults filled, validated). tok is the
// service's tokenizer (BuiltinTokenizer for the built-in server), j the
// request journal (PostgresJournal in a worker), hc the HTTP client (nil:
// http.DefaultClient).
func New(cfg Config, tok Tokenizer, j Journal, hc *http.Client) (*Policy, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tok == nil || j == nil {
		return nil, errors.New("tinker policy: a tokenizer and a journal are required")
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Policy{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), tok: tok, journal: j, hc: hc}, nil
}

// The request sequence of a model: Tinker orders a model's requests by
// seq_id, and the built-in server answers a repeated (model, seq_id) with
// its first future. wmrl derives them from the checkpoint version v, four
// per version, so that a retry sends the same ones:
//
//	4v    save_weights_for_sampler: checkpoint v (sampler weights)
//	4v+1  forward_backward of the update from v
//	4v+2  optim_step of the update from v
//	4v+3  save_weights: the training state of v+1 (weights and Adam
//	      state), which wmrl continue loads
//
// A continued run's new model loads the training state of its first
// checkpoint v (v >= 1) with load_weights at seq_id 4v-1, the place of the
// save_weights that made it (a new model never sent one there), and saves
// it for sampling at 4v; it then goes on as above. Runs recorded before
// save_weights was added used three per version (3v, 3v+1, 3v+2, no
// training state): their journal entries name those seq_ids.
func seqSave(v int) int64     { return 4 * int64(v) }
func seqForward(v int) int64  { return 4*int64(v) + 1 }
func seqOptimise(v int) int64 { return 4*int64(v) + 2 }

// seqTrainingState is the seq_id of the request that puts a model at the
// training state of version v: the save_weights after the update that made
// it, or a continued model's load_weights.
func seqTrainingState(v int) int64 { return 4*int64(v) - 1 }

// checkpointName is the sampler weights' name of version v.
func checkpointName(v int) string { return fmt.Sprintf("wmrl-v%06d", v) }

// ModelOf returns the model id of a tinker:// sampler path
// (tinker://<model>/sampler_weights/<name>, or tinker://<model>/<name>).
func ModelOf(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "tinker://")
	model, _, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || model == "" {
		return "", fmt.Errorf("checkpoint location %q: want tinker://<model>/sampler_weights/<name>", path)
	}
	return model, nil
}

// Init creates the run's model and saves its initial weights as checkpoint
// 0. The model's user metadata carries the run, suite, seed and settings
// (the built-in server initialises its policy from them; a hosted service
// just records them). Its journal key is "<run>/init".
func (p *Policy) Init(ctx context.Context, req backend.InitRequest) (backend.Checkpoint, error) {
	key := req.Run + "/init"
	model, err := p.createModel(ctx, key, req.Run, req.Suite, req.Seed, req.Settings)
	if err != nil {
		return backend.Checkpoint{}, fmt.Errorf("init run %s: %w", req.Run, err)
	}
	return p.save(ctx, key, model, 0)
}

// createModel creates a model for run (journal key key+"/create_model")
// and returns its id.
func (p *Policy) createModel(ctx context.Context, key, run string, suite, initSeed uint64, set backend.PolicySettings) (string, error) {
	cfg := p.with(set)
	if cfg.BaseModel == "" {
		// Neither the run (policy.tinker.base_model) nor the worker
		// (its --backends file) names the model to train.
		return "", backend.Permanent(errors.New("policy.tinker.base_model: empty " +
			"(set it in the run config or in the worker's --backends file)"))
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	meta := map[string]any{
		"wmrl_run": run, "wmrl_suite": strconv.FormatUint(suite, 10), "wmrl_seed": strconv.FormatUint(initSeed, 10),
		"wmrl_hidden": strconv.Itoa(set.Hidden), "wmrl_learning_rate": f(set.LearningRate), "wmrl_kl_coef": f(set.KLCoef),
	}
	p.mu.Lock()
	seq := p.modelSeq
	p.modelSeq++
	p.mu.Unlock()
	var created CreateModelResponse
	err := p.phase(ctx, key+"/create_model", "", seq, func() (string, error) {
		session, err := p.ensureSession(ctx)
		if err != nil {
			return "", err
		}
		var fr FutureResponse
		err = p.post(ctx, PathCreateModel, CreateModelRequest{SessionID: session, ModelSeqID: seq, BaseModel: cfg.BaseModel,
			UserMetadata: meta, LoraConfig: &LoraConfig{Rank: cfg.LoRARank}, Type: "create_model"}, key+"/create_model", &fr)
		return fr.RequestID, err
	}, &created)
	if err != nil {
		return "", fmt.Errorf("create model: %w", err)
	}
	if created.ModelID == "" {
		return "", backend.Permanent(errors.New("create_model gave no model_id"))
	}
	return created.ModelID, nil
}

// save saves the model's weights for sampling as checkpoint v.
func (p *Policy) save(ctx context.Context, key, model string, v int) (backend.Checkpoint, error) {
	seq := seqSave(v)
	name := checkpointName(v)
	var out SaveWeightsForSamplerResponse
	err := p.submitPhase(ctx, key+"/save_weights_for_sampler", model, seq, PathSaveWeightsForSampler,
		SaveWeightsForSamplerRequest{ModelID: model, Path: name, SeqID: &seq, Type: "save_weights_for_sampler"}, &out)
	if err != nil {
		return backend.Checkpoint{}, fmt.Errorf("save checkpoint %d: %w", v, err)
	}
	if m, err := ModelOf(out.Path); err != nil || m != model || !strings.HasSuffix(out.Path, "/"+name) {
		return backend.Checkpoint{}, backend.Permanent(fmt.Errorf("save checkpoint %d: the service saved %q, want tinker://%s/.../%s", v, out.Path, model, name))
	}
	return backend.Checkpoint{Version: v, Hash: CheckpointHash(out), Location: out.Path}, nil
}

// SaveWeights saves the model's training weights with their optimiser state
// under name (save_weights, the SDK's save_state) and returns the service's
// answer: their tinker://<model>/weights/<name> path. It is journalled under
// key with seq, like every request of Init and Update: called again with the
// same key it polls the first request's future.
func (p *Policy) SaveWeights(ctx context.Context, key, model string, seq int64, name string) (SaveWeightsResponse, error) {
	var out SaveWeightsResponse
	err := p.submitPhase(ctx, key, model, seq, PathSaveWeights,
		SaveWeightsRequest{ModelID: model, Path: name, SeqID: &seq, Type: "save_weights"}, &out)
	if err != nil {
		return out, fmt.Errorf("save_weights %s: %w", name, err)
	}
	if m, err := ModelOf(out.Path); err != nil || m != model || !strings.HasSuffix(out.Path, "/"+name) {
		return out, backend.Permanent(fmt.Errorf("save_weights %s: the service saved %q, want tinker://%s/.../%s", name, out.Path, model, name))
	}
	return out, nil
}

// LoadWeights loads the training weights at path (a save_weights path, of
// this model or another) into the model, with their optimiser state when
// optimizer is set (load_weights, the SDK's load_state_with_optimizer). It is
// journalled under key with seq.
func (p *Policy) LoadWeights(ctx context.Context, key, model string, seq int64, path string, optimizer bool) (LoadWeightsResponse, error) {
	var out LoadWeightsResponse
	if _, err := ModelOf(path); err != nil {
		return out, backend.Permanent(fmt.Errorf("load_weights: %w", err))
	}
	err := p.submitPhase(ctx, key, model, seq, PathLoadWeights,
		LoadWeightsRequest{ModelID: model, Path: path, Optimizer: optimizer, SeqID: &seq, Type: "load_weights"}, &out)
	if err != nil {
		return out, fmt.Errorf("load_weights %s: %w", path, err)
	}
	return out, nil
}

// Continue implements backend.Continuer: it creates the new run's own model
// (journal key "<run>/continue"), loads into it the training weights and
// Adam state that the old run saved with checkpoint v = req.Checkpoint.Version
// (its State, at seq_id 4v-1) and saves them for sampling as the new run's
// checkpoint v (seq_id 4v). The new run's updates then train the new
// model; the old run's model, which may have gone past v, is left alone.
// When the service reports content hashes (tinkerserve), the new
// checkpoint's hash must be the old one's: the loaded state is the same.
// Hosted Tinker reports none, so the hash is the new path's.
func (p *Policy) Continue(ctx context.Context, req backend.ContinueRequest) (backend.Checkpoint, error) {
	from, v := req.Checkpoint, req.Checkpoint.Version
	fail := func(err error) (backend.Checkpoint, error) {
		return backend.Checkpoint{}, fmt.Errorf("continue run %s from checkpoint %d of run %s: %w", req.Run, v, req.From, err)
	}
	switch {
	case v < 1:
		return fail(backend.Permanent(fmt.Errorf("version %d: want >= 1 (checkpoint 0 is a new run's)", v)))
	case from.State == "":
		return fail(backend.Permanent(errors.New("the run saved no training weights with it (recorded before wmrl saved them); start a new run")))
	}
	key := req.Run + "/continue"
	model, err := p.createModel(ctx, key, req.Run, req.Suite, req.Seed, req.Settings)
	if err != nil {
		return fail(err)
	}
	if _, err := p.LoadWeights(ctx, key+"/load_weights", model, seqTrainingState(v), from.State, true); err != nil {
		return fail(err)
	}
	ck, err := p.save(ctx, key, model, v)
	if err != nil {
		return fail(err)
	}
	if isContentHash(from.Hash) && isContentHash(ck.Hash) && ck.Hash != from.Hash {
		return fail(backend.Permanent(fmt.Errorf("the loaded weights hash to %s, the run's checkpoint to %s", ck.Hash, from.Hash)))
	}
	ck.State = from.State
	return ck, nil
}

// isContentHash reports whether h is a hash the service reported, not one
// of a path.
func isContentHash(h string) bool { return h != "" && !strings.HasPrefix(h, "path-sha256:") }

// CheckpointHash is the hash recorded for saved weights: the content hash
// the service reports (the built-in server's policy hash), else, since
// hosted Tinker reports none, "path-sha256:" and the hex SHA-256 of the
// tinker:// path, which names immutable weights but does not verify them.
func CheckpointHash(r SaveWeightsForSamplerResponse) string {
	if r.ContentHash != "" {
		return r.ContentHash
	}
	sum := sha256.Sum256([]byte(r.Path))
	return "path-sha256:" + hex.EncodeToString(sum[:])
}

// submitPhase is phase for a request posted to path with body.
func (p *Policy) submitPhase(ctx context.Context, key, model string, seq int64, path string, body, out any) error {
	return p.phase(ctx, key, model, seq, func() (string, error) {
		var fr FutureResponse
		err := p.post(ctx, path, body, key, &fr)
		return fr.RequestID, err
	}, out)
}

// phase runs one journalled request: it records the request in the journal
// before sending it, records the future's id once the service gave it, and
// waits for the future. When the journal already holds the key, it polls
// the recorded future instead of sending again; an entry begun but not sent
// (the worker died in between) is sent again with the same seq_id and
// idempotency key, which a Tinker server answers with the first future.
func (p *Policy) phase(ctx context.Context, key, model string, seq int64, submit func() (string, error), out any) error {
	e, err := p.journal.Begin(ctx, store.TinkerRequest{Key: key, ModelID: model, SeqID: seq})
	if err != nil {
		return fmt.Errorf("journal %s: %w", key, err)
	}
	if e.ModelID != model || (model != "" && e.SeqID != seq) {
		return backend.Permanent(fmt.Errorf("journal %s: recorded for model %q seq_id %d, now model %q seq_id %d", key, e.ModelID, e.SeqID, model, seq))
	}
	if e.RequestID == "" {
		id, err := submit()
		if err != nil {
			return err
		}
		if id == "" {
			return backend.Permanent(fmt.Errorf("%s: the service gave no request_id", key))
		}
		if err := p.journal.Sent(ctx, key, id); err != nil {
			return fmt.Errorf("journal %s: %w", key, err)
		}
		e.RequestID = id
	}
	return p.wait(ctx, e.RequestID, out)
}

// Sample asks for len(Seeds) completions in one request: num_samples =
// len(Seeds) and sampling seed = Seeds[0]>>33 (a non-negative 31-bit
// integer, which every server accepts). The service must sample
// deterministically from its seed (the built-in server does; hosted Tinker
// documents seeded sampling); Seeds[1:] do not reach it, so completion i is
// a function of Seeds[0] and i, not of Seeds[i].
func (p *Policy) Sample(ctx context.Context, req backend.SampleRequest) ([]backend.Completion, error) {
	if len(req.Seeds) == 0 {
		return nil, nil
	}
	if _, err := ModelOf(req.Checkpoint.Location); err != nil {
		return nil, backend.Permanent(err)
	}
	prompt, err := p.tok.Prompt(req.Task)
	if err != nil {
		return nil, backend.Permanent(fmt.Errorf("prompt of task %s: %w", req.Task.ID, err))
	}
	seed := int64(req.Seeds[0] >> 33)
	cfg := p.with(req.Settings)
	maxTokens := cfg.MaxTokens
	body := SampleRequest{
		NumSamples:     len(req.Seeds),
		Prompt:         ModelInput{Chunks: []ModelInputChunk{{Type: ChunkEncodedText, Tokens: prompt}}},
		SamplingParams: SamplingParams{MaxTokens: &maxTokens, Seed: &seed, Temperature: cfg.Temperature},
		ModelPath:      req.Checkpoint.Location,
		Type:           "sample",
	}
	// The idempotency key names the request's content, so that the same
	// group asked again (a retried activity) gets the first future.
	data, _ := json.Marshal(body)
	sum := sha256.Sum256(data)
	idem := req.Key + "/sample/" + hex.EncodeToString(sum[:8])
	var fr FutureResponse
	if err := p.post(ctx, PathAsample, body, idem, &fr); err != nil {
		return nil, fmt.Errorf("sample task %s: %w", req.Task.ID, err)
	}
	var out SampleResponse
	if err := p.wait(ctx, fr.RequestID, &out); err != nil {
		return nil, fmt.Errorf("sample task %s: %w", req.Task.ID, err)
	}
	if len(out.Sequences) != len(req.Seeds) {
		return nil, backend.Permanent(fmt.Errorf("sample task %s: %d sequences for num_samples %d", req.Task.ID, len(out.Sequences), len(req.Seeds)))
	}
	comps := make([]backend.Completion, len(out.Sequences))
	for i, s := range out.Sequences {
		if len(s.Logprobs) != len(s.Tokens) {
			return nil, backend.Permanent(fmt.Errorf("sample task %s: sequence %d has %d logprobs for %d tokens", req.Task.ID, i, len(s.Logprobs), len(s.Tokens)))
		}
		text, err := p.tok.Decode(s.Tokens)
		if err != nil {
			return nil, backend.Permanent(fmt.Errorf("sample task %s: sequence %d: %w", req.Task.ID, i, err))
		}
		comps[i] = backend.Completion{Text: text, Tokens: s.Tokens, LogProbs: s.Logprobs}
	}
	return comps, nil
}

// Update applies one step to the run's model: forward_backward on the
// batch's datums (BuildDatums; skipped when every weight is 0, so the
// optimiser step then has a zero gradient), optim_step with the run's
// learning rate and the configured Adam betas and eps, save_weights (the
// training state, Checkpoint.State, that wmrl continue loads) and
// save_weights_for_sampler as checkpoint Base.Version+1. Each request is
// journalled under req.Key and its phase, and carries a seq_id derived from
// the version, so one optimiser step is applied per key however often the
// activity is retried.
//
// The model's weights are the service's state: Update assumes the model is
// at Base (the previous Update of this run saved it), which holds as long as
// the run's updates go through this adapter in version order.
func (p *Policy) Update(ctx context.Context, req backend.UpdateRequest) (backend.Checkpoint, backend.UpdateStats, error) {
	fail := func(err error) (backend.Checkpoint, backend.UpdateStats, error) {
		return backend.Checkpoint{}, backend.UpdateStats{}, fmt.Errorf("update run %s step %d: %w", req.Run, req.Step, err)
	}
	cfg := p.with(req.Settings)
	model, err := ModelOf(req.Base.Location)
	switch {
	case err != nil:
		return fail(backend.Permanent(err))
	case req.Key == "":
		return fail(backend.Permanent(errors.New("no idempotency key")))
	case !(req.Settings.LearningRate > 0):
		return fail(backend.Permanent(fmt.Errorf("policy.learning_rate %v: want > 0", req.Settings.LearningRate)))
	case req.Base.Version < 0:
		return fail(backend.Permanent(fmt.Errorf("base version %d", req.Base.Version)))
	}
	datums, err := BuildDatums(p.tok, req.Batch)
	if err != nil {
		return fail(backend.Permanent(err))
	}
	v := req.Base.Version
	stats := backend.UpdateStats{Step: uint64(v + 1)}
	for _, d := range req.Batch {
		if d.Weight > 0 {
			lp := 0.0
			for _, x := range d.LogProbs {
				lp += x
			}
			stats.WeightSum += d.Weight
			stats.Trajectories++
			stats.Objective += d.Weight * d.Advantage * lp
		}
	}
	if stats.WeightSum > 0 {
		stats.Objective /= stats.WeightSum
	}
	if len(datums) > 0 {
		seq := seqForward(v)
		var out ForwardBackwardOutput
		err := p.submitPhase(ctx, req.Key+"/forward_backward", model, seq, PathForwardBackward, ForwardBackwardRequest{
			ForwardBackwardInput: ForwardBackwardInput{Data: datums, LossFn: cfg.Loss}, ModelID: model, SeqID: &seq, Type: "forward_backward"}, &out)
		if err != nil {
			return fail(fmt.Errorf("forward_backward: %w", err))
		}
		if g, ok := gradNorm(out.Metrics); ok {
			stats.GradNorm = g
		}
	}
	seq := seqOptimise(v)
	var out OptimStepResponse
	err = p.submitPhase(ctx, req.Key+"/optim_step", model, seq, PathOptimStep, OptimStepRequest{
		AdamParams: AdamParams{LearningRate: req.Settings.LearningRate, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps},
		ModelID:    model, SeqID: &seq, Type: "optim_step"}, &out)
	if err != nil {
		return fail(fmt.Errorf("optim_step: %w", err))
	}
	if g, ok := gradNorm(out.Metrics); ok {
		stats.GradNorm = g
	}
	state, err := p.SaveWeights(ctx, req.Key+"/save_weights", model, seqTrainingState(v+1), checkpointName(v+1))
	if err != nil {
		return fail(err)
	}
	ck, err := p.save(ctx, req.Key, model, v+1)
	if err != nil {
		return fail(err)
	}
	ck.State = state.Path
	return ck, stats, nil
}

// with returns the adapter's configuration with the run's model settings
// (the run config's policy.tinker) over it: a setting the run leaves zero
// keeps the adapter's value.
func (p *Policy) with(s backend.PolicySettings) Config {
	c := p.cfg
	m := s.Model
	if m.BaseModel != "" {
		c.BaseModel = m.BaseModel
	}
	if m.LoRARank != 0 {
		c.LoRARank = m.LoRARank
	}
	if m.Loss != "" {
		c.Loss = m.Loss
	}
	if m.Beta1 != 0 {
		c.Beta1 = m.Beta1
	}
	if m.Beta2 != 0 {
		c.Beta2 = m.Beta2
	}
	if m.Eps != 0 {
		c.Eps = m.Eps
	}
	if m.MaxTokens != 0 {
		c.MaxTokens = m.MaxTokens
	}
	if m.Temperature != 0 {
		c.Temperature = m.Temperature
	}
	return c
}

// gradNorm reads the gradient norm from a response's metrics: named with
// its reduction ("grad_norm:mean", as the Tinker API names metrics) or, from
// servers before that, bare.
func gradNorm(m map[string]float64) (float64, bool) {
	if g, ok := m["grad_norm:mean"]; ok {
		return g, true
	}
	g, ok := m["grad_norm"]
	return g, ok
}
