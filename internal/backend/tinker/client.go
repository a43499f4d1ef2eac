package tinker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/wmrl/wmrl/internal/backend"
)

// maxBody bounds a response body.
const maxBody = 64 << 20

// firstPoll is the first wait between two polls of a future.
const firstPoll = 50 * time.Millisecond

// sessionBeat is how often a waiting client sends a session heartbeat.
const sessionBeat = 10 * time.Second

// statusError is a non-2xx answer.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.msg) }

// transient reports whether a status is worth retrying.
func transient(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
}

// post sends body to path and decodes a 2xx answer into out, retrying
// transient failures (connection errors, 408, 429, 5xx) with backoff. Other
// answers are a *backend.PermanentError. Errors name the backend and the URL
// without credentials, and never hold the key.
func (p *Policy) post(ctx context.Context, path string, body any, idem string, out any) error {
	status, raw, err := p.roundTrip(ctx, path, body, idem, false)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return p.fail(path, &statusError{status: status, msg: p.redact(errorMessage(raw))})
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return backend.Permanent(p.wrap(path, fmt.Errorf("decode answer: %w", err)))
	}
	return nil
}

// roundTrip sends one request with retries; with poll, a 408 is returned
// to the caller (retrieve_future's "not done yet") instead of retried.
func (p *Policy) roundTrip(ctx context.Context, path string, body any, idem string, poll bool) (int, []byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, backend.Permanent(p.wrap(path, fmt.Errorf("encode request: %w", err)))
	}
	delay := 100 * time.Millisecond
	var last error
	for attempt := 0; ; attempt++ {
		status, raw, err := p.once(ctx, path, data, idem)
		switch {
		case err == nil && (!transient(status) || (poll && status == http.StatusRequestTimeout)):
			return status, raw, nil
		case err == nil:
			last = &statusError{status: status, msg: p.redact(errorMessage(raw))}
		case ctx.Err() != nil:
			return 0, nil, p.wrap(path, ctx.Err())
		case poll && errors.Is(err, context.DeadlineExceeded):
			// A long poll that outlived RequestTimeout: not done yet.
			return http.StatusRequestTimeout, nil, nil
		default:
			last = err
		}
		if attempt >= p.cfg.Retries {
			return 0, nil, p.wrap(path, fmt.Errorf("after %d attempts: %w", attempt+1, last))
		}
		if err := sleep(ctx, delay); err != nil {
			return 0, nil, p.wrap(path, err)
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func (p *Policy) once(ctx context.Context, path string, data []byte, idem string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+path, bytes.NewReader(data))
	if err != nil {
		return 0, nil, errors.New("build request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if !p.cfg.APIKey.IsZero() {
		req.Header.Set(HeaderAPIKey, p.cfg.APIKey.v)
	}
	if idem != "" {
		req.Header.Set(HeaderIdempotencyKey, idem)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		// A *url.Error repeats the URL, which has no credentials (Validate
		// refuses them); keep only its cause.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			return 0, nil, ue.Unwrap()
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, raw, nil
}

// wait polls a future until it is done and decodes its result into out.
// It polls again on a try_again answer and on HTTP 408, backing off from
// 50ms to PollMax, heartbeats the activity (when ctx is an activity's) and
// the session while it waits.
func (p *Policy) wait(ctx context.Context, requestID string, out any) error {
	delay := firstPoll
	for {
		status, raw, err := p.roundTrip(ctx, PathRetrieveFuture, RetrieveFutureRequest{RequestID: requestID}, "", true)
		if err != nil {
			return err
		}
		again := status == http.StatusRequestTimeout
		if !again {
			if status/100 != 2 {
				return p.fail(PathRetrieveFuture, fmt.Errorf("future %s: %w", requestID, &statusError{status: status, msg: p.redact(errorMessage(raw))}))
			}
			var head struct {
				Type     string `json:"type"`
				Error    string `json:"error"`
				Category string `json:"category"`
			}
			if err := json.Unmarshal(raw, &head); err != nil {
				return backend.Permanent(p.wrap(PathRetrieveFuture, fmt.Errorf("future %s: decode answer: %w", requestID, err)))
			}
			switch {
			case head.Type == TypeTryAgain:
				again = true
			case head.Error != "":
				err := p.wrap(PathRetrieveFuture, fmt.Errorf("future %s failed (%s): %s", requestID, head.Category, p.redact(head.Error)))
				if head.Category == "user" {
					return backend.Permanent(err)
				}
				return err
			default:
				if err := json.Unmarshal(raw, out); err != nil {
					return backend.Permanent(p.wrap(PathRetrieveFuture, fmt.Errorf("future %s: decode result: %w", requestID, err)))
				}
				return nil
			}
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, requestID)
		}
		p.heartbeatSession(ctx)
		if err := sleep(ctx, delay); err != nil {
			return p.wrap(PathRetrieveFuture, err)
		}
		delay = min(2*delay, p.cfg.PollMax)
	}
}

// ensureSession opens the client's session once.
func (p *Policy) ensureSession(ctx context.Context) (string, error) {
	p.mu.Lock()
	s := p.session
	p.mu.Unlock()
	if s != "" {
		return s, nil
	}
	var out CreateSessionResponse
	err := p.post(ctx, PathCreateSession, CreateSessionRequest{Tags: []string{"wmrl"}, SDKVersion: SDKVersion, Type: TypeCreateSession}, "", &out)
	if err != nil {
		return "", err
	}
	if out.SessionID == "" {
		return "", backend.Permanent(p.wrap(PathCreateSession, errors.New("no session_id in the answer")))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.session == "" {
		p.session, p.beat = out.SessionID, time.Now()
	}
	return p.session, nil
}

// heartbeatSession keeps the session alive while the client waits; a
// failed heartbeat is ignored (the next request fails if it matters).
func (p *Policy) heartbeatSession(ctx context.Context) {
	p.mu.Lock()
	s := p.session
	due := s != "" && time.Since(p.beat) >= sessionBeat
	if due {
		p.beat = time.Now()
	}
	p.mu.Unlock()
	if due {
		var out json.RawMessage
		_ = p.post(ctx, PathSessionHeartbeat, SessionHeartbeatRequest{SessionID: s, Type: TypeSessionHeartbeat}, "", &out)
	}
}

// SDKVersion is the sdk_version wmrl reports.
const SDKVersion = "wmrl-go/1"

// fail wraps an HTTP error: permanent for a non-transient status.
func (p *Policy) fail(path string, err error) error {
	var se *statusError
	if errors.As(err, &se) && !transient(se.status) {
		return backend.Permanent(p.wrap(path, err))
	}
	return p.wrap(path, err)
}

// wrap names the backend and URL, and removes the key from the message.
func (p *Policy) wrap(path string, err error) error {
	return &redactedError{msg: p.redact(fmt.Sprintf("tinker %s: %v", redactURL(p.base+path), err)), err: err}
}

// redactedError is an error whose message is redacted; it still unwraps to
// its cause (for errors.Is(ctx.Err()) and the like).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact replaces the key in s (a server may echo request headers).
func (p *Policy) redact(s string) string {
	if k := p.cfg.APIKey.v; k != "" {
		s = strings.ReplaceAll(s, k, Redacted)
	}
	return s
}

// errorMessage extracts a short message from an error body.
func errorMessage(raw []byte) string {
	var e ErrorResponse
	if json.Unmarshal(raw, &e) == nil {
		switch {
		case e.Error != "" && e.Field != "":
			return e.Field + ": " + e.Error
		case e.Error != "":
			return e.Error
		case len(e.Detail) > 0:
			return clip(string(e.Detail))
		}
	}
	return clip(strings.TrimSpace(string(raw)))
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
