package openaiserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/tokenizer"
	"github.com/wmrl/wmrl/internal/turns"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

const (
	modelName = "wmrl-builtin"
	serverKey = "sk-serve-c2VjcmV0LWtleQ"
)

// counting counts the requests a handler serves.
type counting struct {
	h http.Handler
	n atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

// builtinServer serves the built-in world model of the small suite over
// real HTTP.
func builtinServer(t *testing.T, opts ...Option) (builtin.Backend, *httptest.Server, *counting) {
	t.Helper()
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	b := builtin.New(testenv.Suites{}, wm, nil)
	h := &counting{h: New(b.WorldModel, b.Tasks, modelName, opts...)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return b, srv, h
}

func client(t *testing.T, srv *httptest.Server, key string, edit ...func(*openaiwm.Config)) *openaiwm.WorldModel {
	t.Helper()
	c := openaiwm.DefaultConfig()
	c.BaseURL, c.Model, c.Timeout = srv.URL+"/v1", modelName, 10*time.Second
	for _, e := range edit {
		e(&c)
	}
	k, err := openaiwm.LoadKey(c, func(name string) string {
		if name == openaiwm.EnvAPIKey {
			return key
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	wm, err := openaiwm.New(c, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	return wm
}

// items samples programs of the built-in policy for every task of the
// small suite.
func items(t *testing.T, b builtin.Backend) []backend.ScoreItem {
	t.Helper()
	rc := runconfig.Default()
	pol, err := policy.Init(builtin.PolicyConfig(backend.PolicySettings{LearningRate: rc.Policy.LearningRate,
		KLCoef: rc.Policy.KLCoef, Hidden: rc.Policy.Hidden}, suite.VectorLen), policy.ProgramGrammar{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var out []backend.ScoreItem
	for _, split := range []backend.Split{backend.Train, backend.HeldOut} {
		tasks, err := b.Tasks.Tasks(t.Context(), testenv.SuiteSeed, split)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			for s := range 3 {
				_, prog, err := pol.SampleProgram(task.Features, uint64(s))
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, backend.ScoreItem{Task: task, Solution: prog, Key: backend.SampleKey("r", 0, len(out), s)})
			}
		}
	}
	return out
}

// The adapter, over real HTTP, predicts exactly what the built-in model
// predicts in process.
func TestClientMatchesInProcess(t *testing.T) {
	b, srv, h := builtinServer(t, WithAPIKey(serverKey))
	its := items(t, b)
	want, err := b.WorldModel.Score(t.Context(), its)
	if err != nil {
		t.Fatal(err)
	}
	wm := client(t, srv, serverKey)
	got, err := wm.Score(t.Context(), its)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[float64]bool{}
	for i := range its {
		if !got[i].Graded || got[i].Score != want[i].Score || got[i].Tokens <= 0 {
			t.Errorf("item %d (%s): %+v over HTTP, %+v in process", i, its[i].Task.ID, got[i], want[i])
		}
		distinct[want[i].Score] = true
	}
	t.Logf("%d items over HTTP, %d distinct in-process scores, all equal", len(its), len(distinct))
	if len(its) < 18 || len(distinct) < 3 {
		t.Errorf("%d items with %d distinct scores: the test compares too little", len(its), len(distinct))
	}
	if int(h.n.Load()) != len(its) {
		t.Errorf("%d requests for %d items", h.n.Load(), len(its))
	}
	// A program the model cannot read is malformed: 0.
	bad := its[0]
	bad.Solution = "((( not a program"
	if _, err := b.WorldModel.Score(t.Context(), []backend.ScoreItem{bad}); !backend.IsPermanent(err) {
		t.Fatalf("in process, an unreadable program: %v", err)
	}
	ps, err := wm.Score(t.Context(), []backend.ScoreItem{bad})
	if err != nil || ps[0].Score != 0 || !ps[0].Graded {
		t.Errorf("an unreadable program: %+v, %v; want graded 0", ps, err)
	}
}

func TestKeyAndModelRefused(t *testing.T) {
	_, srv, _ := builtinServer(t, WithAPIKey(serverKey))
	it := backend.ScoreItem{Task: backend.Task{Suite: testenv.SuiteSeed, ID: "x"}, Solution: "model ridge", Key: "k"}
	for _, tt := range []struct {
		name string
		key  string
		edit func(*openaiwm.Config)
		want string
	}{
		{"wrong key", "sk-wrong-key-123", nil, "401"},
		{"no key", "", nil, "no API key was sent"},
		{"unknown model", serverKey, func(c *openaiwm.Config) { c.Model = "gpt-9" }, "world_model.openai.model (\"gpt-9\")"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var edits []func(*openaiwm.Config)
			if tt.edit != nil {
				edits = append(edits, tt.edit)
			}
			_, err := client(t, srv, tt.key, edits...).Score(t.Context(), []backend.ScoreItem{it})
			if !backend.IsPermanent(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Score = %v, want a permanent error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), serverKey) || (tt.key != "" && strings.Contains(err.Error(), tt.key)) {
				t.Errorf("error shows a key: %v", err)
			}
		})
	}
}

// stubWM answers a fixed prediction or error.
type stubWM struct {
	p   backend.Prediction
	err error
}

func (s stubWM) Score(ctx context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	if s.err != nil {
		return nil, s.err
	}
	return []backend.Prediction{s.p}, nil
}

func TestUngradedAndFailingModel(t *testing.T) {
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	b := builtin.New(testenv.Suites{}, wm, nil)
	tasks, err := b.Tasks.Tasks(t.Context(), testenv.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	it := backend.ScoreItem{Task: tasks[0], Solution: "anything", Key: "k"}

	srv := httptest.NewServer(New(stubWM{p: backend.Prediction{}}, b.Tasks, modelName))
	defer srv.Close()
	ps, err := client(t, srv, "").Score(t.Context(), []backend.ScoreItem{it})
	if err != nil || ps[0].Graded {
		t.Errorf("ungraded model: %+v, %v; want an ungraded prediction", ps, err)
	}

	failing := &counting{h: New(stubWM{err: errors.New("model down")}, b.Tasks, modelName)}
	srv2 := httptest.NewServer(failing)
	defer srv2.Close()
	_, err = client(t, srv2, "", func(c *openaiwm.Config) { c.MaxRetries = 1 }).Score(t.Context(), []backend.ScoreItem{it})
	if err == nil || backend.IsPermanent(err) || !strings.Contains(err.Error(), "500") || failing.n.Load() != 2 {
		t.Errorf("failing model: %v after %d requests; want a retryable 500 after 2", err, failing.n.Load())
	}
}

func post(t *testing.T, srv *httptest.Server, path, body string, header ...string) (int, map[string]any, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, map[string]any, []byte) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("body %q is not JSON: %v", raw, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return res.StatusCode, v, raw
}

func promptOf(t *testing.T, suiteSeed uint64, id, solution string) string {
	t.Helper()
	text, err := openaiwm.Render(nil, backend.ScoreItem{Task: backend.Task{Suite: suiteSeed, ID: id}, Solution: solution})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(text)
	return string(b)
}

func TestBadRequests(t *testing.T) {
	b, srv, _ := builtinServer(t)
	tasks, err := b.Tasks.Tasks(t.Context(), testenv.SuiteSeed, backend.Train)
	if err != nil {
		t.Fatal(err)
	}
	good := promptOf(t, testenv.SuiteSeed, tasks[0].ID, "model ridge")
	for _, tt := range []struct {
		name   string
		body   string
		status int
		param  any
		want   string
	}{
		{"empty", ``, 400, nil, "empty body"},
		{"not json", `{"model": `, 400, nil, "not a chat-completion request"},
		{"no model", `{"messages": [{"role": "user", "content": ` + good + `}]}`, 400, "model", "model is required"},
		{"unknown model", `{"model": "gpt-9", "messages": [{"role": "user", "content": ` + good + `}]}`, 404, "model", "does not exist"},
		{"n 0", `{"model": "wmrl-builtin", "n": 0, "messages": [{"role": "user", "content": ` + good + `}]}`, 400, "n", "n is 0; want 1 to 128"},
		{"n 129", `{"model": "wmrl-builtin", "n": 129, "messages": [{"role": "user", "content": ` + good + `}]}`, 400, "n", "n is 129"},
		{"stream options alone", `{"model": "wmrl-builtin", "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": ` + good + `}]}`, 400, "stream_options", "only allowed when stream is true"},
		{"no messages", `{"model": "wmrl-builtin", "messages": []}`, 400, "messages", "messages is empty"},
		{"no user message", `{"model": "wmrl-builtin", "messages": [{"role": "system", "content": ` + good + `}]}`, 400, "messages", "no user message"},
		{"bad content", `{"model": "wmrl-builtin", "messages": [{"role": "user", "content": 3}]}`, 400, "messages", "messages[0]"},
		{"image part", `{"model": "wmrl-builtin", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, 400, "messages", "image_url"},
		{"unknown task", `{"model": "wmrl-builtin", "messages": [{"role": "user", "content": ` + promptOf(t, testenv.SuiteSeed, "no-such-task", "model ridge") + `}]}`, 400, "messages", "no-such-task"},
		{"unloadable suite", `{"model": "wmrl-builtin", "messages": [{"role": "user", "content": ` + promptOf(t, 8, "x", "model ridge") + `}]}`, 500, nil, "suite 8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, v, raw := post(t, srv, "/v1/chat/completions", tt.body)
			e, _ := v["error"].(map[string]any)
			if status != tt.status || e == nil || e["param"] != tt.param || !strings.Contains(e["message"].(string), tt.want) {
				t.Errorf("status %d, body %s; want %d, param %v, a message saying %q", status, raw, tt.status, tt.param, tt.want)
			}
		})
	}
	status, v, _ := post(t, srv, "/v1/embeddings", `{}`)
	if status != 404 || v["error"] == nil {
		t.Errorf("unknown route: %d %v", status, v)
	}
}

func TestProtocol(t *testing.T) {
	b, srv, _ := builtinServer(t, WithAPIKey(serverKey))
	it := items(t, b)[4]
	auth := []string{"Authorization", "Bearer " + serverKey}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/models", nil)
	if status, _, _ := do(t, req); status != 401 {
		t.Errorf("models without a key: %d, want 401", status)
	}
	req.Header.Set(auth[0], auth[1])
	status, v, raw := do(t, req)
	data, _ := v["data"].([]any)
	if status != 200 || v["object"] != "list" || len(data) != 1 || data[0].(map[string]any)["id"] != modelName {
		t.Errorf("models: %d %s", status, raw)
	}

	// Content as an array of text parts; a system message before it.
	text, err := openaiwm.Render(nil, it)
	if err != nil {
		t.Fatal(err)
	}
	half := len(text) / 2
	parts, _ := json.Marshal([]map[string]string{{"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}})
	body := `{"model": "wmrl-builtin", "temperature": 0, "seed": 1, "messages": [{"role": "system", "content": "be brief"}, ` +
		`{"role": "user", "content": ` + string(parts) + `}]}`
	status, v, raw = post(t, srv, "/v1/chat/completions", body, auth...)
	if status != 200 || v["object"] != "chat.completion" || v["model"] != modelName {
		t.Fatalf("completion: %d %s", status, raw)
	}
	choice := v["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	want, err := b.WorldModel.Score(t.Context(), []backend.ScoreItem{it})
	if err != nil {
		t.Fatal(err)
	}
	if p := openaiwm.Parse(msg["content"].(string)); msg["role"] != "assistant" || choice["finish_reason"] != "stop" ||
		p != want[0] || !strings.HasPrefix(msg["content"].(string), `{"score":`) {
		t.Errorf("answer %s, want the score %v", raw, want[0].Score)
	}
	u := v["usage"].(map[string]any)
	if u["prompt_tokens"].(float64) < 10 || u["total_tokens"].(float64) != u["prompt_tokens"].(float64)+u["completion_tokens"].(float64) {
		t.Errorf("usage %v", u)
	}
	// Deterministic: the same request, the same body.
	_, _, again := post(t, srv, "/v1/chat/completions", body, auth...)
	if !bytes.Equal(raw, again) {
		t.Errorf("two answers to one request:\n%s\n%s", raw, again)
	}
}

// A turn's prompt is answered in the reference's format, and the adapter,
// over real HTTP through openai-go, reads it back into the outcome the
// built-in model predicts in process: the status of its rung, the score
// of its quality bucket (the reference's four), the ladder's description
// as feedback; the observation a policy gets is turns.Render's, the
// built-in world model's but for the bucket's resolution.
func TestTurnOutcomeOverHTTP(t *testing.T) {
	b, srv, _ := builtinServer(t)
	its := items(t, b)
	for i := range its {
		its[i].Action = backend.ActionExecuteCode
	}
	want, err := b.WorldModel.Score(t.Context(), its)
	if err != nil {
		t.Fatal(err)
	}
	got, err := client(t, srv, "").Score(t.Context(), its)
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]int{}
	for i := range its {
		in := turns.WorldModelAnswer(want[i])
		score := map[string]float64{"invalid_program": 0, "runtime_error": 0.1, "invalid_output": 0.2}[in.Status]
		if in.Status == "ok" {
			score = openaiwm.ValidBase + openaiwm.ValidSpan*openaiwm.BucketPosition[openaiwm.QualityBucket(2*in.Score-1)]
		}
		wantP := backend.Prediction{Graded: true, Score: score, Status: in.Status, Feedback: turns.Describe(in.Status),
			Tokens: got[i].Tokens}
		if got[i] != wantP || got[i].Tokens <= 0 {
			t.Errorf("item %d: %+v over HTTP, want %+v (in process %+v)", i, got[i], wantP, want[i])
		}
		obs, err := turns.Render(turns.WorldModelAnswer(got[i]), 1200, tokenizer.Bytes{})
		if err != nil {
			t.Fatal(err)
		}
		wantObs, _ := turns.Render(turns.Answer{Graded: true, Status: in.Status, Score: score, Feedback: turns.Describe(in.Status)},
			1200, tokenizer.Bytes{})
		if obs != wantObs || !strings.HasPrefix(obs, turns.Header+"\nstatus: "+in.Status+"\nscore bucket: ") {
			t.Errorf("item %d: observation %q, want %q", i, obs, wantObs)
		}
		statuses[in.Status]++
	}
	t.Logf("%d turn items over HTTP, statuses %v", len(its), statuses)
	if len(statuses) < 2 {
		t.Errorf("statuses %v: the test compares too little", statuses)
	}

	// The wire: the reference's answer, one prediction with every field.
	prompt, err := openaiwm.Render(nil, its[0])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"model": modelName, "messages": []map[string]string{{"role": "user", "content": prompt}}})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("answer %+v, %v", c, err)
	}
	var a map[string]any
	if err := json.Unmarshal([]byte(c.Choices[0].Message.Content), &a); err != nil {
		t.Fatalf("content %q: %v", c.Choices[0].Message.Content, err)
	}
	preds, _ := a["predictions"].([]any)
	p0, _ := preds[0].(map[string]any)
	for _, k := range []string{"status", "error_type", "error_line", "quality_bucket", "env_feedback", "confidence"} {
		if _, ok := p0[k]; !ok || a["reason"] == nil {
			t.Errorf("answer %s lacks %s", c.Choices[0].Message.Content, k)
		}
	}
}
