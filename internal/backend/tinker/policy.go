package tinker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

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

// The request sequence of a model. Tinker processes a model's requests in
// seq_id order, and the SDK numbers them 1, 2, 3, ... per model (its
// training client's counter, from 1 for every new model, a restored one
// included); a server may wait for a missing number. wmrl numbers them the
// same way, with no gaps, as a pure function of the checkpoint version and
// the call, so that a retried activity or a resumed run sends the same
// numbers again. A model made by Init (origin -1):
//
//	4v+1  save_weights_for_sampler: checkpoint v (sampler weights)
//	4v+2  forward_backward of the update from v
//	4v+3  optim_step of the update from v
//	4v+4  save_weights: the training state of v+1 (weights and Adam
//	      state), which wmrl continue loads
//
// A continued run's model (wmrl continue from checkpoint o >= 1 of another
// run; origin o) loads that state with load_weights at seq_id 1, the
// SDK's first request of a training client restored from saved state, and
// then goes on as above shifted: 4(v-o)+2 saves checkpoint v for sampling,
// 4(v-o)+3 ... 4(v-o)+5 are the update from v. Every step sends all four
// (a batch with no weight still sends a forward_backward, of a datum with
// zero advantages), so the sequence has no gap. The origin is part of the
// checkpoint's name (checkpointName), so an Update reads it from its base
// checkpoint's location. create_model carries no seq_id (its model_seq_id
// counts the session's models, as the SDK's does).
//
// Runs recorded before this numbering (4v ... 4v+3 from 0, or three per
// version) have journal entries with those seq_ids: a step interrupted
// across the upgrade is refused by the journal check, naming both.
func seqBase(v, origin int) int64 {
	if origin < 0 {
		return 4 * int64(v)
	}
	return 4*int64(v-origin) + seqLoad
}

// seqLoad is the seq_id of a continued model's load_weights: its first
// request.
const seqLoad = 1

func seqSave(v, origin int) int64     { return seqBase(v, origin) + 1 }
func seqForward(v, origin int) int64  { return seqBase(v, origin) + 2 }
func seqOptimise(v, origin int) int64 { return seqBase(v, origin) + 3 }

// seqState is the seq_id of the save_weights after the update from v: the
// training state of v+1.
func seqState(v, origin int) int64 { return seqBase(v, origin) + 4 }

// checkpointName is the sampler weights' (and training state's) name of
// version v of a model of origin origin: "wmrl-v<v>" for a model made by
// Init (origin < 0), "wmrl-v<v>-from<origin>" for a continued one.
func checkpointName(v, origin int) string {
	if origin < 0 {
		return fmt.Sprintf("wmrl-v%06d", v)
	}
	return fmt.Sprintf("wmrl-v%06d-from%06d", v, origin)
}

// checkpointNameRE matches checkpointName's names.
var checkpointNameRE = regexp.MustCompile(`^wmrl-v([0-9]{6,})(?:-from([0-9]{6,}))?$`)

// checkpointOf reads the version and origin back from a checkpoint's
// tinker:// path (its last element, as checkpointName made it).
func checkpointOf(path string) (v, origin int, err error) {
	name := path[strings.LastIndex(path, "/")+1:]
	m := checkpointNameRE.FindStringSubmatch(name)
	origin = -1
	if m != nil {
		v, err = strconv.Atoi(m[1])
		if err == nil && m[2] != "" {
			origin, err = strconv.Atoi(m[2])
		}
	}
	if m == nil || err != nil || name != checkpointName(v, origin) || origin == 0 || origin > v {
		return 0, 0, fmt.Errorf("checkpoint location %q: want a name wmrl-v<version>[-from<version>]", path)
	}
	return v, origin, nil
}

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
	return p.save(ctx, key, model, 0, -1)
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
	if set.Turns > 1 {
		// A multi-turn run's model: the built-in server sizes its
		// policy's input for the previous attempt. Single-shot runs send
		// the metadata they always sent.
		meta["wmrl_turns"] = strconv.Itoa(set.Turns)
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
			UserMetadata: meta, LoraConfig: &LoraConfig{Rank: cfg.LoRARank}, Type: TypeCreateModel}, key+"/create_model", &fr)
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

// save saves the model's weights for sampling as checkpoint v of a model
// of origin origin (seqBase).
func (p *Policy) save(ctx context.Context, key, model string, v, origin int) (backend.Checkpoint, error) {
	seq := seqSave(v, origin)
	name := checkpointName(v, origin)
	var out SaveWeightsForSamplerResponse
	err := p.submitPhase(ctx, key+"/save_weights_for_sampler", model, seq, PathSaveWeightsForSampler,
		SaveWeightsForSamplerRequest{ModelID: model, Path: name, SeqID: &seq, Type: TypeSaveWeightsForSampler}, &out)
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
		SaveWeightsRequest{ModelID: model, Path: name, SeqID: &seq, Type: TypeSaveWeights}, &out)
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
		LoadWeightsRequest{ModelID: model, Path: path, Optimizer: optimizer, SeqID: &seq, Type: TypeLoadWeights}, &out)
	if err != nil {
		return out, fmt.Errorf("load_weights %s: %w", path, err)
	}
	return out, nil
}

// Continue implements backend.Continuer: it creates the new run's own model
// (journal key "<run>/continue"), loads into it the training weights and
// Adam state that the old run saved with checkpoint v = req.Checkpoint.Version
// (its State; load_weights at seq_id 1, the new model's first request) and
// saves them for sampling as the new run's checkpoint v (seq_id 2, named
// wmrl-v<v>-from<v>: see seqBase). The new run's updates then train the new
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
	if _, err := p.LoadWeights(ctx, key+"/load_weights", model, seqLoad, from.State, true); err != nil {
		return fail(err)
	}
	ck, err := p.save(ctx, key, model, v, v)
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
//
// At turn t > 1 of a multi-turn trajectory (req.History) every trajectory
// has a sequence of its own, so each is sampled by its own request: the
// token sequence so far (Sequence: the prompt, then each earlier turn's
// action tokens and observation) as the prompt, num_samples 1 and seed
// Seeds[i]>>33; completion i is then a function of Seeds[i]. The requests
// of a group run concurrently (at most maxTurnSamples at a time).
func (p *Policy) Sample(ctx context.Context, req backend.SampleRequest) ([]backend.Completion, error) {
	if len(req.Seeds) == 0 {
		return nil, nil
	}
	if _, err := ModelOf(req.Checkpoint.Location); err != nil {
		return nil, backend.Permanent(err)
	}
	if len(req.History) == 0 {
		prompt, err := p.tok.Prompt(req.Task)
		if err != nil {
			return nil, backend.Permanent(fmt.Errorf("prompt of task %s: %w", req.Task.ID, err))
		}
		return p.sampleFrom(ctx, req, prompt, req.Seeds[0], len(req.Seeds), req.Key)
	}
	if len(req.History) != len(req.Seeds) {
		return nil, backend.Permanent(fmt.Errorf("sample task %s: %d histories for %d seeds", req.Task.ID, len(req.History), len(req.Seeds)))
	}
	// Every sequence first: a bad one sends nothing.
	seqs := make([][]int, len(req.Seeds))
	for i := range req.Seeds {
		var err error
		if seqs[i], err = Sequence(p.tok, req.Task, req.History[i]); err != nil {
			return nil, backend.Permanent(fmt.Errorf("sample task %s: trajectory %d: %w", req.Task.ID, i, err))
		}
	}
	comps := make([]backend.Completion, len(req.Seeds))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxTurnSamples)
	for i, sd := range req.Seeds {
		g.Go(func() error {
			c, err := p.sampleFrom(gctx, req, seqs[i], sd, 1, fmt.Sprintf("%s/s%d", req.Key, i))
			if err != nil {
				return fmt.Errorf("trajectory %d: %w", i, err)
			}
			comps[i] = c[0]
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return comps, nil
}

// maxTurnSamples bounds the concurrent sampling requests of one group's
// turn.
const maxTurnSamples = 8

// sampleFrom sends one asample request: n completions of prompt from the
// seed sd>>33 (a non-negative 31-bit integer, which every server accepts);
// key prefixes the idempotency key.
func (p *Policy) sampleFrom(ctx context.Context, req backend.SampleRequest, prompt []int, sd uint64, n int, key string) ([]backend.Completion, error) {
	seed := int64(sd >> 33)
	cfg := p.with(req.Settings)
	maxTokens := cfg.MaxTokens
	body := SampleRequest{
		NumSamples:     n,
		Prompt:         ModelInput{Chunks: []ModelInputChunk{{Type: ChunkEncodedText, Tokens: prompt}}},
		SamplingParams: SamplingParams{MaxTokens: &maxTokens, Seed: &seed, Temperature: cfg.Temperature},
		ModelPath:      req.Checkpoint.Location,
		Type:           TypeSample,
	}
	// The idempotency key names the request's content, so that the same
	// group asked again (a retried activity) gets the first future.
	data, _ := json.Marshal(body)
	sum := sha256.Sum256(data)
	idem := key + "/sample/" + hex.EncodeToString(sum[:8])
	var fr FutureResponse
	if err := p.post(ctx, PathAsample, body, idem, &fr); err != nil {
		return nil, fmt.Errorf("sample task %s: %w", req.Task.ID, err)
	}
	var out SampleResponse
	if err := p.wait(ctx, fr.RequestID, &out); err != nil {
		return nil, fmt.Errorf("sample task %s: %w", req.Task.ID, err)
	}
	if len(out.Sequences) != n {
		return nil, backend.Permanent(fmt.Errorf("sample task %s: %d sequences for num_samples %d", req.Task.ID, len(out.Sequences), n))
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
// batch's datums (BuildDatums; when every weight is 0, one datum with zero
// advantages, so the step keeps its seq_id and the optimiser step has a
// zero gradient), optim_step with the run's learning rate and the
// configured Adam betas and eps, save_weights (the training state,
// Checkpoint.State, that wmrl continue loads) and save_weights_for_sampler
// as checkpoint Base.Version+1. Each request is journalled under req.Key
// and its phase, and carries the seq_id of its place in the model's
// sequence (seqBase), so one optimiser step is applied per key however
// often the activity is retried.
//
// forward_backward's loss_fn_outputs (one per datum, its "logprobs": the
// policy's logprob of every target token at the update's weights) give the
// step's importance ratio exp(logp_update − logp_sample) over the action
// tokens of the datums with weight: its mean and max are
// UpdateStats.RatioMean and RatioMax (0 when the service returns none).
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
	if err != nil {
		return fail(backend.Permanent(err))
	}
	v, origin, err := checkpointOf(req.Base.Location)
	switch {
	case err != nil:
		return fail(backend.Permanent(err))
	case v != req.Base.Version:
		return fail(backend.Permanent(fmt.Errorf("checkpoint %d is at %s, the name of version %d", req.Base.Version, req.Base.Location, v)))
	case req.Key == "":
		return fail(backend.Permanent(errors.New("no idempotency key")))
	case !(req.Settings.LearningRate > 0):
		return fail(backend.Permanent(fmt.Errorf("policy.learning_rate %v: want > 0", req.Settings.LearningRate)))
	}
	datums, acts, err := buildDatums(p.tok, req.Batch)
	if err != nil {
		return fail(backend.Permanent(err))
	}
	if len(datums) == 0 {
		d, err := zeroDatum(p.tok, req.Batch)
		if err != nil {
			return fail(backend.Permanent(err))
		}
		datums = []Datum{d}
	}
	stats := backend.UpdateStats{Step: uint64(v + 1)}
	for _, d := range req.Batch {
		if d.Weight > 0 {
			lp := 0.0
			for _, x := range d.LogProbs {
				lp += x
			}
			if len(d.Turns) > 0 {
				// log π of a multi-turn trajectory: all its actions'.
				lp = 0
				for _, t := range d.Turns {
					for _, x := range t.LogProbs {
						lp += x
					}
				}
			}
			stats.WeightSum += d.Weight
			stats.Trajectories++
			stats.Objective += d.Weight * d.Advantage * lp
		}
	}
	if stats.WeightSum > 0 {
		stats.Objective /= stats.WeightSum
	}
	seq := seqForward(v, origin)
	var fb ForwardBackwardOutput
	err = p.submitPhase(ctx, req.Key+"/forward_backward", model, seq, PathForwardBackward, ForwardBackwardRequest{
		ForwardBackwardInput: ForwardBackwardInput{Data: datums, LossFn: cfg.Loss}, ModelID: model, SeqID: &seq}, &fb)
	if err != nil {
		return fail(fmt.Errorf("forward_backward: %w", err))
	}
	if g, ok := gradNorm(fb.Metrics); ok {
		stats.GradNorm = g
	}
	if stats.RatioMean, stats.RatioMax, err = importanceRatio(acts, fb.LossFnOutputs); err != nil {
		return fail(backend.Permanent(fmt.Errorf("forward_backward: %w", err)))
	}
	seq = seqOptimise(v, origin)
	var out OptimStepResponse
	err = p.submitPhase(ctx, req.Key+"/optim_step", model, seq, PathOptimStep, OptimStepRequest{
		AdamParams: AdamParams{LearningRate: req.Settings.LearningRate, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps},
		ModelID:    model, SeqID: &seq, Type: TypeOptimStep}, &out)
	if err != nil {
		return fail(fmt.Errorf("optim_step: %w", err))
	}
	if g, ok := gradNorm(out.Metrics); ok {
		stats.GradNorm = g
	}
	state, err := p.SaveWeights(ctx, req.Key+"/save_weights", model, seqState(v, origin), checkpointName(v+1, origin))
	if err != nil {
		return fail(err)
	}
	ck, err := p.save(ctx, req.Key, model, v+1, origin)
	if err != nil {
		return fail(err)
	}
	ck.State = state.Path
	return ck, stats, nil
}

// importanceRatio is the mean and max of exp(logp_update − logp_sample)
// over the action tokens of the datums sent (acts, in the order
// buildDatums built them: a single-shot datum's completion tokens, every
// action token of a multi-turn one), logp_update being outputs[i]["logprobs"]
// at the action's positions. No outputs (a service that returns none) give
// 0, 0.
func importanceRatio(acts []actionTokens, outputs []map[string]TensorData) (mean, maxRatio float64, err error) {
	if len(outputs) == 0 || len(acts) == 0 {
		return 0, 0, nil
	}
	if len(outputs) != len(acts) {
		return 0, 0, fmt.Errorf("loss_fn_outputs: %d entries for %d datums", len(outputs), len(acts))
	}
	sum, n := 0.0, 0
	for i, a := range acts {
		got, ok := outputs[i]["logprobs"]
		if !ok || len(a.at) == 0 || len(got.Data) <= a.at[len(a.at)-1] {
			return 0, 0, fmt.Errorf("loss_fn_outputs[%d].logprobs: %d values for a datum whose last action token is at %v", i, len(got.Data), a.at)
		}
		for j, t := range a.at {
			lp := got.Data[t]
			r := math.Exp(lp - a.logprobs[j])
			if math.IsNaN(r) || math.IsInf(r, 0) {
				return 0, 0, fmt.Errorf("loss_fn_outputs[%d].logprobs[%d] %v: its ratio to the sampling logprob %v is not finite", i, t, lp, a.logprobs[j])
			}
			sum += r
			n++
			maxRatio = max(maxRatio, r)
		}
	}
	return sum / float64(n), maxRatio, nil
}

// zeroDatum is the datum a step whose batch has no weight sends, so that its
// forward_backward keeps the model's seq_id sequence gapless: the first
// sampled completion of the batch with advantage 0, which adds a zero
// gradient under either loss.
func zeroDatum(tok Tokenizer, batch []backend.Datum) (Datum, error) {
	for _, d := range batch {
		if len(d.Tokens) > 0 && len(d.LogProbs) == len(d.Tokens) {
			d.Weight, d.Advantage = 1, 0
			out, err := BuildDatums(tok, []backend.Datum{d})
			if err != nil {
				return Datum{}, err
			}
			return out[0], nil
		}
	}
	return Datum{}, errors.New("the batch holds no sampled completion: a step's forward_backward needs one datum to keep the model's seq_id sequence gapless")
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
