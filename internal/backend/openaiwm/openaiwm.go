package openaiwm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"text/template"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"golang.org/x/sync/errgroup"

	"github.com/wmrl/wmrl/internal/backend"
)

// WorldModel scores solutions by asking a language model served over the
// OpenAI chat-completions protocol. It is safe for concurrent use; at most
// Config.Concurrency requests are in flight across all its Score calls.
type WorldModel struct {
	cfg   Config
	key   Key
	tmpl  *template.Template
	turn  *template.Template // for items with an Action
	chat  openai.ChatCompletionService
	cache Cache
	sem   chan struct{}

	mu    sync.Mutex
	usage Usage
}

var _ backend.WorldModel = (*WorldModel)(nil)

// Usage counts what a WorldModel did since New.
type Usage struct {
	// Calls is the chat completions answered (retries of one call by the
	// client count once); CacheHits the items answered from the cache;
	// Skipped the items scored without a call (empty solutions);
	// Unparsed the calls whose answer held no prediction (ParseAnswer's
	// error), which are ungraded.
	Calls, CacheHits, Skipped, Unparsed int
	// LastUnparsed is why the latest unparsed answer held no prediction.
	LastUnparsed string
	// PromptTokens and CompletionTokens are the tokens of Calls, as the
	// server reported them.
	PromptTokens, CompletionTokens int64
}

// New returns the world model of c (which must Validate) with the API key
// key (LoadKey; the zero Key sends none) and a cache (nil: a new Memory).
func New(c Config, key Key, cache Cache) (*WorldModel, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	tmpl, err := parseTemplate(c.Template)
	if err != nil {
		return nil, fmt.Errorf("%s.template: %w", Field, err)
	}
	turn, err := parseNamed(c.Template, DefaultTurnTemplate)
	if err != nil {
		return nil, fmt.Errorf("%s.template: %w", Field, err)
	}
	if cache == nil {
		cache = &Memory{}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = c.Concurrency
	// NewChatCompletionService, unlike NewClient, reads nothing from the
	// environment (OPENAI_BASE_URL, OPENAI_ORG_ID, ...): the run config
	// and the key decide everything.
	opts := []option.RequestOption{
		option.WithHTTPClient(&http.Client{Transport: transport}),
		option.WithBaseURL(c.BaseURL),
		option.WithMaxRetries(c.MaxRetries),
		option.WithRequestTimeout(c.Timeout),
	}
	if key.Set() {
		opts = append(opts, option.WithAPIKey(key.value()))
	}
	return &WorldModel{cfg: c, key: key, tmpl: tmpl, turn: turn, chat: openai.NewChatCompletionService(opts...), cache: cache,
		sem: make(chan struct{}, c.Concurrency)}, nil
}

// String describes the world model (its Config and where its key came
// from, never the key).
func (w *WorldModel) String() string { return w.cfg.String() + ", " + w.key.String() }

// Format prints String for every verb.
func (w *WorldModel) Format(f fmt.State, verb rune) { fmt.Fprint(f, w.String()) }

// Usage returns the counts since New.
func (w *WorldModel) Usage() Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.usage
}

// Score predicts each item: an empty solution is 0 without a call, an
// answer in the cache is used as is, and every other item is one chat
// completion (at most Config.Concurrency at once), whose parsed answer and
// token usage are cached before Score returns. A turn's item (Action
// backend.ActionExecuteCode) is asked with DefaultTurnTemplate and its
// prediction carries the answer's status and env_feedback; an item whose
// action is backend.ActionRequestInfo, or unknown, is a permanent error
// (the reference answers request_info from the task's data files, which
// this adapter does not have). Prediction.Tokens is the
// prompt and completion tokens of the call that answered the item (0 when
// there was none). The first failure cancels the others and is returned.
func (w *WorldModel) Score(ctx context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	out := make([]backend.Prediction, len(items))
	g, ctx := errgroup.WithContext(ctx)
	for _, it := range items {
		if it.Action != "" && it.Action != backend.ActionExecuteCode {
			return nil, backend.Permanent(fmt.Errorf("%s: %s: action %q: this world model answers only %q (request_info "+
				"needs the task's data files)", Field, it.Key, it.Action, backend.ActionExecuteCode))
		}
	}
	for i, it := range items {
		if strings.TrimSpace(it.Solution) == "" {
			// A malformed program: the ladder's 0, no call needed.
			out[i] = backend.Prediction{Graded: true, Score: 0}
			w.count(func(u *Usage) { u.Skipped++ })
			continue
		}
		g.Go(func() error {
			p, err := w.scoreOne(ctx, it)
			if err != nil {
				return fmt.Errorf("%s: world model: %w", it.Key, err)
			}
			out[i] = p
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func (w *WorldModel) count(f func(*Usage)) {
	w.mu.Lock()
	f(&w.usage)
	w.mu.Unlock()
}

// Request returns the request of an item and the SHA-256 (hex) of its
// body, the item's cache key under the model.
func (w *WorldModel) Request(it backend.ScoreItem) (openai.ChatCompletionNewParams, string, error) {
	t := w.tmpl
	if it.Action != "" {
		t = w.turn
	}
	text, err := Render(t, it)
	if err != nil {
		return openai.ChatCompletionNewParams{}, "", err
	}
	p := openai.ChatCompletionNewParams{
		Model:       w.cfg.Model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
		Temperature: openai.Float(w.cfg.Temperature),
	}
	if w.cfg.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(int64(w.cfg.MaxTokens))
	}
	if !w.cfg.NoSeed {
		p.Seed = openai.Int(w.cfg.Seed)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return openai.ChatCompletionNewParams{}, "", fmt.Errorf("encode request: %w", err)
	}
	sum := sha256.Sum256(body)
	return p, hex.EncodeToString(sum[:]), nil
}

func (w *WorldModel) scoreOne(ctx context.Context, it backend.ScoreItem) (backend.Prediction, error) {
	params, key, err := w.Request(it)
	if err != nil {
		return backend.Prediction{}, backend.Permanent(err)
	}
	if e, ok, err := w.cache.Get(ctx, w.cfg.Model, key); err != nil {
		return backend.Prediction{}, fmt.Errorf("read the answer cache: %w", err)
	} else if ok {
		w.count(func(u *Usage) { u.CacheHits++ })
		return withTokens(e), nil
	}

	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return backend.Prediction{}, ctx.Err()
	}
	var raw *http.Response
	resp, err := w.chat.New(ctx, params, option.WithResponseInto(&raw),
		option.WithHeader("X-Client-Request-Id", requestID(it.Key)))
	<-w.sem
	if err != nil {
		return backend.Prediction{}, w.classify(ctx, err, raw)
	}

	e := Entry{PromptTokens: int(resp.Usage.PromptTokens), CompletionTokens: int(resp.Usage.CompletionTokens)}
	reason := errors.New("no choice in the answer")
	if len(resp.Choices) > 0 {
		m := resp.Choices[0].Message
		// Only the answer counts: reasoning_content (vLLM, SGLang) and a
		// refusal hold no prediction.
		reason = errors.New("the model refused")
		if m.Refusal == "" {
			e.Prediction, reason = ParseAnswer(m.Content)
		}
	}
	w.count(func(u *Usage) {
		u.Calls++
		if reason != nil {
			u.Unparsed++
			u.LastUnparsed = reason.Error()
		}
		u.PromptTokens += int64(e.PromptTokens)
		u.CompletionTokens += int64(e.CompletionTokens)
	})
	stored, err := w.cache.Add(ctx, w.cfg.Model, key, e)
	if err != nil {
		return backend.Prediction{}, fmt.Errorf("store the answer: %w", err)
	}
	return withTokens(stored), nil
}

func withTokens(e Entry) backend.Prediction {
	p := e.Prediction
	if !p.Graded {
		p.Score = 0
	}
	p.Tokens = e.PromptTokens + e.CompletionTokens
	return p
}

// requestID is the item's key as a header value (printable ASCII, bounded).
func requestID(key string) string {
	var b strings.Builder
	for _, r := range key {
		if b.Len() >= 200 {
			break
		}
		if r > ' ' && r <= '~' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// classify turns a failed call into an error as package backend wants it:
// permanent for what retrying cannot fix (4xx but 408, 409 and 429, which
// the client already retried), plain otherwise. Messages name the field to
// fix and the URL, never the key.
func (w *WorldModel) classify(ctx context.Context, err error, raw *http.Response) error {
	url := strings.TrimSuffix(w.cfg.BaseURL, "/") + "/chat/completions"
	status := 0
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		status = apiErr.StatusCode
	} else if raw != nil {
		status = raw.StatusCode
	}
	if status == 0 || status < 400 {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("%s: no answer from %s within %s.timeout_seconds (%v)", Field, url, Field,
				w.cfg.Timeout.Seconds())
		}
		return fmt.Errorf("%s: POST %s: %s", Field, url, w.key.redact(err.Error()))
	}
	detail := http.StatusText(status)
	if apiErr != nil && apiErr.Message != "" {
		msg := apiErr.Message
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		detail += ": " + w.key.redact(msg)
	}
	what := fmt.Sprintf("%s answered %d %s", url, status, detail)
	switch {
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooManyRequests ||
		status >= 500:
		return fmt.Errorf("%s: %s (after %d retries)", Field, what, w.cfg.MaxRetries)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return backend.Permanent(fmt.Errorf("%s: %s; %s", Field, what, w.key.hint()))
	case status == http.StatusNotFound:
		return backend.Permanent(fmt.Errorf("%s: %s; check %s.model (%q) and %s.base_url (the root of the "+
			"OpenAI-compatible API, usually ending in /v1)", Field, what, Field, w.cfg.Model, Field))
	default:
		field := "model, temperature, max_tokens and seed"
		if apiErr != nil {
			field = paramField(apiErr.Param, field)
		}
		return backend.Permanent(fmt.Errorf("%s: %s; check %s.%s", Field, what, Field, field))
	}
}

// paramField names the config field of a request parameter the server
// complained about.
func paramField(param, otherwise string) string {
	switch param {
	case "model":
		return "model"
	case "temperature":
		return "temperature"
	case "max_tokens", "max_completion_tokens":
		return "max_tokens"
	case "seed":
		return "seed (or set no_seed)"
	case "messages":
		return "template"
	}
	return otherwise
}
