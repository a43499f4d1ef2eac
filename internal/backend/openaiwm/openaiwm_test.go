package openaiwm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/testenv"
)

const testKey = "sk-test-Zm9vYmFyYmF6cXV4"

// fake is an OpenAI-compatible server whose answers a test scripts. It
// records every request and the most requests it had in flight at once.
type fake struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(n int, body map[string]any, w http.ResponseWriter) // n counts requests from 0
	delay  time.Duration

	mu          sync.Mutex
	bodies      []map[string]any
	headers     []http.Header
	inFlight    int
	maxInFlight int
}

func newFake(t *testing.T, answer func(n int, body map[string]any, w http.ResponseWriter)) *fake {
	f := &fake{t: t, answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Error(err)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		f.t.Errorf("request body %s: %v", raw, err)
	}
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.headers = append(f.headers, r.Header.Clone())
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	f.answer(n, body, w)
}

func (f *fake) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func (f *fake) config() Config {
	c := DefaultConfig()
	c.BaseURL, c.Model = f.srv.URL+"/v1", "test-model"
	c.Timeout = 10 * time.Second
	return c
}

// completion writes a chat.completion whose answer is content.
func completion(w http.ResponseWriter, content string, prompt, completion int) {
	c, _ := json.Marshal(content)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1754580018,"model":"test-model",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,`+
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		c, prompt, completion, prompt+completion)
}

func apiError(w http.ResponseWriter, status int, msg, param string, header ...string) {
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	p, _ := json.Marshal(param)
	if param == "" {
		p = []byte("null")
	}
	m, _ := json.Marshal(msg)
	fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","param":%s,"code":null}}`, m, p)
}

func item(id, solution string) backend.ScoreItem {
	return backend.ScoreItem{Task: backend.Task{Suite: 7, ID: id}, Solution: solution, Key: "run/step-0/group-0/sample-" + id}
}

func mustNew(t *testing.T, c Config, k Key, cache Cache) *WorldModel {
	t.Helper()
	wm, err := New(c, k, cache)
	if err != nil {
		t.Fatal(err)
	}
	return wm
}

func testKeyOf(t *testing.T) Key {
	t.Helper()
	k, err := LoadKey(Config{}, env(map[string]string{EnvAPIKey: testKey}))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The request is what the protocol and determinism want: the model, the
// rendered prompt as one user message, temperature 0, the seed, the key
// as a bearer token.
func TestRequest(t *testing.T) {
	f := newFake(t, func(n int, body map[string]any, w http.ResponseWriter) { completion(w, `{"score": 0.73}`, 400, 9) })
	c := f.config()
	c.MaxTokens = 256
	c.Seed = 42
	wm := mustNew(t, c, testKeyOf(t), nil)
	it := item("t1", "model ridge")
	ps, err := wm.Score(t.Context(), []backend.ScoreItem{it})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0] != (backend.Prediction{Graded: true, Score: 0.73, Tokens: 409}) {
		t.Fatalf("Score = %+v", ps)
	}
	prompt, err := Render(nil, it)
	if err != nil {
		t.Fatal(err)
	}
	body, h := f.bodies[0], f.headers[0]
	msgs, _ := body["messages"].([]any)
	if body["model"] != "test-model" || body["temperature"] != 0.0 || body["seed"] != 42.0 ||
		body["max_completion_tokens"] != 256.0 || len(msgs) != 1 || body["stream"] != nil {
		t.Errorf("request body %v", body)
	}
	if m, _ := msgs[0].(map[string]any); m["role"] != "user" || m["content"] != prompt {
		t.Errorf("message %v, want the rendered prompt", msgs[0])
	}
	if h.Get("Authorization") != "Bearer "+testKey || h.Get("X-Client-Request-Id") != it.Key {
		t.Errorf("headers %v", h)
	}

	// No seed, no max tokens, no key: none sent.
	c.NoSeed, c.MaxTokens = true, 0
	if _, err := mustNew(t, c, Key{}, nil).Score(t.Context(), []backend.ScoreItem{it}); err != nil {
		t.Fatal(err)
	}
	body, h = f.bodies[1], f.headers[1]
	if _, ok := body["seed"]; ok {
		t.Errorf("seed sent with no_seed: %v", body)
	}
	if _, ok := body["max_completion_tokens"]; ok {
		t.Errorf("max_completion_tokens sent without max_tokens: %v", body)
	}
	if h.Get("Authorization") != "" {
		t.Errorf("Authorization %q sent without a key", h.Get("Authorization"))
	}
}

// Recorded response bodies of OpenAI, vLLM and SGLang, through the client.
func TestRecordedResponses(t *testing.T) {
	for _, tt := range []struct {
		file   string
		want   backend.Prediction
		tokens int
	}{
		{"openai_plain.json", graded(0.73), 421},
		{"openai_fenced.json", rung(0.7, "ok", ""), 453},
		{"openai_refusal.json", ungraded, 421},
		{"openai_text_refusal.json", ungraded, 424},
		{"vllm_reasoning_content.json", rung(0.6, "ok", ""), 512},
		{"vllm_reasoning_field.json", graded(0.35), 470},
		{"vllm_think_inline.json", rung(0.2, "invalid_output", ""), 530},
		{"vllm_think_unterminated.json", ungraded, 681},
		{"vllm_think_open_in_prompt.json", graded(0.61), 480},
		{"vllm_broken_json.json", ungraded, 446},
		{"sglang_multiple_objects.json", graded(0.55), 493},
		{"sglang_unknown_status.json", ungraded, 447},
		{"vllm_reference_runtime_err.json", rung(0.1, "runtime_error", "Execution failed: Traceback (most recent call last):\n"+
			"  File \"solution.py\", line 14, in <module>\n    y = train['SalePrice']\nKeyError: 'SalePrice'"), 2071},
		{"vllm_reference_valid.json", rung(0.875, "ok", "Submission written to SUBMISSION_PATH with the expected columns."), 2106},
		{"vllm_reference_truncated.json", ungraded, 2899},
	} {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			})
			ps, err := mustNew(t, f.config(), Key{}, nil).Score(t.Context(), []backend.ScoreItem{item("t", "model ridge")})
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Tokens = tt.tokens
			if ps[0] != want {
				t.Errorf("prediction %+v, want %+v", ps[0], want)
			}
		})
	}
}

func TestEmptySolutionNotSent(t *testing.T) {
	f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) { completion(w, `{"score": 0.9}`, 1, 1) })
	wm := mustNew(t, f.config(), Key{}, nil)
	ps, err := wm.Score(t.Context(), []backend.ScoreItem{item("a", " \n\t"), item("b", "model ridge"), item("c", "")})
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Prediction{{Graded: true}, {Graded: true, Score: 0.9, Tokens: 2}, {Graded: true}}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("prediction %d = %+v, want %+v", i, ps[i], want[i])
		}
	}
	if f.requests() != 1 || wm.Usage().Skipped != 2 {
		t.Errorf("%d requests, usage %+v; want 1 request and 2 skipped", f.requests(), wm.Usage())
	}
}

// The client retries a 429 (after the server's Retry-After) and succeeds.
func TestRetries429(t *testing.T) {
	f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) {
		if n == 0 {
			apiError(w, http.StatusTooManyRequests, "Rate limit reached", "", "Retry-After-Ms", "20")
			return
		}
		completion(w, `{"score": 0.5}`, 10, 2)
	})
	ps, err := mustNew(t, f.config(), Key{}, nil).Score(t.Context(), []backend.ScoreItem{item("a", "model ridge")})
	if err != nil || ps[0].Score != 0.5 || f.requests() != 2 {
		t.Fatalf("Score = %+v, %v after %d requests; want 0.5 after 2", ps, err, f.requests())
	}
	if f.headers[1].Get("X-Stainless-Retry-Count") != "1" {
		t.Errorf("second request's retry count %q, want 1", f.headers[1].Get("X-Stainless-Retry-Count"))
	}

	// Without Retry-After, the client backs off (0.5 s less up to 25%).
	f = newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) {
		if n == 0 {
			apiError(w, http.StatusTooManyRequests, "Rate limit reached", "")
			return
		}
		completion(w, `{"score": 0.5}`, 10, 2)
	})
	start := time.Now()
	ps, err = mustNew(t, f.config(), Key{}, nil).Score(t.Context(), []backend.ScoreItem{item("a", "model ridge")})
	if d := time.Since(start); err != nil || ps[0].Score != 0.5 || f.requests() != 2 || d < 370*time.Millisecond {
		t.Errorf("Score = %+v, %v after %d requests in %v; want 0.5 after 2, backing off 0.375 s or more", ps, err,
			f.requests(), d)
	}
}

// A 5xx that lasts is a plain error (Temporal retries) after the client's
// own retries, naming the URL and the status.
func TestServerErrorIsRetryable(t *testing.T) {
	f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) {
		apiError(w, http.StatusInternalServerError, "engine died", "", "Retry-After-Ms", "5")
	})
	c := f.config()
	c.MaxRetries = 2
	_, err := mustNew(t, c, Key{}, nil).Score(t.Context(), []backend.ScoreItem{item("a", "model ridge")})
	if err == nil || backend.IsPermanent(err) {
		t.Fatalf("Score = %v, want a retryable error", err)
	}
	for _, s := range []string{"world_model.openai", f.srv.URL + "/v1/chat/completions", "500", "engine died", "after 2 retries"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if f.requests() != 3 {
		t.Errorf("%d requests, want 3 (1 + 2 retries)", f.requests())
	}
}

// Refused keys, unknown models and bad parameters are permanent, each
// naming what to fix, and never show the key, even when the server echoes
// it.
func TestPermanentErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   []string
	}{
		{"401", func(w http.ResponseWriter) {
			apiError(w, http.StatusUnauthorized, "Incorrect API key provided: "+testKey, "")
		}, []string{"401", "API key from " + EnvAPIKey + " was refused", EnvOpenAIKey, "api_key_file"}},
		{"401 plain text", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, "unauthorized "+testKey)
		}, []string{"401", EnvAPIKey}},
		{"403", func(w http.ResponseWriter) {
			apiError(w, http.StatusForbidden, "Project does not have access to model", "")
		}, []string{"403", EnvAPIKey}},
		{"404", func(w http.ResponseWriter) {
			apiError(w, http.StatusNotFound, "The model `test-model` does not exist.", "model")
		}, []string{"404", "world_model.openai.model (\"test-model\")", "world_model.openai.base_url"}},
		{"400 temperature", func(w http.ResponseWriter) {
			apiError(w, http.StatusBadRequest, "Unsupported value: 'temperature' does not support 0 with this model.", "temperature")
		}, []string{"400", "world_model.openai.temperature"}},
		{"400 max tokens", func(w http.ResponseWriter) {
			apiError(w, http.StatusBadRequest, "max_tokens is too large", "max_completion_tokens")
		}, []string{"400", "world_model.openai.max_tokens"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) { tt.answer(w) })
			_, err := mustNew(t, f.config(), testKeyOf(t), nil).Score(t.Context(), []backend.ScoreItem{item("a", "model ridge")})
			if !backend.IsPermanent(err) {
				t.Fatalf("Score = %v, want a permanent error", err)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), testKey) {
				t.Errorf("error shows the key: %v", err)
			}
			if f.requests() != 1 {
				t.Errorf("%d requests, want 1 (no retry)", f.requests())
			}
		})
	}
}

func TestTransportErrors(t *testing.T) {
	// Nothing listens on the port: a plain error after the retries.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := DefaultConfig()
	c.BaseURL, c.Model, c.MaxRetries = "http://"+addr+"/v1", "m", 1
	_, err = mustNew(t, c, testKeyOf(t), nil).Score(t.Context(), []backend.ScoreItem{item("a", "model ridge")})
	if err == nil || backend.IsPermanent(err) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), testKey) {
		t.Errorf("connection refused: %v, want a retryable error naming %s", err, addr)
	}

	// A server slower than the timeout: a plain error naming the field.
	f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) { completion(w, `{"score": 1}`, 1, 1) })
	f.delay = 5 * time.Second
	c = f.config()
	c.Timeout = 200 * time.Millisecond
	start := time.Now()
	_, err = mustNew(t, c, Key{}, nil).Score(t.Context(), []backend.ScoreItem{item("a", "model ridge")})
	if err == nil || backend.IsPermanent(err) || !strings.Contains(err.Error(), "world_model.openai.timeout_seconds (0.2)") {
		t.Errorf("timeout: %v, want a retryable error naming the timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %v", d)
	}

	// The caller's deadline ends the call.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	c.Timeout = time.Minute
	_, err = mustNew(t, c, Key{}, nil).Score(ctx, []backend.ScoreItem{item("a", "model ridge")})
	if err == nil || backend.IsPermanent(err) {
		t.Errorf("cancelled: %v, want a retryable error", err)
	}
}

// Answers are cached: a second Score of the same items (a retried activity,
// on this worker or, with a shared cache, another) makes no request and
// gives the same predictions and tokens.
func TestCache(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		m := &Memory{}
		testCache(t, m, m)
		if m.Len() != 4 {
			t.Errorf("%d answers in the cache, want 4", m.Len())
		}
	})
	t.Run("postgres", func(t *testing.T) {
		s := testenv.FreshStore(t)
		testCache(t, StoreCache{Store: s}, StoreCache{Store: s})
	})
}

func testCache(t *testing.T, cache, shared Cache) {
	f := newFake(t, func(n int, body map[string]any, w http.ResponseWriter) {
		// Distinct answers per item: the solution's length.
		msg := body["messages"].([]any)[0].(map[string]any)["content"].(string)
		switch {
		case strings.Contains(msg, "unreadable"):
			completion(w, "no idea", 50, 3)
		default:
			completion(w, fmt.Sprintf(`{"status": "valid", "quality": %v}`, float64(len(msg)%10)/10), 100+n, 5)
		}
	})
	items := []backend.ScoreItem{item("a", "model ridge"), item("b", "model lasso alpha=0.1"), item("c", "unreadable")}
	wm := mustNew(t, f.config(), Key{}, cache)
	first, err := wm.Score(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	if f.requests() != 3 || !first[0].Graded || !first[1].Graded || first[2].Graded || first[2].Tokens != 53 {
		t.Fatalf("first Score = %+v after %d requests", first, f.requests())
	}
	again, err := wm.Score(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	other := mustNew(t, f.config(), Key{}, shared)
	third, err := other.Score(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if again[i] != first[i] || third[i] != first[i] {
			t.Errorf("item %d: %+v, then %+v and %+v", i, first[i], again[i], third[i])
		}
	}
	if f.requests() != 3 {
		t.Errorf("%d requests, want 3: the cache did not answer", f.requests())
	}
	u := wm.Usage()
	if tokens := first[0].Tokens + first[1].Tokens + first[2].Tokens; u.Calls != 3 || u.CacheHits != 3 ||
		u.CompletionTokens != 13 || int(u.PromptTokens+u.CompletionTokens) != tokens {
		t.Errorf("usage %+v, want 3 calls, 3 cache hits, %d tokens", u, tokens)
	}
	// Another temperature is another request.
	c := f.config()
	c.Temperature = 0.5
	if _, err := mustNew(t, c, Key{}, cache).Score(t.Context(), items[:1]); err != nil || f.requests() != 4 {
		t.Errorf("another temperature: %v after %d requests, want a 4th request", err, f.requests())
	}
}

// At most Concurrency requests are in flight, across Score calls.
func TestConcurrencyBound(t *testing.T) {
	f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) { completion(w, `{"score": 0.5}`, 1, 1) })
	f.delay = 50 * time.Millisecond
	c := f.config()
	c.Concurrency = 2
	wm := mustNew(t, c, Key{}, nil)
	var items [2][]backend.ScoreItem
	for i := range 12 {
		items[i%2] = append(items[i%2], item(fmt.Sprint(i), fmt.Sprintf("model ridge alpha=%d", i)))
	}
	var wg sync.WaitGroup
	for _, batch := range items {
		wg.Go(func() {
			if _, err := wm.Score(t.Context(), batch); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if f.requests() != 12 || f.maxInFlight != 2 {
		t.Errorf("%d requests, at most %d in flight; want 12, at most 2 (and 2 reached)", f.requests(), f.maxInFlight)
	}
}

// A turn's item is asked with the turn template, its action is in the
// request (and so in the cache key: the same program asked as a turn and
// as a single-shot item is two requests), and its prediction carries the
// reference answer's status and env_feedback; request_info is refused.
func TestTurnItems(t *testing.T) {
	const answer = `{"reason": "r", "predictions": [{"status": "runtime_err", "error_type": "KeyError", "error_line": 2, ` +
		`"quality_bucket": "", "env_feedback": "KeyError: 'y'", "confidence": 0.6}]}`
	f := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) { completion(w, answer, 10, 5) })
	cache := &Memory{}
	wm := mustNew(t, f.config(), Key{}, cache)
	turn := item("t1", "model ridge")
	turn.Action = backend.ActionExecuteCode
	single := item("t1", "model ridge")
	ps, err := wm.Score(t.Context(), []backend.ScoreItem{turn, single})
	if err != nil {
		t.Fatal(err)
	}
	want := backend.Prediction{Graded: true, Score: 0.1, Status: "runtime_error", Feedback: "KeyError: 'y'", Tokens: 15}
	if ps[0] != want || ps[1] != want {
		t.Errorf("predictions %+v, want %+v twice", ps, want)
	}
	if len(f.bodies) != 2 || cache.Len() != 2 {
		t.Fatalf("%d requests, %d cached answers; want 2 and 2", len(f.bodies), cache.Len())
	}
	_, kTurn, _ := wm.Request(turn)
	_, kSingle, _ := wm.Request(single)
	if kTurn == kSingle {
		t.Error("a turn's item and a single-shot item of one program have the same cache key")
	}
	turnPrompt, err := Render(nil, turn)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range f.bodies {
		msgs, _ := b["messages"].([]any)
		if m, _ := msgs[0].(map[string]any); m["content"] == turnPrompt {
			found = true
		}
	}
	if !found {
		t.Error("no request holds the turn's prompt")
	}
	// Asked again: from the cache, the same prediction, no call.
	if ps, err := wm.Score(t.Context(), []backend.ScoreItem{turn}); err != nil || ps[0] != want || len(f.bodies) != 2 {
		t.Errorf("again: %+v, %v, %d requests", ps, err, len(f.bodies))
	}
	info := turn
	info.Action = backend.ActionRequestInfo
	if _, err := wm.Score(t.Context(), []backend.ScoreItem{info}); !backend.IsPermanent(err) ||
		!strings.Contains(err.Error(), "request_info") {
		t.Errorf("request_info: %v, want a permanent error naming it", err)
	}
	// An answer without a prediction: ungraded, and the reason kept.
	g := newFake(t, func(n int, _ map[string]any, w http.ResponseWriter) {
		completion(w, `{"predictions": [{"status": "valid", "quality_bucket": "great"}]}`, 1, 1)
	})
	wm2 := mustNew(t, g.config(), Key{}, nil)
	if ps, err := wm2.Score(t.Context(), []backend.ScoreItem{turn}); err != nil || ps[0].Graded {
		t.Errorf("unknown bucket: %+v, %v; want ungraded", ps, err)
	}
	if u := wm2.Usage(); u.Unparsed != 1 || !strings.Contains(u.LastUnparsed, "quality_bucket") {
		t.Errorf("usage %+v, want 1 unparsed answer naming quality_bucket", u)
	}
}
