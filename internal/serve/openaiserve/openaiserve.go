// Package openaiserve serves a world model (backend.WorldModel) over the
// OpenAI chat-completions protocol, so that the language-model adapter
// (internal/backend/openaiwm) can be run, and tested over real HTTP, against
// the built-in model: POST /v1/chat/completions reads the task's suite and
// id and the solution back from the prompt openaiwm.DefaultTemplate
// renders, scores the pair with the world model (the task's Features come
// from the task source) and answers {"score": s}; GET /v1/models lists the
// one model. A turn's prompt (openaiwm.DefaultTurnTemplate, with an
// action) is answered in the reference's format, as the method's world
// model answers (Outcome): {"reason", "predictions": [{"status",
// "error_type", "error_line", "quality_bucket", "env_feedback",
// "confidence"}]}, the status and bucket those of the predicted score's
// rung and position, the env_feedback the ladder's description of its
// status (turns.Describe), the built-in grader's feedback. Answers are deterministic: the same request gives the same
// body.
//
// A solution the model cannot read is answered {"status": "malformed"} (the
// reward ladder's 0), an ungraded prediction with text holding no JSON. As
// a model server (vLLM, OpenAI) answers any prompt, a last user message
// outside openaiwm's template is answered too: a completion saying the
// world model gives no prediction and why (NoPrediction), text holding no
// JSON object, which a world-model client reads as ungraded, never as a
// score. n asks for n choices (1 to MaxN): the model is deterministic, so
// they are the same answer, and the same request (seed included) gives the
// same body. stream: true answers server-sent events in OpenAI's chunk
// format ("data: {chat.completion.chunk}", per choice a chunk with the
// role, one with the content in delta and one with finish_reason; with
// stream_options.include_usage a last chunk with no choices and the usage;
// then "data: [DONE]"). A bad request is a 400 (404 for an unknown model)
// with an OpenAI-style error object naming the parameter (n out of range,
// stream_options without stream, messages without a user message or with a
// non-text part, a template prompt naming an unknown task); a task source
// or model failure is a 500, which clients retry. Token counts are
// whitespace-separated words, not a tokenizer's.
package openaiserve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/turns"
)

// maxBody bounds a request body.
const maxBody = 4 << 20

// Ungraded is the answer to an item the world model gives no score: it
// holds no JSON, so a client reads no prediction.
const Ungraded = "The world model gives no prediction for this solution."

// Option configures the server.
type Option func(*server)

// WithAPIKey makes the server refuse, with 401, requests without the
// header "Authorization: Bearer <key>" ("" keeps the server open).
func WithAPIKey(key string) Option { return func(s *server) { s.key = key } }

type server struct {
	wm    backend.WorldModel
	tasks backend.TaskSource
	model string
	key   string
}

// New returns the handler serving wm as the model named model, reading
// tasks from tasks.
func New(wm backend.WorldModel, tasks backend.TaskSource, model string, opts ...Option) http.Handler {
	s := &server{wm: wm, tasks: tasks, model: model}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.auth(s.complete))
	mux.HandleFunc("GET /v1/models", s.auth(s.models))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "unknown_url",
			fmt.Sprintf("no route %s %s: this server has POST /v1/chat/completions and GET /v1/models", r.Method,
				r.URL.Path))
	})
	return mux
}

func (s *server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.key != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.key)) != 1 {
				writeError(w, http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key",
					"missing or incorrect API key: send Authorization: Bearer <key>")
				return
			}
		}
		next(w, r)
	}
}

// errorBody is the API's error object.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, param, code, msg string) {
	var b errorBody
	b.Error.Message, b.Error.Type = msg, typ
	if param != "" {
		b.Error.Param = &param
	}
	if code != "" {
		b.Error.Code = &code
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{ID: s.model, Object: "model", OwnedBy: "wmrl"}}})
}

// request is what the server reads of a chat-completion request; other
// parameters (temperature, seed, max_tokens, ...) do not change a
// deterministic model's answer.
type request struct {
	Model         string    `json:"model"`
	Messages      []message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N *int `json:"n"`
}

// MaxN is the most choices a request may ask for (n).
const MaxN = 128

// NoPrediction begins the answer to a prompt outside openaiwm's template:
// the world model cannot judge it, and says so in text holding no JSON
// object, so that a world-model client reads no prediction (ungraded), as
// it reads any answer without one.
const NoPrediction = "The world model gives no prediction: the last user message is not a world-model prompt of openaiwm.DefaultTemplate"

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text returns a message's content: a string, or the text of an array of
// content parts.
func (m message) text() (string, error) {
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", errors.New("content is neither a string nor an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q; only text is served", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

type choice struct {
	Index        int             `json:"index"`
	Message      answer          `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type answer struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   usage    `json:"usage"`
}

func (s *server) complete(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", err.Error())
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "",
			"the body is not a chat-completion request: "+err.Error())
		return
	}
	switch {
	case req.Model == "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "model", "", "model is required")
		return
	case req.Model != s.model:
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			fmt.Sprintf("the model %q does not exist; this server serves %q", req.Model, s.model))
		return
	case req.N != nil && (*req.N < 1 || *req.N > MaxN):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "n", "",
			fmt.Sprintf("n is %d; want 1 to %d", *req.N, MaxN))
		return
	case req.StreamOptions != nil && !req.Stream:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "stream_options", "",
			"stream_options is only allowed when stream is true")
		return
	}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	prompt, words, err := lastUser(req.Messages)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages", "", err.Error())
		return
	}
	var content string
	p, err := openaiwm.ReadRequest(prompt)
	if err != nil {
		// Not a prompt the world model reads: a completion saying so,
		// as a model server answers any prompt.
		content = NoPrediction + " (" + noBraces(err.Error()) + ")."
	} else {
		var status int
		var msg string
		content, status, msg = s.score(r.Context(), p, r.Header.Get("X-Client-Request-Id"))
		if status != http.StatusOK {
			typ := "invalid_request_error"
			param := "messages"
			if status >= 500 {
				typ, param = "server_error", ""
			}
			writeError(w, status, typ, param, "", msg)
			return
		}
	}
	sum := sha256.Sum256(body)
	out := len(strings.Fields(content))
	c := completion{
		ID:     "chatcmpl-" + hex.EncodeToString(sum[:12]),
		Object: "chat.completion",
		Model:  s.model,
		Usage:  usage{PromptTokens: words, CompletionTokens: n * out, TotalTokens: words + n*out},
	}
	if req.Stream {
		stream(w, c, n, content, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	// The model is deterministic: every choice is the same answer.
	for i := range n {
		c.Choices = append(c.Choices, choice{Index: i, Message: answer{Role: "assistant", Content: content},
			FinishReason: "stop", Logprobs: json.RawMessage("null")})
	}
	writeJSON(w, http.StatusOK, c)
}

// noBraces keeps an explanation free of JSON objects.
func noBraces(s string) string {
	return strings.NewReplacer("{", "(", "}", ")").Replace(s)
}

// chunk is one server-sent event of a streamed completion.
type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        delta           `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// stream answers c as server-sent events in OpenAI's chunk format: per
// choice a first chunk with the role, one with the content and a last one
// with the finish reason; then, when asked (stream_options.include_usage),
// a chunk with no choices and the usage; then "data: [DONE]".
func stream(w http.ResponseWriter, c completion, n int, content string, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(choices []chunkChoice, u *usage) {
		b, err := json.Marshal(chunk{ID: c.ID, Object: "chat.completion.chunk", Created: c.Created, Model: c.Model,
			Choices: choices, Usage: u})
		if err != nil {
			return // every field is a string or an int
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	empty, stop := "", "stop"
	null := json.RawMessage("null")
	for i := range n {
		send([]chunkChoice{{Index: i, Delta: delta{Role: "assistant", Content: &empty}, Logprobs: null}}, nil)
		send([]chunkChoice{{Index: i, Delta: delta{Content: &content}, Logprobs: null}}, nil)
		send([]chunkChoice{{Index: i, Delta: delta{}, FinishReason: &stop, Logprobs: null}}, nil)
	}
	if includeUsage {
		u := c.Usage
		send([]chunkChoice{}, &u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("the body exceeds %d bytes", maxBody)
		}
		return nil, fmt.Errorf("read the body: %w", err)
	}
	if len(b) == 0 {
		return nil, errors.New("empty body: want a chat-completion request")
	}
	return b, nil
}

// lastUser returns the text of the last user message and the number of
// words in all messages.
func lastUser(ms []message) (string, int, error) {
	if len(ms) == 0 {
		return "", 0, errors.New("messages is empty")
	}
	var last string
	found := false
	words := 0
	for i, m := range ms {
		t, err := m.text()
		if err != nil {
			return "", 0, fmt.Errorf("messages[%d]: %w", i, err)
		}
		words += len(strings.Fields(t))
		if m.Role == "user" {
			last, found = t, true
		}
	}
	if !found {
		return "", 0, errors.New("messages has no user message")
	}
	return last, words, nil
}

// score returns the answer's content, or an HTTP status and message.
func (s *server) score(ctx context.Context, p openaiwm.Prompt, key string) (string, int, string) {
	task, err := s.tasks.Task(ctx, p.Suite, p.TaskID)
	if err != nil {
		if backend.IsPermanent(err) {
			return "", http.StatusBadRequest, fmt.Sprintf("task %s of suite %d: %v", p.TaskID, p.Suite, err)
		}
		return "", http.StatusInternalServerError, fmt.Sprintf("task %s of suite %d: %v", p.TaskID, p.Suite, err)
	}
	ps, err := s.wm.Score(ctx, []backend.ScoreItem{{Task: task, Solution: p.Solution, Key: key}})
	switch {
	case backend.IsPermanent(err):
		// The model cannot read the program: the ladder's malformed.
		return `{"status": "malformed"}`, http.StatusOK, ""
	case err != nil:
		return "", http.StatusInternalServerError, fmt.Sprintf("world model: %v", err)
	case len(ps) != 1:
		return "", http.StatusInternalServerError, fmt.Sprintf("world model: %d predictions for 1 item", len(ps))
	case !ps[0].Graded:
		return Ungraded, http.StatusOK, ""
	}
	var v any = struct {
		Score float64 `json:"score"`
	}{ps[0].Score}
	if p.Action != "" {
		v = Outcome(ps[0])
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", http.StatusInternalServerError, fmt.Sprintf("world model: score %v: %v", ps[0].Score, err)
	}
	return string(b), http.StatusOK, ""
}

// Answer is the reference's world-model answer (its guided-JSON shape:
// ml_research/world_model/server.py, HOLI_SCHEMA): a reason and the ranked
// predicted outcomes.
type Answer struct {
	Reason      string       `json:"reason"`
	Predictions []Prediction `json:"predictions"`
}

// Prediction is one predicted outcome of the reference's answer.
type Prediction struct {
	Status        string  `json:"status"`
	ErrorType     string  `json:"error_type"`
	ErrorLine     int     `json:"error_line"`
	QualityBucket string  `json:"quality_bucket"`
	EnvFeedback   string  `json:"env_feedback"`
	Confidence    float64 `json:"confidence"`
}

// refStatus is the reference's word for a ladder status.
var refStatus = map[executor.Status]string{
	executor.StatusOK:             "valid",
	executor.StatusInvalidOutput:  "ran_no_sub",
	executor.StatusRuntimeError:   "runtime_err",
	executor.StatusTimeout:        "runtime_err",
	executor.StatusMemory:         "runtime_err",
	executor.StatusInvalidProgram: "syntax_err",
}

// Outcome is a graded prediction as the reference's answer: one
// prediction, the status of the rung its score falls on (or its own
// status), for a valid one the bucket of its position 2·score − 1
// (openaiwm.QualityBucket), the ladder's description of the status as the
// env_feedback (or its own feedback). The model is deterministic, so its
// one prediction has confidence 1 and no hedge.
func Outcome(p backend.Prediction) Answer {
	a := turns.WorldModelAnswer(p)
	st, ok := refStatus[executor.Status(a.Status)]
	if !ok {
		st = "runtime_err"
	}
	out := Prediction{Status: st, EnvFeedback: a.Feedback, Confidence: 1}
	if st == "valid" {
		out.QualityBucket = openaiwm.QualityBucket(min(1, max(0, 2*a.Score-1)))
	}
	return Answer{Reason: "predicted from the task's features and the program by the built-in world model",
		Predictions: []Prediction{out}}
}
