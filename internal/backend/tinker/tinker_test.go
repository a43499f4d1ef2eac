package tinker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/store"
)

// fixedTokenizer encodes every prompt as 1, 2.
type fixedTokenizer struct{}

func (fixedTokenizer) Prompt(backend.Task) ([]int, error) { return []int{1, 2}, nil }
func (fixedTokenizer) Decode(c []int) (string, error)     { return fmt.Sprint(c), nil }

// A hand-worked datum: prompt [1 2], completion [300 301 302] with logprobs
// [-0.5 -0.25 -1], A = 2, W = 0.5: the sequence is [1 2 300 301 302].
func TestBuildDatums(t *testing.T) {
	batch := []backend.Datum{
		{Task: backend.Task{ID: "t"}, Tokens: []int{300, 301, 302}, LogProbs: []float64{-0.5, -0.25, -1}, Advantage: 2, Weight: 0.5},
		{Task: backend.Task{ID: "t"}, Sample: 1, Tokens: []int{300, 302}, LogProbs: []float64{-1, 0}, Advantage: 3, Weight: 0}, // left out
	}
	got, err := BuildDatums(fixedTokenizer{}, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []Datum{{
		ModelInput: ModelInput{Chunks: []ModelInputChunk{{Type: "encoded_text", Tokens: []int{1, 2, 300, 301}}}},
		LossFnInputs: map[string]TensorData{
			"target_tokens": {Data: []float64{2, 300, 301, 302}, Dtype: "int64", Shape: []int{4}},
			"logprobs":      {Data: []float64{0, -0.5, -0.25, -1}, Dtype: "float32", Shape: []int{4}},
			"advantages":    {Data: []float64{0, 1, 1, 1}, Dtype: "float32", Shape: []int{4}},
		},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("datums:\n got %+v\nwant %+v", got, want)
	}
	// The wire form has the SDK's shape.
	b, _ := json.Marshal(got[0])
	const wantJSON = `{"model_input":{"chunks":[{"type":"encoded_text","tokens":[1,2,300,301]}]},"loss_fn_inputs":{"advantages":{"data":[0,1,1,1],"dtype":"float32","shape":[4]},"logprobs":{"data":[0,-0.5,-0.25,-1],"dtype":"float32","shape":[4]},"target_tokens":{"data":[2,300,301,302],"dtype":"int64","shape":[4]}}}`
	if string(b) != wantJSON {
		t.Fatalf("JSON:\n got %s\nwant %s", b, wantJSON)
	}
	for _, tt := range []struct {
		name string
		give backend.Datum
		want string
	}{
		{"no tokens", backend.Datum{Weight: 1}, "no completion tokens"},
		{"logprobs", backend.Datum{Weight: 1, Tokens: []int{300}}, "0 logprobs for 1 tokens"},
		{"negative weight", backend.Datum{Weight: -1, Tokens: []int{300}, LogProbs: []float64{0}}, "weight -1 < 0"},
	} {
		if _, err := BuildDatums(fixedTokenizer{}, []backend.Datum{tt.give}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestBuiltinTokenizer(t *testing.T) {
	var tok BuiltinTokenizer
	ids, _ := tok.Prompt(backend.Task{Suite: 7, ID: "task-3"})
	text, err := DecodePrompt(ids)
	if err != nil || text != "7/task-3" {
		t.Fatalf("prompt %v decodes to %q, %v", ids, text, err)
	}
	if s, id, err := ParseTaskPrompt(text); err != nil || s != 7 || id != "task-3" {
		t.Fatalf("ParseTaskPrompt: %d %q %v", s, id, err)
	}
	ids, _ = tok.Prompt(backend.Task{Suite: 7, ID: "x", Prompt: "héllo"})
	if text, _ := DecodePrompt(ids); text != "héllo" {
		t.Fatalf("prompt text %q", text)
	}
	if _, err := tok.Decode([]int{3}); err == nil {
		t.Fatal("Decode took a token below the program offset")
	}
}

const secretKey = "tml-SECRET-0123456789abcdef"

func TestValidateNamesFields(t *testing.T) {
	ok := Config{BaseURL: "http://localhost:1", BaseModel: BuiltinBaseModel}.WithDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		give func(*Config)
		want string
	}{
		{func(c *Config) { c.BaseURL = "" }, "policy.tinker.base_url"},
		{func(c *Config) { c.BaseURL = "ftp://x" }, "policy.tinker.base_url"},
		{func(c *Config) { c.BaseURL = "http://user:" + secretKey + "@host/" }, "policy.tinker.base_url: credentials"},
		{func(c *Config) { c.LoRARank = -1 }, "policy.tinker.lora_rank"},
		{func(c *Config) { c.Loss = "cross_entropy" }, "policy.tinker.loss"},
		{func(c *Config) { c.Beta1 = 1 }, "policy.tinker.beta1"},
		{func(c *Config) { c.Beta2 = -0.1 }, "policy.tinker.beta2"},
		{func(c *Config) { c.Eps = -1 }, "policy.tinker.eps"},
		{func(c *Config) { c.Temperature = -1 }, "policy.tinker.temperature"},
		// The run config's upper bounds (backend.ModelSettings.Validate),
		// which the worker's configuration once escaped.
		{func(c *Config) { c.LoRARank = 2048 }, "policy.tinker.lora_rank"},
		{func(c *Config) { c.MaxTokens = 1<<20 + 1 }, "policy.tinker.max_tokens"},
		{func(c *Config) { c.Temperature = 11 }, "policy.tinker.temperature"},
		{func(c *Config) { c.Eps = 2 }, "policy.tinker.eps"},
	} {
		c := ok
		tt.give(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("err %v, want prefix %q", err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), secretKey) {
			t.Errorf("error shows the key: %v", err)
		}
	}
}

func TestKeyFromEnvAndFile(t *testing.T) {
	env := map[string]string{EnvBaseURL: "http://h:1", EnvAPIKey: secretKey}
	c, err := Config{}.FromEnv(func(k string) string { return env[k] })
	if err != nil || c.BaseURL != "http://h:1" || c.APIKey.v != secretKey {
		t.Fatalf("FromEnv: %+v %v", c, err)
	}
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte(secretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{EnvAPIKeyFile: f}
	c, err = Config{}.FromEnv(func(k string) string { return env[k] })
	if err != nil || c.APIKey.v != secretKey {
		t.Fatalf("FromEnv with a key file: %v", err)
	}
	env = map[string]string{EnvAPIKeyFile: f + ".missing"}
	if _, err := (Config{}).FromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), EnvAPIKeyFile) {
		t.Fatalf("missing key file: %v", err)
	}
}

// The key never shows: not in a printed or serialised Config, not in an
// error, even when the server echoes it back.
func TestKeyRedaction(t *testing.T) {
	c := Config{BaseURL: "http://h:1", APIKey: NewSecret(secretKey), BaseModel: "m"}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	printed := []string{string(b), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%s", c.APIKey), fmt.Sprint(c.APIKey)}
	for _, s := range printed {
		if strings.Contains(s, secretKey) {
			t.Fatalf("key in %s", s)
		}
	}
	if !strings.Contains(string(b), `"api_key":"[redacted]"`) {
		t.Fatalf("JSON %s", b)
	}

	var sawKey atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawKey.Store(r.Header.Get(HeaderAPIKey) == secretKey)
		// A careless server echoes the request's headers in its errors.
		code := http.StatusBadRequest
		if r.URL.Path == PathRetrieveFuture {
			code = http.StatusInternalServerError
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad key " + r.Header.Get(HeaderAPIKey)})
	}))
	defer srv.Close()
	p, err := New(Config{BaseURL: srv.URL, APIKey: NewSecret(secretKey), BaseModel: "m", Retries: 1}, fixedTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Init(t.Context(), backend.InitRequest{Run: "r"})
	if err == nil || !backend.IsPermanent(err) {
		t.Fatalf("Init against a 400: %v", err)
	}
	if !sawKey.Load() {
		t.Fatal("the key was not sent")
	}
	msgs := []string{err.Error()}
	err = p.wait(t.Context(), "1", new(json.RawMessage)) // 500s: retried, then a retryable error
	if err == nil || backend.IsPermanent(err) {
		t.Fatalf("wait against 500s: %v", err)
	}
	msgs = append(msgs, err.Error())
	for _, m := range msgs {
		if strings.Contains(m, secretKey) || !strings.Contains(m, Redacted) {
			t.Fatalf("error message %q", m)
		}
		if !strings.Contains(m, "tinker http://127.0.0.1") {
			t.Fatalf("error message %q does not name the backend and URL", m)
		}
	}
}

// wait polls again on try_again and on 408, and decodes the result.
func TestWaitPollsAgain(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req RetrieveFutureRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch n := polls.Add(1); {
		case n <= 2:
			_ = json.NewEncoder(w).Encode(TryAgainResponse{Type: TypeTryAgain, RequestID: req.RequestID, QueueState: "active"})
		case n == 3:
			w.WriteHeader(http.StatusRequestTimeout)
			_, _ = w.Write([]byte(`{"detail":"Timeout waiting for result"}`))
		default:
			_ = json.NewEncoder(w).Encode(CreateModelResponse{ModelID: "m-" + req.RequestID, Type: "create_model"})
		}
	}))
	defer srv.Close()
	p, err := New(Config{BaseURL: srv.URL, BaseModel: "m", PollMax: 5 * time.Millisecond}, fixedTokenizer{}, &MemJournal{}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var out CreateModelResponse
	if err := p.wait(t.Context(), "42", &out); err != nil {
		t.Fatal(err)
	}
	if out.ModelID != "m-42" || polls.Load() != 4 {
		t.Fatalf("got %+v after %d polls", out, polls.Load())
	}
	// A failed future in Tinker's RequestFailedResponse shape.
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"error":"datum 0 too long","category":"user"}`))
	}))
	defer fail.Close()
	p.base = fail.URL
	if err := p.wait(t.Context(), "1", &out); err == nil || !backend.IsPermanent(err) || !strings.Contains(err.Error(), "datum 0 too long") {
		t.Fatalf("failed future: %v", err)
	}
}

func TestMemJournal(t *testing.T) {
	var j MemJournal
	ctx := context.Background()
	e, err := j.Begin(ctx, store.TinkerRequest{Key: "k", ModelID: "m", SeqID: 4, RequestID: "ignored"})
	if err != nil || e.RequestID != "" {
		t.Fatalf("Begin: %+v %v", e, err)
	}
	if err := j.Sent(ctx, "k", "7"); err != nil {
		t.Fatal(err)
	}
	if err := j.Sent(ctx, "k", "8"); err == nil {
		t.Fatal("Sent with another request id succeeded")
	}
	e, _ = j.Begin(ctx, store.TinkerRequest{Key: "k", ModelID: "m", SeqID: 4})
	if e.RequestID != "7" {
		t.Fatalf("second Begin: %+v", e)
	}
}

// A model's seq_ids, in the order Init, Update, Update, ... (or Continue,
// Update, ...) sends its requests, are 1, 2, 3, ... without a gap, and a
// pure function of the checkpoint's name: a retried call computes the same.
func TestSeqNumbering(t *testing.T) {
	for _, origin := range []int{-1, 1, 3} {
		var got []int64
		first := 0
		if origin > 0 {
			first = origin
			got = append(got, seqLoad)
		}
		got = append(got, seqSave(first, origin))
		for v := first; v < first+4; v++ {
			got = append(got, seqForward(v, origin), seqOptimise(v, origin), seqState(v, origin), seqSave(v+1, origin))
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("origin %d: seq_ids %v, want 1, 2, 3, ...", origin, got)
			}
		}
		// The name of each checkpoint gives its version and origin back.
		for v := max(first, 0); v < first+5; v++ {
			loc := "tinker://m/sampler_weights/" + checkpointName(v, origin)
			gv, gotOrigin, err := checkpointOf(loc)
			if err != nil || gv != v || gotOrigin != origin {
				t.Fatalf("checkpointOf(%s) = %d, %d, %v; want %d, %d", loc, gv, gotOrigin, err, v, origin)
			}
		}
	}
	for _, bad := range []string{"tinker://m/sampler_weights/x", "tinker://m/sampler_weights/wmrl-v12",
		"tinker://m/sampler_weights/wmrl-v000002-from000003", "tinker://m/sampler_weights/wmrl-v000002-from000000",
		"tinker://m/sampler_weights/wmrl-v0000002"} {
		if _, _, err := checkpointOf(bad); err == nil {
			t.Errorf("checkpointOf(%s): no error", bad)
		}
	}
}

// The importance ratio is read from loss_fn_outputs at the completion
// positions of the datums with weight, in the order they were sent.
func TestImportanceRatio(t *testing.T) {
	batch := []backend.Datum{
		{Tokens: []int{1, 2}, LogProbs: []float64{-1, -2}, Weight: 0.5},
		{Tokens: []int{1}, LogProbs: []float64{-3}, Weight: 0}, // not sent
		{Tokens: []int{3}, LogProbs: []float64{-0.5}, Weight: 0.5},
	}
	_, acts, err := buildDatums(fixedTokenizer{}, batch)
	if err != nil {
		t.Fatal(err)
	}
	td := func(x ...float64) map[string]TensorData {
		return map[string]TensorData{"logprobs": {Data: x, Dtype: "float32"}}
	}
	// Prompt positions first (0), then the completion's logprobs at the update.
	mean, mx, err := importanceRatio(acts, []map[string]TensorData{td(0, -1+math.Log(2), -2), td(0, -0.5+math.Log(0.5))})
	if err != nil || math.Abs(mean-(2+1+0.5)/3) > 1e-12 || math.Abs(mx-2) > 1e-12 {
		t.Fatalf("ratio mean %v max %v (%v), want 7/6 and 2", mean, mx, err)
	}
	if m, x, err := importanceRatio(acts, nil); m != 0 || x != 0 || err != nil {
		t.Fatalf("no outputs: %v %v %v", m, x, err)
	}
	for _, outs := range [][]map[string]TensorData{{td(0, -1, -2)}, {td(0, -1, -2), td()}, {td(0, -1, -2), {}}} {
		if _, _, err := importanceRatio(acts, outs); err == nil || !strings.Contains(err.Error(), "loss_fn_outputs") {
			t.Errorf("outputs %v: %v, want an error naming loss_fn_outputs", outs, err)
		}
	}
}

// turnTokenizer encodes every prompt as 1, 2 and the observations of
// TestBuildDatumsTurns by a table.
type turnTokenizer struct{ fixedTokenizer }

func (turnTokenizer) Observation(text string) ([]int, error) {
	switch text {
	case "obs-1":
		return []int{11, 12}, nil
	case "obs-2":
		return []int{21}, nil
	}
	return nil, fmt.Errorf("observation %q", text)
}

// A hand-worked 3-turn trajectory is one datum (docs/design.md,
// "Multi-turn trajectories"): prompt [1 2], action 1 [300 301] (logprobs
// -0.5 -0.25), observation 1 [11 12], action 2 [302] (-1), observation 2
// [21], action 3 [303 304] (-0.125 -2); A = -1.5, W = 0.5. The sequence is
// [1 2 300 301 11 12 302 21 303 304]; model_input drops its last token,
// target_tokens its first; the action tokens (targets at positions 1 2, 5,
// 7 8) carry A·W = -0.75 and their logprobs, the prompt and observation
// tokens 0 and 0. Turn 3 is sampled from the sequence before its action.
func TestBuildDatumsTurns(t *testing.T) {
	task := backend.Task{ID: "t"}
	turns := []backend.DatumTurn{
		{Text: "a1", Exchange: backend.Exchange{Tokens: []int{300, 301}, LogProbs: []float64{-0.5, -0.25}, Observation: "obs-1"}},
		{Text: "a2", Exchange: backend.Exchange{Tokens: []int{302}, LogProbs: []float64{-1}, Observation: "obs-2"}},
		{Text: "a3", Exchange: backend.Exchange{Tokens: []int{303, 304}, LogProbs: []float64{-0.125, -2}}},
	}
	// The trajectory row's completion (turn 1's) is not what is trained.
	d := backend.Datum{Task: task, Text: "a1", Tokens: []int{300, 301}, LogProbs: []float64{-0.5, -0.25}, Turns: turns, Advantage: -1.5, Weight: 0.5}
	got, acts, err := buildDatums(turnTokenizer{}, []backend.Datum{d})
	if err != nil {
		t.Fatal(err)
	}
	want := []Datum{{
		ModelInput: ModelInput{Chunks: []ModelInputChunk{{Type: "encoded_text", Tokens: []int{1, 2, 300, 301, 11, 12, 302, 21, 303}}}},
		LossFnInputs: map[string]TensorData{
			"target_tokens": {Data: []float64{2, 300, 301, 11, 12, 302, 21, 303, 304}, Dtype: "int64", Shape: []int{9}},
			"logprobs":      {Data: []float64{0, -0.5, -0.25, 0, 0, -1, 0, -0.125, -2}, Dtype: "float32", Shape: []int{9}},
			"advantages":    {Data: []float64{0, -0.75, -0.75, 0, 0, -0.75, 0, -0.75, -0.75}, Dtype: "float32", Shape: []int{9}},
		},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("datums:\n got %+v\nwant %+v", got, want)
	}
	if w := []int{1, 2, 5, 7, 8}; !reflect.DeepEqual(acts[0].at, w) {
		t.Errorf("action positions %v, want %v", acts[0].at, w)
	}
	seq, err := Sequence(turnTokenizer{}, task, []backend.Exchange{turns[0].Exchange, turns[1].Exchange})
	if w := []int{1, 2, 300, 301, 11, 12, 302, 21}; err != nil || !reflect.DeepEqual(seq, w) {
		t.Errorf("turn 3's sequence %v (%v), want %v", seq, err, w)
	}
	if seq, err := Sequence(turnTokenizer{}, task, nil); err != nil || !reflect.DeepEqual(seq, []int{1, 2}) {
		t.Errorf("turn 1's sequence %v (%v), want the prompt", seq, err)
	}

	bad := func(f func(d *backend.Datum)) backend.Datum {
		c := d
		c.Turns = append([]backend.DatumTurn(nil), turns...)
		f(&c)
		return c
	}
	for _, tt := range []struct {
		name string
		tok  Tokenizer
		give backend.Datum
		want string
	}{
		{"no observation encoder", fixedTokenizer{}, d, "cannot encode observations"},
		{"no tokens", turnTokenizer{}, bad(func(d *backend.Datum) { d.Turns[1].Tokens, d.Turns[1].LogProbs = nil, nil }), "turn 2: no completion tokens"},
		{"logprobs", turnTokenizer{}, bad(func(d *backend.Datum) { d.Turns[2].LogProbs = []float64{0} }), "turn 3: 1 logprobs for 2 tokens"},
		{"no observation", turnTokenizer{}, bad(func(d *backend.Datum) { d.Turns[0].Observation = "" }), "turn 1: no observation"},
	} {
		if _, err := BuildDatums(tt.tok, []backend.Datum{tt.give}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}
