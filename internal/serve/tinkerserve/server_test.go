package tinkerserve_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

var tasks = &builtin.Tasks{Suites: testenv.Suites{}}

var settings = backend.PolicySettings{LearningRate: 0.05, Hidden: 16}

const initSeed = 11

// env is one database with a server on it.
type env struct {
	store *store.Store
	pool  *pgxpool.Pool
	srv   *httptest.Server
}

func newEnv(t *testing.T, wrap func(http.Handler) http.Handler, opts tinkerserve.Options) *env {
	t.Helper()
	s, dsn := testenv.FreshDB(t)
	e := &env{store: s}
	e.restart(t, dsn, wrap, opts)
	return e
}

// restart starts a new server (new pool, new handler, new URL) on the
// same database.
func (e *env) restart(t *testing.T, dsn string, wrap func(http.Handler) http.Handler, opts tinkerserve.Options) {
	t.Helper()
	if e.srv != nil {
		e.srv.Close()
		e.pool.Close()
	}
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = tinkerserve.New(pool, tasks, opts)
	if wrap != nil {
		h = wrap(h)
	}
	e.pool, e.srv = pool, httptest.NewServer(h)
	t.Cleanup(func() { e.srv.Close(); pool.Close() })
}

func (e *env) client(t *testing.T, j tinker.Journal, key string) *tinker.Policy {
	t.Helper()
	return e.clientWith(t, j, tinker.Config{APIKey: tinker.NewSecret(key)})
}

func (e *env) clientWith(t *testing.T, j tinker.Journal, c tinker.Config) *tinker.Policy {
	t.Helper()
	c.BaseURL, c.BaseModel, c.LoRARank, c.PollMax, c.Retries = e.srv.URL, tinker.BuiltinBaseModel, 8, 10*time.Millisecond, 1
	p, err := tinker.New(c, tinker.BuiltinTokenizer{}, j, e.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) counts(t *testing.T) (fb, optim int64) {
	t.Helper()
	if err := e.pool.QueryRow(t.Context(), `SELECT sum(fb_batches), sum(optim_steps) FROM tinker_models`).Scan(&fb, &optim); err != nil {
		t.Fatal(err)
	}
	return fb, optim
}

// outcome is what a scenario observed.
type outcome struct {
	Hashes []string
	Before []backend.Completion
	After  []backend.Completion
	Stats  backend.UpdateStats
}

func trainTask(t *testing.T) backend.Task {
	t.Helper()
	train, err := tasks.Tasks(t.Context(), testenv.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	return train[0]
}

var seeds = []uint64{0x9e3779b97f4a7c15, 2, 3, 4}

// batchOf weighs a group: normalised weights, one of them 0.
func batchOf(task backend.Task, comps []backend.Completion) []backend.Datum {
	adv := []float64{1, -1, 0.5, 2}
	w := []float64{0.5, 0.25, 0.25, 0}
	out := make([]backend.Datum, len(comps))
	for i, c := range comps {
		out[i] = backend.Datum{Task: task, Sample: i, Text: c.Text, Tokens: c.Tokens, LogProbs: c.LogProbs, Advantage: adv[i], Weight: w[i]}
	}
	return out
}

func updateRequest(base backend.Checkpoint, batch []backend.Datum) backend.UpdateRequest {
	return updateRequestOf("run-a", base, batch)
}

func updateRequestOf(run string, base backend.Checkpoint, batch []backend.Datum) backend.UpdateRequest {
	return backend.UpdateRequest{Run: run, Step: base.Version, Base: base, Batch: batch, Settings: settings, Key: backend.StepKey(run, base.Version)}
}

// scenario runs Init, Sample, Update, Sample, Update, Sample.
func scenario(t *testing.T, p *tinker.Policy) outcome {
	t.Helper()
	ctx := t.Context()
	task := trainTask(t)
	ck := initRun(t, p)
	var o outcome
	o.Hashes = append(o.Hashes, ck.Hash)
	for step := range 2 {
		comps, err := p.Sample(ctx, backend.SampleRequest{Run: "run-a", Checkpoint: ck, Task: task, Seeds: seeds, Key: backend.SampleKey("run-a", step, 0, -1)})
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			o.Before = comps
		}
		ck, o.Stats, err = p.Update(ctx, updateRequest(ck, batchOf(task, comps)))
		if err != nil {
			t.Fatal(err)
		}
		if ck.Version != step+1 {
			t.Fatalf("update %d gave version %d", step, ck.Version)
		}
		o.Hashes = append(o.Hashes, ck.Hash)
	}
	after, err := p.Sample(ctx, backend.SampleRequest{Run: "run-a", Checkpoint: ck, Task: task, Seeds: seeds, Key: "after"})
	if err != nil {
		t.Fatal(err)
	}
	o.After = after
	return o
}

// flaky answers the first two polls of every future with try_again and the
// third with a 408, as a busy Tinker service does.
type flaky struct {
	next   http.Handler
	polls  map[string]int
	faults atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != tinker.PathRetrieveFuture {
		f.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req tinker.RetrieveFutureRequest
	_ = json.Unmarshal(body, &req)
	f.polls[req.RequestID]++ // the client polls one future at a time
	switch f.polls[req.RequestID] {
	case 1, 2:
		f.faults.Add(1)
		_ = json.NewEncoder(w).Encode(tinker.TryAgainResponse{Type: tinker.TypeTryAgain, RequestID: req.RequestID, QueueState: "paused_capacity"})
	case 3:
		f.faults.Add(1)
		w.WriteHeader(http.StatusRequestTimeout)
		_, _ = w.Write([]byte(`{"detail":"Timeout waiting for result"}`))
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.next.ServeHTTP(w, r)
	}
}

func TestDeterministicOverHTTP(t *testing.T) {
	a := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	first := scenario(t, a.client(t, &tinker.MemJournal{}, ""))

	var fl *flaky
	b := newEnv(t, func(h http.Handler) http.Handler { fl = &flaky{next: h, polls: map[string]int{}}; return fl }, tinkerserve.Options{StrictSeq: true})
	second := scenario(t, b.client(t, tinker.PostgresJournal{Store: b.store}, ""))

	if !reflect.DeepEqual(first, second) {
		t.Fatalf("two runs from scratch differ:\n%+v\n%+v", first, second)
	}
	if fl.faults.Load() == 0 {
		t.Fatal("no try_again or 408 was served")
	}
	t.Logf("hashes %v; %d try_again/408 answers handled", first.Hashes, fl.faults.Load())
	if first.Hashes[0] == first.Hashes[1] || first.Hashes[1] == first.Hashes[2] {
		t.Fatalf("an update left the policy unchanged: %v", first.Hashes)
	}
	if reflect.DeepEqual(first.Before, first.After) {
		t.Log("note: the completions after two updates are those before")
	}
	for _, c := range first.Before {
		if len(c.Tokens) == 0 || len(c.LogProbs) != len(c.Tokens) || c.Text == "" {
			t.Fatalf("completion %+v", c)
		}
	}
	if fb, optim := a.counts(t); fb != 2 || optim != 2 {
		t.Fatalf("server applied %d forward_backward and %d optim_step, want 2 and 2", fb, optim)
	}
	if first.Stats.Step != 2 || first.Stats.Trajectories != 3 || first.Stats.WeightSum != 1 {
		t.Fatalf("stats %+v", first.Stats)
	}
	// The server scores the update's datums at the weights they were
	// sampled from: the importance ratio is 1 on every action token.
	if math.Abs(first.Stats.RatioMean-1) > 1e-9 || math.Abs(first.Stats.RatioMax-1) > 1e-9 {
		t.Fatalf("importance ratio mean %v, max %v; want 1, 1 on-policy", first.Stats.RatioMean, first.Stats.RatioMax)
	}
}

// An update retried with the same key applies one optimiser step, with the
// journal (it polls the recorded futures) and without it (the server
// answers the repeated seq_ids with the first futures).
func TestRetriedUpdateStepsOnce(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	ctx := t.Context()
	p := e.client(t, tinker.PostgresJournal{Store: e.store}, "")
	task := trainTask(t)
	ck := initRun(t, p)
	if again, err := p.Init(ctx, backend.InitRequest{Run: "run-a", Suite: testenv.SuiteSeed, Seed: initSeed, Settings: settings}); err != nil || again != ck {
		t.Fatalf("Init again: %+v %v, first %+v", again, err, ck)
	}
	comps, err := p.Sample(ctx, backend.SampleRequest{Checkpoint: ck, Task: task, Seeds: seeds, Key: "g"})
	if err != nil {
		t.Fatal(err)
	}
	req := updateRequest(ck, batchOf(task, comps))
	want, _, err := p.Update(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []*tinker.Policy{p, e.client(t, &tinker.MemJournal{}, "")} {
		got, _, err := c.Update(ctx, req)
		if err != nil || got != want {
			t.Fatalf("retry %d: %+v %v, want %+v", i, got, err, want)
		}
	}
	if fb, optim := e.counts(t); fb != 1 || optim != 1 {
		t.Fatalf("server applied %d forward_backward and %d optim_step, want 1 and 1", fb, optim)
	}
	var models int
	_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM tinker_models`).Scan(&models)
	if models != 1 {
		t.Fatalf("%d models, want 1 (Init retried created another)", models)
	}
}

// The server restarts while the client waits for optim_step: the activity
// fails, and its retry, on a new server over the same database, polls the
// journalled futures and finishes the same update, applying one step.
func TestServerRestartMidUpdate(t *testing.T) {
	ref := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	want := scenarioOneUpdate(t, ref.client(t, &tinker.MemJournal{}, ""), nil)

	s, dsn := testenv.FreshDB(t)
	e := &env{store: s}
	var down, crashed atomic.Bool
	var optimSubmits atomic.Int32
	crash := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			h.ServeHTTP(w, r)
			if r.URL.Path == tinker.PathOptimStep {
				optimSubmits.Add(1)
				if !crashed.Swap(true) {
					down.Store(true) // the server goes away after accepting optim_step
				}
			}
		})
	}
	e.restart(t, dsn, crash, tinkerserve.Options{StrictSeq: true})
	j := tinker.PostgresJournal{Store: s}
	got := scenarioOneUpdate(t, e.client(t, j, ""), func(p *tinker.Policy, req backend.UpdateRequest) (backend.Checkpoint, error) {
		_, _, err := p.Update(t.Context(), req)
		if err == nil || backend.IsPermanent(err) {
			t.Fatalf("update while the server is down: %v (want a retryable error)", err)
		}
		t.Logf("first attempt: %v", err)
		down.Store(false)
		e.restart(t, dsn, crash, tinkerserve.Options{StrictSeq: true})
		ck, _, err := e.client(t, j, "").Update(t.Context(), req)
		return ck, err
	})
	if got != want {
		t.Fatalf("after the restart: %s, uninterrupted: %s", got, want)
	}
	if fb, optim := e.counts(t); fb != 1 || optim != 1 || optimSubmits.Load() != 1 {
		t.Fatalf("server applied %d forward_backward and %d optim_step (%d optim submits), want 1, 1, 1", fb, optim, optimSubmits.Load())
	}
}

// initRun inits run-a on p with the tests' seed and settings.
func initRun(t *testing.T, p *tinker.Policy) backend.Checkpoint {
	t.Helper()
	ck, err := p.Init(t.Context(), backend.InitRequest{Run: "run-a", Suite: testenv.SuiteSeed, Seed: initSeed, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// initAndSample inits run-a on p and samples a group (key "g") of the
// first training task from the initial checkpoint; it returns the
// checkpoint, the task and the group.
func initAndSample(t *testing.T, p *tinker.Policy) (backend.Checkpoint, backend.Task, []backend.Completion) {
	t.Helper()
	ctx := t.Context()
	task := trainTask(t)
	ck := initRun(t, p)
	comps, err := p.Sample(ctx, backend.SampleRequest{Checkpoint: ck, Task: task, Seeds: seeds, Key: "g"})
	if err != nil {
		t.Fatal(err)
	}
	return ck, task, comps
}

// scenarioOneUpdate runs Init, Sample, Update (through update when given)
// and returns the new checkpoint's hash.
func scenarioOneUpdate(t *testing.T, p *tinker.Policy, update func(*tinker.Policy, backend.UpdateRequest) (backend.Checkpoint, error)) string {
	t.Helper()
	ctx := t.Context()
	ck, task, comps := initAndSample(t, p)
	req := updateRequest(ck, batchOf(task, comps))
	if update == nil {
		next, _, err := p.Update(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return next.Hash
	}
	next, err := update(p, req)
	if err != nil {
		t.Fatal(err)
	}
	return next.Hash
}

const key = "tml-SERVER-KEY-abcdef0123456789"

func TestAPIKey(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{APIKey: key})
	_, err := e.client(t, &tinker.MemJournal{}, "tml-wrong-key-00000000").Init(t.Context(),
		backend.InitRequest{Run: "r", Suite: testenv.SuiteSeed, Seed: 1, Settings: settings})
	if err == nil || !backend.IsPermanent(err) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key: %v", err)
	}
	if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "tml-wrong-key") {
		t.Fatalf("error shows a key: %v", err)
	}
	if _, err := e.client(t, &tinker.MemJournal{}, key).Init(t.Context(),
		backend.InitRequest{Run: "r", Suite: testenv.SuiteSeed, Seed: 1, Settings: settings}); err != nil {
		t.Fatalf("right key: %v", err)
	}
	var dump string
	_ = e.pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(s::text, ' '), '') FROM (
		SELECT row_to_json(f)::text AS s FROM tinker_futures f UNION ALL SELECT row_to_json(m)::text FROM (SELECT model_id, session_id, user_metadata FROM tinker_models) m
		UNION ALL SELECT row_to_json(x)::text FROM tinker_sessions x) q`).Scan(&dump)
	if strings.Contains(dump, key) || dump == "" {
		t.Fatalf("server tables: %q", dump)
	}
}

// Bad requests get a 400 naming the field.
func TestBadRequests(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	ctx := t.Context()
	p := e.client(t, &tinker.MemJournal{}, "")
	ck, err := p.Init(ctx, backend.InitRequest{Run: "r", Suite: testenv.SuiteSeed, Seed: 1, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	model, _ := tinker.ModelOf(ck.Location)
	task := trainTask(t)
	comps, err := p.Sample(ctx, backend.SampleRequest{Checkpoint: ck, Task: task, Seeds: seeds, Key: "g"})
	if err != nil {
		t.Fatal(err)
	}
	datums, err := tinker.BuildDatums(tinker.BuiltinTokenizer{}, batchOf(task, comps))
	if err != nil {
		t.Fatal(err)
	}
	shifted := datums[0]
	shifted.LossFnInputs = map[string]tinker.TensorData{}
	for k, v := range datums[0].LossFnInputs {
		shifted.LossFnInputs[k] = v
	}
	tt := shifted.LossFnInputs["target_tokens"]
	tt.Data = append([]float64{999}, tt.Data[1:]...)
	shifted.LossFnInputs["target_tokens"] = tt
	prompt, _ := tinker.BuiltinTokenizer{}.Prompt(task)
	seed := int64(1)
	for _, c := range []struct {
		path, body, field string
	}{
		{tinker.PathCreateModel, `{"session_id":"s","model_seq_id":0,"base_model":"Qwen/Qwen3-8B","type":"create_model"}`, "base_model"},
		{tinker.PathCreateModel, `{"session_id":"s","model_seq_id":0,"base_model":"` + tinker.BuiltinBaseModel + `","user_metadata":{"wmrl_seed":"x"}}`, "user_metadata.wmrl_seed"},
		{tinker.PathCreateModel, `{"session_id":"s","base_model":"` + tinker.BuiltinBaseModel + `","lora_config":{"rank":0}}`, "lora_config.rank"},
		{tinker.PathForwardBackward, must(tinker.ForwardBackwardRequest{ModelID: model, ForwardBackwardInput: tinker.ForwardBackwardInput{Data: datums, LossFn: "cross_entropy"}}), "forward_backward_input.loss_fn"},
		{tinker.PathForwardBackward, must(tinker.ForwardBackwardRequest{ModelID: model, ForwardBackwardInput: tinker.ForwardBackwardInput{Data: []tinker.Datum{datums[0], shifted}, LossFn: "ppo"}}), "forward_backward_input.data[1].loss_fn_inputs.target_tokens"},
		{tinker.PathForwardBackward, `{"model_id":"` + model + `","forward_backward_input":{"data":"x","loss_fn":"ppo"}}`, "forward_backward_input.data"},
		{tinker.PathOptimStep, must(tinker.OptimStepRequest{ModelID: model, AdamParams: tinker.AdamParams{LearningRate: -1, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}), "adam_params.learning_rate"},
		{tinker.PathAsample, must(tinker.SampleRequest{NumSamples: 1, ModelPath: ck.Location, Prompt: tinker.ModelInput{Chunks: []tinker.ModelInputChunk{{Type: "encoded_text", Tokens: prompt}}}, SamplingParams: tinker.SamplingParams{Temperature: 0.7}}), "sampling_params.temperature"},
		{tinker.PathAsample, `{"prompt":{"chunks":[]},"sampling_params":{},"base_model":"Qwen/Qwen3-8B"}`, "base_model"},
		{tinker.PathAsample, must(tinker.SampleRequest{NumSamples: 1, ModelPath: ck.Location, Prompt: tinker.ModelInput{Chunks: []tinker.ModelInputChunk{{Type: "encoded_text", Tokens: prompt}}}}) + "", "sampling_params.temperature"},
		{tinker.PathOptimStep, `{"model_id":"` + model + `","adam_params":{"weight_decay":0.1}}`, "adam_params.weight_decay"},
		{tinker.PathLoadWeights, `{"model_id":"` + model + `","path":"tinker://m/weights/x","optimizer":false}`, "optimizer"},
		{tinker.PathAsample, must(tinker.SampleRequest{NumSamples: 1, ModelPath: ck.Location, Prompt: tinker.ModelInput{Chunks: []tinker.ModelInputChunk{{Type: "encoded_text", Tokens: []int{55, 47, 110, 111}}}}, SamplingParams: tinker.SamplingParams{Seed: &seed, Temperature: 1}}), "prompt"},
		{tinker.PathSaveWeightsForSampler, must(tinker.SaveWeightsForSamplerRequest{ModelID: model, Path: "../x"}), "path"},
	} {
		resp, err := http.Post(e.srv.URL+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var er tinker.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&er)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || er.Field != c.field {
			t.Errorf("%s %s: HTTP %d %+v, want 400 naming %s", c.path, c.body[:min(len(c.body), 60)], resp.StatusCode, er, c.field)
		}
	}
	if fb, optim := e.counts(t); fb != 0 || optim != 0 {
		t.Fatalf("a bad request changed the model: %d %d", fb, optim)
	}
	// seq_id out of order: 409.
	seq := int64(-5)
	resp, err := http.Post(e.srv.URL+tinker.PathOptimStep, "application/json",
		strings.NewReader(must(tinker.OptimStepRequest{ModelID: model, SeqID: &seq, AdamParams: tinker.AdamParams{LearningRate: 1, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}})))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("old seq_id: HTTP %d, want 409", resp.StatusCode)
	}
}

func must(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// The HTTP path against the in-process built-in policy with the same seeds
// and settings. The initial checkpoints are the same policy. Completions
// differ (the HTTP path derives all of a group's completions from Seeds[0]),
// so both update on the same batch (the HTTP completions): with the weights
// summing to 1, no KL term and the built-in policy's Adam parameters, the
// summed Tinker loss gives the built-in update bit for bit; with Tinker's
// default Adam parameters it does not.
func TestCompareWithInProcessBuiltin(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	ctx := t.Context()
	bp := &builtin.Policy{Tasks: tasks}
	init := backend.InitRequest{Run: "run-a", Suite: testenv.SuiteSeed, Seed: initSeed, Settings: settings, Dir: t.TempDir()}
	bck, err := bp.Init(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	task := trainTask(t)
	def := policy.DefaultConfig(policy.ProgramGrammar{}, len(task.Features))
	for _, c := range []struct {
		name string
		cfg  tinker.Config
		want bool // equal hashes after the update
	}{
		{"built-in Adam parameters", tinker.Config{Beta1: def.Beta1, Beta2: def.Beta2, Eps: def.AdamEps}, true},
		{"Tinker's default Adam parameters", tinker.Config{}, false},
	} {
		p := e.clientWith(t, &tinker.MemJournal{}, c.cfg)
		init.Run = "run-" + strings.ReplaceAll(c.name, " ", "-")
		hck, err := p.Init(ctx, init)
		if err != nil {
			t.Fatal(err)
		}
		if hck.Hash != bck.Hash {
			t.Fatalf("%s: initial checkpoints differ: HTTP %s, in-process %s", c.name, hck.Hash, bck.Hash)
		}
		hc, err := p.Sample(ctx, backend.SampleRequest{Checkpoint: hck, Task: task, Seeds: seeds, Key: "g"})
		if err != nil {
			t.Fatal(err)
		}
		bc, err := bp.Sample(ctx, backend.SampleRequest{Checkpoint: bck, Task: task, Seeds: seeds})
		if err != nil {
			t.Fatal(err)
		}
		same := 0
		for i := range hc {
			if hc[i].Text == bc[i].Text {
				same++
			}
		}
		batch := batchOf(task, hc)
		hnext, hstats, err := p.Update(ctx, updateRequestOf(init.Run, hck, batch))
		if err != nil {
			t.Fatal(err)
		}
		req := updateRequest(bck, batch)
		req.Dir = t.TempDir()
		bnext, bstats, err := bp.Update(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: initial hash HTTP = in-process = %.12s; completions from the same seeds: %d of %d equal", c.name, hck.Hash, same, len(hc))
		t.Logf("%s: after one update on the same batch: HTTP %.12s, in-process %.12s (equal: %v); objective %.6g vs %.6g, grad norm %.6g vs %.6g",
			c.name, hnext.Hash, bnext.Hash, hnext.Hash == bnext.Hash, hstats.Objective, bstats.Objective, hstats.GradNorm, bstats.GradNorm)
		if (hnext.Hash == bnext.Hash) != c.want {
			t.Errorf("%s: equal hashes %v, want %v", c.name, hnext.Hash == bnext.Hash, c.want)
		}
	}
}

// An update whose weights are all 0 still sends a forward_backward, of one
// datum with zero advantages (so the model's seq_id sequence has no gap
// under StrictSeq), which adds a zero gradient; its optimiser step is a
// zero-gradient one: the version advances, the policy moves only by its
// Adam moments (none at step 1: it stays put but for the step count).
func TestZeroWeightUpdate(t *testing.T) {
	var bodies bodyChecker
	e := newEnv(t, bodies.wrap, tinkerserve.Options{StrictSeq: true})
	ctx := t.Context()
	p := e.client(t, &tinker.MemJournal{}, "")
	ck, task, comps := initAndSample(t, p)
	batch := batchOf(task, comps)
	for i := range batch {
		batch[i].Weight = 0
	}
	next, stats, err := p.Update(ctx, updateRequest(ck, batch))
	if err != nil {
		t.Fatal(err)
	}
	if next.Version != 1 || next.Hash == ck.Hash || stats.Trajectories != 0 || stats.WeightSum != 0 {
		t.Fatalf("zero update: %+v %+v (base %+v)", next, stats, ck)
	}
	if fb, optim := e.counts(t); fb != 1 || optim != 1 {
		t.Fatalf("server applied %d forward_backward and %d optim_step, want 1 and 1", fb, optim)
	}
	if stats.GradNorm != 0 || stats.RatioMean != 0 || stats.RatioMax != 0 {
		t.Fatalf("zero update: gradient norm %v (want 0), ratio %v/%v (want none: no datum has weight)", stats.GradNorm, stats.RatioMean, stats.RatioMax)
	}
	bodies.verify(t, tinker.PathForwardBackward) // the zero-advantage datum too
}

// Session heartbeats, and an idempotency key reused for another request.
func TestSessionsAndKeys(t *testing.T) {
	e := newEnv(t, nil, tinkerserve.Options{StrictSeq: true})
	post := func(path, body string, hdr map[string]string) (int, tinker.ErrorResponse, []byte) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var er tinker.ErrorResponse
		_ = json.Unmarshal(raw, &er)
		return resp.StatusCode, er, raw
	}
	code, _, raw := post(tinker.PathCreateSession, `{"tags":["t"],"sdk_version":"x","type":"create_session"}`, nil)
	var sess tinker.CreateSessionResponse
	if err := json.Unmarshal(raw, &sess); code != 200 || err != nil || sess.SessionID == "" {
		t.Fatalf("create_session: %d %s", code, raw)
	}
	if code, _, _ := post(tinker.PathSessionHeartbeat, `{"session_id":"`+sess.SessionID+`","type":"session_heartbeat"}`, nil); code != 200 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code, er, _ := post(tinker.PathSessionHeartbeat, `{"session_id":"nope"}`, nil); code != 404 || er.Field != "session_id" {
		t.Fatalf("heartbeat of an unknown session: %d %+v", code, er)
	}
	var beats int
	_ = e.pool.QueryRow(t.Context(), `SELECT heartbeats FROM tinker_sessions WHERE session_id = $1`, sess.SessionID).Scan(&beats)
	if beats != 1 {
		t.Fatalf("%d heartbeats recorded", beats)
	}
	create := `{"session_id":"` + sess.SessionID + `","model_seq_id":0,"base_model":"` + tinker.BuiltinBaseModel + `","user_metadata":{"wmrl_seed":3,"wmrl_suite":"7"},"lora_config":{"rank":4},"type":"create_model"}`
	hdr := map[string]string{tinker.HeaderIdempotencyKey: "k1"}
	code, _, raw = post(tinker.PathCreateModel, create, hdr)
	var fr tinker.FutureResponse
	if err := json.Unmarshal(raw, &fr); code != 200 || err != nil || fr.ModelID == "" {
		t.Fatalf("create_model: %d %s", code, raw)
	}
	// The same key again: the same future, no second model.
	if _, _, raw2 := post(tinker.PathCreateModel, create, hdr); !bytes.Equal(raw, raw2) {
		t.Fatalf("create_model again: %s, first %s", raw2, raw)
	}
	// The key of create_model on an optim_step: 409.
	code, er, _ := post(tinker.PathOptimStep, `{"model_id":"`+fr.ModelID+`","adam_params":{"learning_rate":0.1,"beta1":0.9,"beta2":0.95,"eps":1e-8}}`, hdr)
	if code != http.StatusConflict || er.Field != tinker.HeaderIdempotencyKey {
		t.Fatalf("key reused: %d %+v", code, er)
	}
	code, _, raw = post(tinker.PathGetInfo, `{"model_id":"`+fr.ModelID+`"}`, nil)
	var info tinker.GetInfoResponse
	if err := json.Unmarshal(raw, &info); code != 200 || err != nil || info.ModelData.BaseModel != tinker.BuiltinBaseModel || info.ModelData.LoraConfig.Rank != 4 {
		t.Fatalf("get_info: %d %s", code, raw)
	}
	if code, _, _ := post(tinker.PathRetrieveFuture, `{"request_id":"999999"}`, nil); code != 404 {
		t.Fatalf("unknown future: %d", code)
	}
}

// With StrictSeq a model's requests must come as 1, 2, 3, ...: a gap or a
// request without seq_id is refused, the next one and a repeat of the same
// request are taken. Without it, the gap is taken.
func TestStrictSeq(t *testing.T) {
	for _, strict := range []bool{true, false} {
		e := newEnv(t, nil, tinkerserve.Options{StrictSeq: strict})
		ck, err := e.client(t, &tinker.MemJournal{}, "").Init(t.Context(), backend.InitRequest{Run: "run-a", Suite: testenv.SuiteSeed, Seed: initSeed, Settings: settings})
		if err != nil {
			t.Fatal(err) // under StrictSeq too: Init sends seq_id 1
		}
		model, _ := tinker.ModelOf(ck.Location)
		optim := func(seq *int64) (int, string) {
			body := must(tinker.OptimStepRequest{AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8},
				ModelID: model, SeqID: seq, Type: tinker.TypeOptimStep})
			resp, err := e.srv.Client().Post(e.srv.URL+tinker.PathOptimStep, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b tinker.ErrorResponse
			_ = json.NewDecoder(resp.Body).Decode(&b)
			return resp.StatusCode, b.Field
		}
		seq := func(n int64) *int64 { return &n }
		type want struct {
			status int
			field  string
		}
		cases := []struct {
			seq         *int64
			strict, lax want
		}{
			{seq(3), want{409, "seq_id"}, want{200, ""}}, // a gap
			{nil, want{400, "seq_id"}, want{200, ""}},    // no seq_id
			{seq(2), want{200, ""}, want{409, "seq_id"}}, // the next (lax: below the gap taken)
		}
		for i, c := range cases {
			w := c.lax
			if strict {
				w = c.strict
			}
			if status, field := optim(c.seq); status != w.status || field != w.field {
				t.Errorf("strict %v, case %d: HTTP %d field %q, want %d %q", strict, i, status, field, w.status, w.field)
			}
		}
		if strict {
			// A repeat of seq_id 2 (the same request) gets its future back.
			if status, _ := optim(seq(2)); status != 200 {
				t.Errorf("repeat of seq_id 2: HTTP %d", status)
			}
		}
	}
}

// Options.UpdateTime (wmrl serve --update-time) delays each update by at
// least the service time; a retried update gets its first future and is
// not delayed again. Only lower bounds: a loaded machine is slower, never
// faster.
func TestUpdateTimeDelaysTheUpdate(t *testing.T) {
	const service = 300 * time.Millisecond
	e := newEnv(t, nil, tinkerserve.Options{UpdateTime: service})
	ctx := t.Context()
	p := e.client(t, tinker.PostgresJournal{Store: e.store}, "")
	ck, task, comps := initAndSample(t, p)
	req := updateRequest(ck, batchOf(task, comps))
	start := time.Now()
	if _, _, err := p.Update(ctx, req); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < service {
		t.Fatalf("update took %v, want at least the update time %v", took, service)
	}
	if fb, optim := e.counts(t); fb != 1 || optim != 1 {
		t.Fatalf("server applied %d forward_backward and %d optim_step, want 1 and 1", fb, optim)
	}
}
