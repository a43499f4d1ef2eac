package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
)

func TestUIOptions(t *testing.T) {
	t.Setenv(envUIClientSecret, "s3cret")
	auth := []string{"--ui-write-actions", "--ui-auth-provider-url", "https://idp.example", "--ui-auth-client-id", "wmrl-ui",
		"--ui-auth-callback-url", "http://127.0.0.1:8233/auth/sso/callback"}
	tests := []struct {
		give    []string
		check   func(serveOptions) bool
		wantErr string
	}{
		{give: nil, check: func(o serveOptions) bool {
			return o.UI.IP == "127.0.0.1" && !o.UI.Writes && !o.UI.Auth.enabled() && o.UI.mode() == "read-only"
		}},
		// --ip auto binds the frontend to the host's address; the UI stays on loopback.
		{give: []string{"--ip", "auto"}, check: func(o serveOptions) bool { return o.IP != "127.0.0.1" && o.UI.IP == "127.0.0.1" }},
		{give: []string{"--ip", "auto", "--ui-ip", "auto"}, check: func(o serveOptions) bool { return o.UI.IP == o.IP }},
		{give: []string{"--ui-ip", "0.0.0.0"}, check: func(o serveOptions) bool {
			return o.UIURL() == "http://127.0.0.1:8233/namespaces/default/workflows" && o.UIAddress() == "0.0.0.0:8233"
		}},
		{give: []string{"--ui-ip", "::1"}, wantErr: "--ui-ip"},
		{give: []string{"--ui-write-actions"}, wantErr: "--ui-write-actions needs the Web UI's authentication"},
		{give: []string{"--ui-auth-client-id", "x"}, wantErr: "without --ui-auth-provider-url"},
		{give: auth, check: func(o serveOptions) bool {
			return o.UI.Writes && o.UI.Auth.ClientSecret == "s3cret" && o.UI.mode() == "writes+oidc" &&
				strings.Join(o.UI.scopes(), " ") == "openid profile email"
		}},
		{give: append(auth[1:], "--ui-port", "0"), wantErr: "no UI"},
		{give: append(auth, "--ui-auth-callback-url", "ftp://x/cb"), wantErr: "--ui-auth-callback-url"},
		{give: append(auth, "--ui-auth-client-id", ""), wantErr: "--ui-auth-client-id: empty"},
		{give: append(auth, "--ui-auth-scopes", " , "), wantErr: "--ui-auth-scopes: empty"},
	}
	for _, tt := range tests {
		got, err := parseServe(tt.give, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseServe(%q) error = %v, want it to contain %q", tt.give, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseServe(%q): %v", tt.give, err)
			continue
		}
		if !tt.check(got) {
			t.Errorf("parseServe(%q) = %+v", tt.give, got.UI)
		}
	}
	// The secret never reaches an error or the ready line's mode.
	_, err := parseServe(append(auth, "--ui-auth-scopes", ""), io.Discard)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v", err)
	}
}

// devServer is a dev server started by a test on free ports, mutual TLS on, as in the
// deployments.
type devServer struct {
	frontend *frontendClient
	ui       string // http://127.0.0.1:PORT
	uiPort   int
}

func startDevServer(t *testing.T, uiPort int, extra ...string) devServer {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	p := newPKI(t)
	const ip = "127.0.0.1"
	port, err := freePort(ip)
	if err != nil {
		t.Fatal(err)
	}
	if uiPort == 0 {
		if uiPort, err = freePort(ip); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncBuffer
	done := make(chan error, 1)
	args := append([]string{"--ip", ip, "--port", fmt.Sprint(port), "--ui-port", fmt.Sprint(uiPort),
		"--db", filepath.Join(t.TempDir(), "dev.db"), "--log-level", "error",
		"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CA}, extra...)
	go func() { done <- serveUntil(ctx, args, &stdout, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("serve did not stop within a minute")
		}
	})
	deadline := time.After(3 * time.Minute)
	for !strings.Contains(stdout.String(), "temporal-dev: ready") {
		select {
		case err := <-done:
			done <- nil
			t.Fatalf("serve ended before ready: %v (stdout %q)", err, stdout.String())
		case <-deadline:
			t.Fatalf("not ready after 3 minutes (stdout %q)", stdout.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("%s", strings.TrimSpace(stdout.String()))
	conf, err := clientTLS{CA: p.CA, Cert: p.ClientCert, Key: p.ClientKey}.config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(net.JoinHostPort(ip, fmt.Sprint(port)), conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return devServer{frontend: c, ui: fmt.Sprintf("http://%s:%d", ip, uiPort), uiPort: uiPort}
}

// startProbe starts a workflow on a task queue no worker polls, so it stays running.
func (s devServer) startProbe(t *testing.T, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := s.frontend.workflow.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace: defaultNamespace, WorkflowId: id, RequestId: id + "-start",
		WorkflowType: &commonpb.WorkflowType{Name: "UIWriteProbe"},
		TaskQueue:    &taskqueuepb.TaskQueue{Name: "nobody-polls", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
	})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return resp.GetRunId()
}

func (s devServer) status(t *testing.T, id string) enumspb.WorkflowExecutionStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	d, err := s.frontend.workflow.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: defaultNamespace, Execution: &commonpb.WorkflowExecution{WorkflowId: id},
	})
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return d.GetWorkflowExecutionInfo().GetStatus()
}

// uiClient is a plain HTTP client of the Web UI holding the CSRF cookie the UI hands out
// on any page, and sending it back as the X-CSRF-TOKEN header, as the UI's own frontend
// does: a browser's requests, without a browser.
type uiClient struct {
	base string
	http *http.Client
}

func newUIClient(t *testing.T, base string) uiClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := uiClient{base: base, http: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, err := c.http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c.csrf() == "" {
		t.Fatalf("GET %s/: no _csrf cookie (%s)", base, resp.Status)
	}
	return c
}

func (c uiClient) csrf() string {
	u, _ := url.Parse(c.base)
	for _, k := range c.http.Jar.Cookies(u) {
		if k.Name == "_csrf" {
			return k.Value
		}
	}
	return ""
}

// do sends method path with body (JSON), the CSRF token, and bearer when not "".
func (c uiClient) do(t *testing.T, method, path, body, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, c.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-TOKEN", c.csrf())
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if loc := resp.Header.Get("Location"); loc != "" {
		return resp.StatusCode, loc
	}
	return resp.StatusCode, string(b)
}

// terminatePath is the UI frontend's route for terminating a workflow (its
// "workflow.terminate" route under the ui-server's /api/v1, the run in the query).
func terminatePath(id, runID string) string {
	return fmt.Sprintf("/api/v1/namespaces/%s/workflows/%s/terminate?execution.runId=%s", defaultNamespace, id, runID)
}

// TestUIReadOnly starts the dev server as the deployments run it (mutual TLS, no UI flag)
// and a workflow that stays running, then asks the Web UI from a plain HTTP client, with
// the UI's CSRF cookie and header and no client certificate, to terminate, cancel, signal
// and reset it, as the UI's frontend would. Every request is refused and the workflow is
// still running; reads still work.
func TestUIReadOnly(t *testing.T) {
	s := startDevServer(t, 0)
	const id = "ui-read-only-probe"
	runID := s.startProbe(t, id)
	c := newUIClient(t, s.ui)

	code, body := c.do(t, http.MethodGet, "/api/v1/settings", "", "")
	var settings struct{ DisableWriteActions, WorkflowTerminateDisabled, WorkflowResetDisabled, StartWorkflowDisabled bool }
	if err := json.Unmarshal([]byte(body), &settings); code != http.StatusOK || err != nil {
		t.Fatalf("settings: %d %v %.200s", code, err, body)
	}
	if !settings.DisableWriteActions || !settings.WorkflowTerminateDisabled || !settings.WorkflowResetDisabled || !settings.StartWorkflowDisabled {
		t.Errorf("settings %+v: want every write disabled", settings)
	}

	writes := []struct{ name, path, body string }{
		{"terminate", terminatePath(id, runID), `{"reason":"from a plain HTTP client"}`},
		{"cancel", fmt.Sprintf("/api/v1/namespaces/%s/workflows/%s/cancel", defaultNamespace, id), `{}`},
		{"signal", fmt.Sprintf("/api/v1/namespaces/%s/workflows/%s/signal/stop", defaultNamespace, id), `{}`},
		{"reset", fmt.Sprintf("/api/v1/namespaces/%s/workflows/%s/reset", defaultNamespace, id), `{"workflowTaskFinishEventId":"2","reason":"x"}`},
	}
	for _, w := range writes {
		code, body := c.do(t, http.MethodPost, w.path, w.body, "")
		t.Logf("POST %s: %d %.120s", w.name, code, body)
		if code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d %.200s, want 405", w.name, code, body)
		}
	}
	if st := s.status(t, id); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("after the UI's refusals the workflow is %v, want running", st)
	}
	// Reading through the UI still works: the workflow, running.
	code, body = c.do(t, http.MethodGet, fmt.Sprintf("/api/v1/namespaces/%s/workflows/%s", defaultNamespace, id), "", "")
	if code != http.StatusOK || !strings.Contains(body, "WORKFLOW_EXECUTION_STATUS_RUNNING") {
		t.Errorf("GET the workflow through the UI: %d %.300s", code, body)
	}
}

// testIDP is a minimal OIDC provider: the discovery document and the JWKS of one RSA key,
// and ID tokens signed with it.
type testIDP struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newTestIDP(t *testing.T) *testIDP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &testIDP{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		u := p.srv.URL
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
			"jwks_uri": u + "/jwks", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		pub := key.PublicKey
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "test",
			"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
		}}})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// token is an RS256 ID token of the provider for audience, signed with key.
func (p *testIDP) token(t *testing.T, key *rsa.PrivateKey, audience string) string {
	t.Helper()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "test"})
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": p.srv.URL, "aud": audience, "sub": "auditor",
		"email": "auditor@example.com", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	signing := b64(header) + "." + b64(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + b64(sig)
}

// TestUIAuthOIDC starts the dev server with the UI's writes on behind its OIDC login, the
// provider a tiny one in the test. Without a token the UI refuses the terminate (401) and
// a read, and sends a browser to the provider to log in; a token of another key or
// another audience is refused; the provider's own token terminates the workflow.
func TestUIAuthOIDC(t *testing.T) {
	idp := newTestIDP(t)
	uiPort, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	const clientID = "wmrl-ui"
	t.Setenv(envUIClientSecret, "test-client-secret")
	s := startDevServer(t, uiPort, "--ui-write-actions", "--ui-auth-provider-url", idp.srv.URL,
		"--ui-auth-client-id", clientID, "--ui-auth-callback-url", fmt.Sprintf("http://127.0.0.1:%d/auth/sso/callback", uiPort))
	const id = "ui-oidc-probe"
	runID := s.startProbe(t, id)
	c := newUIClient(t, s.ui)

	// A browser is sent to the provider's login.
	code, loc := c.do(t, http.MethodGet, "/auth/sso", "", "")
	if code != http.StatusFound || !strings.HasPrefix(loc, idp.srv.URL+"/authorize?") || !strings.Contains(loc, "client_id="+clientID) {
		t.Errorf("GET /auth/sso: %d %q, want a redirect to %s/authorize for %s", code, loc, idp.srv.URL, clientID)
	}
	if strings.Contains(loc, "test-client-secret") {
		t.Errorf("the login redirect carries the client secret: %q", loc)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ name, token string }{
		{"no token", ""},
		{"a token signed by another key", idp.token(t, other, clientID)},
		{"a token for another client", idp.token(t, idp.key, "someone-else")},
	} {
		code, body := c.do(t, http.MethodPost, terminatePath(id, runID), `{"reason":"unauthenticated"}`, bad.token)
		t.Logf("terminate with %s: %d %.120s", bad.name, code, body)
		if code != http.StatusUnauthorized {
			t.Errorf("terminate with %s: %d %.200s, want 401", bad.name, code, body)
		}
		code, body = c.do(t, http.MethodGet, "/api/v1/namespaces", "", bad.token)
		if code != http.StatusUnauthorized {
			t.Errorf("list namespaces with %s: %d %.200s, want 401", bad.name, code, body)
		}
	}
	if st := s.status(t, id); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("after the refusals the workflow is %v, want running", st)
	}
	// The provider's token for the UI's client: the write goes through.
	code, body := c.do(t, http.MethodPost, terminatePath(id, runID), `{"reason":"authenticated"}`, idp.token(t, idp.key, clientID))
	if code != http.StatusOK {
		t.Fatalf("terminate with the provider's token: %d %.300s", code, body)
	}
	if st := s.status(t, id); st != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		t.Errorf("after an authenticated terminate the workflow is %v", st)
	}
}
