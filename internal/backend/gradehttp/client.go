package gradehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/wmrl/wmrl/internal/backend"
)

// Name is the backend's name, as the run config will spell it
// (sandbox.kind, world_model.backend) and as errors start.
const Name = "grade-http"

// TokenEnv names the environment variable holding the bearer token of the
// grading services (DefaultConfig reads it; wmrl serve requires it when set).
const TokenEnv = "WMRL_GRADER_TOKEN"

// Defaults of Config.
const (
	// DefaultTimeout bounds one HTTP attempt: a batch may run programs
	// for minutes.
	DefaultTimeout = 10 * time.Minute
	// DefaultRetries is how many times a connection error, a 5xx or a
	// 429 is retried before the error is returned.
	DefaultRetries  = 2
	defaultWaitMin  = 500 * time.Millisecond
	defaultWaitMax  = 10 * time.Second
	maxResponseBody = 64 << 20
)

// redacted is what a Token prints as.
const redacted = "[redacted]"

// Token is a bearer token. It prints (%v, %s, %+v, %#v) and marshals (JSON,
// text) as "[redacted]", so a logged or recorded Config does not leak it.
type Token string

func (Token) String() string   { return redacted }
func (Token) GoString() string { return redacted }

// MarshalText makes JSON, YAML and zap's reflection encoders write
// "[redacted]".
func (Token) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Config configures a Client.
type Config struct {
	// URL is the service's base URL (http or https, no credentials):
	// /health and /grade are under it, e.g. "http://10.0.0.5:8089" or
	// "http://10.0.0.5:8089/worldmodel".
	URL string
	// Token, when set, is sent as "Authorization: Bearer TOKEN".
	Token Token
	// Timeout bounds each HTTP attempt (0: DefaultTimeout); the context
	// bounds the whole call.
	Timeout time.Duration
	// Retries is how many times a retryable failure is retried (0:
	// DefaultRetries; negative: none), waiting RetryWaitMin, doubling up
	// to RetryWaitMax (0: 500ms and 10s), or what Retry-After asks
	// within RetryWaitMax.
	Retries                    int
	RetryWaitMin, RetryWaitMax time.Duration
	// HTTPClient is the client to use (nil: a pooled one); its Timeout is
	// replaced by Timeout.
	HTTPClient *http.Client
}

// DefaultConfig is the configuration of a service at url, with the token of
// $WMRL_GRADER_TOKEN.
func DefaultConfig(url string) Config {
	return Config{URL: url, Token: Token(os.Getenv(TokenEnv))}
}

// Client is a grading service (backend.Grader) or a world-model service
// (backend.WorldModel) speaking the /grade protocol. It is safe for
// concurrent use.
type Client struct {
	base             string // without a trailing slash
	token            Token
	retries          int
	waitMin, waitMax time.Duration
	http             *http.Client
}

var (
	_ backend.Grader     = (*Client)(nil)
	_ backend.WorldModel = (*Client)(nil)
)

// New returns a client of the service cfg names. An invalid URL is an
// error naming it (without credentials).
func New(cfg Config) (*Client, error) {
	base, err := checkURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: base, token: cfg.Token, retries: cfg.Retries, waitMin: cfg.RetryWaitMin, waitMax: cfg.RetryWaitMax}
	switch {
	case c.retries == 0:
		c.retries = DefaultRetries
	case c.retries < 0:
		c.retries = 0
	}
	if c.waitMin <= 0 {
		c.waitMin = defaultWaitMin
	}
	if c.waitMax <= 0 {
		c.waitMax = defaultWaitMax
	}
	c.waitMax = max(c.waitMax, c.waitMin)
	if strings.ContainsAny(string(cfg.Token), "\r\n") {
		return nil, errors.New("token: contains a line break")
	}
	hc := cleanhttp.DefaultPooledClient()
	if cfg.HTTPClient != nil {
		cp := *cfg.HTTPClient
		hc = &cp
	}
	hc.Timeout = cfg.Timeout
	if hc.Timeout <= 0 {
		hc.Timeout = DefaultTimeout
	}
	c.http = hc
	return c, nil
}

// checkURL returns the base URL without a trailing slash, or an error
// naming what is wrong with it.
func checkURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("url: empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL, credentials included.
		return "", errors.New("url: not a URL")
	}
	switch {
	case u.User != nil:
		return "", fmt.Errorf("url %s: credentials in the URL are refused; set $%s", u.Redacted(), TokenEnv)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("url %s: scheme %q, want http or https", u.Redacted(), u.Scheme)
	case u.Host == "":
		return "", fmt.Errorf("url %s: no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("url %s: a base URL has no query or fragment", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// String names the client for messages: the backend and its URL.
func (c *Client) String() string { return Name + " " + c.base }

// URL returns the service's base URL.
func (c *Client) URL() string { return c.base }

// Grade sends the items to POST /grade, each with its action (execute_code
// or request_info), and reads one grade per item, the result's feedback as
// its Feedback. An item without an idempotency key is refused (a service
// that grades a key once would merge them), as is an unknown action.
func (c *Client) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	if len(req.Items) == 0 {
		return []backend.Grade{}, nil
	}
	lim := LimitsOf(req.Limits)
	items := make([]Item, len(req.Items))
	for i, it := range req.Items {
		if it.Key == "" {
			return nil, backend.Permanent(fmt.Errorf("%s: item %d (task %s): no idempotency key", c, i, it.Task.ID))
		}
		action, err := actionOf(it.Action)
		if err != nil {
			return nil, backend.Permanent(fmt.Errorf("%s: item %d (%s): %w", c, i, it.Key, err))
		}
		items[i] = Item{ID: it.Key, RequestID: it.Key, Action: action, Task: it.Task.ID, Suite: &it.Task.Suite,
			Code: it.Solution, Seed: it.Seed, Overview: Overview(it.Task), Budget: req.Budget, Limits: lim}
	}
	results, err := c.grade(ctx, items)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Grade, len(results))
	for i, r := range results {
		if out[i], err = r.grade(); err != nil {
			return nil, c.itemError(i, items[i], err)
		}
	}
	return out, nil
}

// Score sends the items to a world-model service's POST /grade: the
// predicted reward of a verdict is the score, its status and feedback the
// predicted outcome; a result without a verdict is an ungraded
// prediction.
func (c *Client) Score(ctx context.Context, in []backend.ScoreItem) ([]backend.Prediction, error) {
	if len(in) == 0 {
		return []backend.Prediction{}, nil
	}
	items := make([]Item, len(in))
	for i, it := range in {
		if it.Key == "" {
			return nil, backend.Permanent(fmt.Errorf("%s: item %d (task %s): no idempotency key", c, i, it.Task.ID))
		}
		action, err := actionOf(it.Action)
		if err != nil {
			return nil, backend.Permanent(fmt.Errorf("%s: item %d (%s): %w", c, i, it.Key, err))
		}
		items[i] = Item{ID: it.Key, RequestID: it.Key, Action: action, Task: it.Task.ID, Suite: &it.Task.Suite,
			Code: it.Solution, Overview: Overview(it.Task)}
	}
	results, err := c.grade(ctx, items)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Prediction, len(results))
	for i, r := range results {
		g, err := r.grade()
		if err != nil {
			return nil, c.itemError(i, items[i], err)
		}
		out[i] = backend.Prediction{Graded: g.Graded, Score: g.Score}
		if g.Graded {
			// The service's predicted outcome, for a turn's observation.
			out[i].Status, out[i].Feedback = g.Status, g.Feedback
		}
	}
	return out, nil
}

func (c *Client) itemError(i int, it Item, err error) error {
	return c.errorf(PathGrade, "item %d (%s): %w", i, it.ID, err)
}

// errorf is an error about an endpoint, starting with the backend and the
// endpoint's URL.
func (c *Client) errorf(path, format string, args ...any) error {
	return fmt.Errorf("%s %s%s: "+format, append([]any{Name, c.base, path}, args...)...)
}

// grade posts the items and returns one result per item, in order, each
// echoing its item's id if it has one.
func (c *Client) grade(ctx context.Context, items []Item) ([]Result, error) {
	body, err := json.Marshal(Request{Items: items})
	if err != nil {
		return nil, backend.Permanent(fmt.Errorf("%s: encode request: %w", c, err))
	}
	answer, err := c.do(ctx, http.MethodPost, PathGrade, body)
	if err != nil {
		return nil, err
	}
	results, err := decodeResults(answer)
	if err != nil {
		return nil, c.errorf(PathGrade, "%s", clip(c.redact(err.Error())))
	}
	if len(results) != len(items) {
		return nil, c.errorf(PathGrade, "answered %s for %s", plural(len(results), "result"), plural(len(items), "item"))
	}
	for i, r := range results {
		if r.ID != "" && r.ID != items[i].ID {
			return nil, c.itemError(i, items[i], fmt.Errorf("answer for id %q: results out of order", clip(r.ID)))
		}
	}
	return results, nil
}

// Capacity asks GET /health how many items the service grades at once.
func (c *Client) Capacity(ctx context.Context) (int, error) {
	body, err := c.do(ctx, http.MethodGet, PathHealth, nil)
	if err != nil {
		return 0, err
	}
	var h Health
	if err := json.Unmarshal(body, &h); err != nil {
		return 0, c.errorf(PathHealth, "%s", clip(c.redact(err.Error())))
	}
	switch {
	case h.Capacity == nil:
		return 0, c.errorf(PathHealth, "no capacity in the answer")
	case *h.Capacity < 0:
		return 0, c.errorf(PathHealth, "capacity %d", *h.Capacity)
	}
	return *h.Capacity, nil
}

// Preflight checks the limits' static bounds (the service checks its own)
// and that the service answers /health with a capacity of at least 1.
func (c *Client) Preflight(ctx context.Context, l backend.Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	n, err := c.Capacity(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return c.errorf(PathHealth, "capacity 0: the service grades nothing now")
	}
	return nil
}

// do sends one request, retrying what is retryable, and returns the body of
// a 2xx answer. Other answers are errors (see the package doc).
func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	where := Name + " " + method + " " + c.base + path
	var raw any
	if body != nil {
		raw = body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, c.base+path, raw)
	if err != nil {
		return nil, backend.Permanent(fmt.Errorf("%s: %w", where, err))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "wmrl-"+Name)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+string(c.token))
	}
	attempts := 0
	rc := &retryablehttp.Client{
		HTTPClient:     c.http,
		RetryWaitMin:   c.waitMin,
		RetryWaitMax:   c.waitMax,
		RetryMax:       c.retries,
		CheckRetry:     checkRetry,
		Backoff:        c.backoff,
		ErrorHandler:   retryablehttp.PassthroughErrorHandler,
		RequestLogHook: func(retryablehttp.Logger, *http.Request, int) { attempts++ },
	}
	resp, err := rc.Do(req)
	if err != nil {
		if resp != nil { // the context ended after an answer
			resp.Body.Close()
		}
		return nil, fmt.Errorf("%s (%s): %w", where, plural(attempts, "attempt"), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", where, err)
	}
	if len(answer) > maxResponseBody {
		return nil, fmt.Errorf("%s: answer longer than %d bytes", where, maxResponseBody)
	}
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return answer, nil
	}
	err = fmt.Errorf("%s: %s (%s)%s", where, resp.Status, plural(attempts, "attempt"), c.message(answer))
	if code >= 400 && code < 500 && !retryableStatus(code) {
		return nil, backend.Permanent(err)
	}
	return nil, err
}

// retryableStatus reports whether an answer's status says to try again.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout ||
		(code >= 500 && code != http.StatusNotImplemented)
}

// checkRetry retries connection errors (not a timeout: the service may
// still be grading) and retryable statuses, never past the context.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, nil
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	return retryableStatus(resp.StatusCode), nil
}

// backoff is retryablehttp's (exponential, or Retry-After on 429 and 503),
// never longer than waitMax.
func (c *Client) backoff(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
	return min(retryablehttp.DefaultBackoff(lo, hi, n, resp), c.waitMax)
}

// message is the gist of an error answer for an error message: its "error"
// field, or its text, on one line, clipped, without the token.
func (c *Client) message(body []byte) string {
	var e ErrorBody
	msg := string(bytes.TrimSpace(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	msg = strings.Join(strings.Fields(c.redact(msg)), " ")
	if msg == "" {
		return ""
	}
	return ": " + clip(msg)
}

// redact removes the token from a message (a service might echo it).
func (c *Client) redact(msg string) string {
	if c.token == "" {
		return msg
	}
	return strings.ReplaceAll(msg, string(c.token), redacted)
}

// clip shortens a string quoted from an answer.
func clip(s string) string {
	const n = 300
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
