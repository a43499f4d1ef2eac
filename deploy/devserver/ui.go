package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
)

// envUIClientSecret holds the OIDC client secret of the Web UI; a secret is never a flag,
// so it stays out of process listings and shell histories.
const envUIClientSecret = "TEMPORAL_UI_AUTH_CLIENT_SECRET"

// uiOptions is the Web UI's part of serve: where it listens, whether it may change
// workflows, and its own authentication.
//
// The UI talks to the frontend with the server's own certificate, so it is a way around
// mutual TLS for whoever reaches its port. By default it listens on 127.0.0.1 only and is
// read-only: the ui-server refuses every request of its HTTP API but GETs and workflow
// queries (405 Method Not Allowed), and the UI hides its write actions. Writes
// (terminate, cancel, signal, update, reset, start, batch and activity commands) are an
// explicit opt-in that needs the UI's OIDC authentication, so that an anonymous client
// cannot make them.
type uiOptions struct {
	// IP is the address the UI binds (--ui-ip; "auto" as --ip).
	IP string
	// Writes enables the UI's write actions (--ui-write-actions).
	Writes bool
	// Auth is the UI's OIDC login; off when ProviderURL is "".
	Auth uiAuth
}

// uiAuth is the ui-server's OIDC provider: it redirects a browser to ProviderURL's
// authorization endpoint to log in (/auth/sso) and verifies the ID token of every API
// request against the provider's keys, audience ClientID. It authenticates; it does not
// authorize: every user the provider issues a token for ClientID may do what the UI
// allows.
type uiAuth struct {
	ProviderURL  string
	IssuerURL    string
	ClientID     string
	ClientSecret string
	CallbackURL  string
	Scopes       string
}

func (a uiAuth) enabled() bool { return a.ProviderURL != "" }

func addUIFlags(fs *flag.FlagSet, u *uiOptions) {
	fs.StringVar(&u.IP, "ui-ip", "127.0.0.1", `IPv4 address the Web UI binds ("auto": the host's own, as --ip; 0.0.0.0: every interface)`)
	fs.BoolVar(&u.Writes, "ui-write-actions", false, "let the Web UI terminate, cancel, signal, reset and start workflows (needs --ui-auth-provider-url)")
	fs.StringVar(&u.Auth.ProviderURL, "ui-auth-provider-url", "", "OIDC provider of the Web UI's login (its /.well-known/openid-configuration); client secret from $"+envUIClientSecret)
	fs.StringVar(&u.Auth.IssuerURL, "ui-auth-issuer-url", "", "the provider's issuer, when it differs from --ui-auth-provider-url")
	fs.StringVar(&u.Auth.ClientID, "ui-auth-client-id", "", "the Web UI's OIDC client id (the ID tokens' audience)")
	fs.StringVar(&u.Auth.CallbackURL, "ui-auth-callback-url", "", "where the provider sends the browser back: http(s)://UI-HOST:PORT/auth/sso/callback")
	fs.StringVar(&u.Auth.Scopes, "ui-auth-scopes", "openid,profile,email", "OIDC scopes asked for, comma-separated")
}

// check validates the UI options and resolves IP; uiPort 0 (no UI) ignores them.
func (u *uiOptions) check(uiPort int) error {
	var err error
	if u.IP, err = resolveIP(u.IP); err != nil {
		return fmt.Errorf("--ui-ip: %w", err)
	}
	if ip := net.ParseIP(u.IP); ip == nil || ip.To4() == nil {
		return fmt.Errorf("--ui-ip %q: want an IPv4 address", u.IP)
	}
	u.Auth.ClientSecret = os.Getenv(envUIClientSecret)
	a := u.Auth
	if !a.enabled() {
		for _, f := range []struct{ name, v string }{
			{"--ui-auth-issuer-url", a.IssuerURL}, {"--ui-auth-client-id", a.ClientID}, {"--ui-auth-callback-url", a.CallbackURL},
		} {
			if f.v != "" {
				return fmt.Errorf("%s without --ui-auth-provider-url", f.name)
			}
		}
		if u.Writes {
			return errors.New("--ui-write-actions needs the Web UI's authentication (--ui-auth-provider-url ...): " +
				"without it anyone who reaches the UI's port could terminate runs; use wmrl terminate, stop, pause or resume instead")
		}
		return nil
	}
	if uiPort == 0 {
		return errors.New("--ui-auth-provider-url with --ui-port 0: there is no UI to log in to")
	}
	for _, f := range []struct{ name, v string }{{"--ui-auth-provider-url", a.ProviderURL}, {"--ui-auth-callback-url", a.CallbackURL}} {
		p, err := url.Parse(f.v)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%s %q: want an http or https URL", f.name, f.v)
		}
	}
	if a.IssuerURL != "" {
		if p, err := url.Parse(a.IssuerURL); err != nil || p.Host == "" {
			return fmt.Errorf("--ui-auth-issuer-url %q: want a URL", a.IssuerURL)
		}
	}
	if a.ClientID == "" {
		return errors.New("--ui-auth-client-id: empty (needed with --ui-auth-provider-url)")
	}
	if a.CallbackURL == "" {
		return errors.New("--ui-auth-callback-url: empty (needed with --ui-auth-provider-url)")
	}
	if len(u.scopes()) == 0 {
		return errors.New("--ui-auth-scopes: empty")
	}
	return nil
}

func (u uiOptions) scopes() []string {
	var out []string
	for _, s := range strings.Split(u.Auth.Scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// mode names the UI's access for the ready line: read-only or writes, and the login.
func (u uiOptions) mode() string {
	m := "read-only"
	if u.Writes {
		m = "writes"
	}
	if u.Auth.enabled() {
		return m + "+oidc"
	}
	return m
}

// apply sets the UI server's write switches and authentication in c. Without writes,
// DisableWriteActions is what the ui-server enforces (its API answers 405 to anything
// but a GET or a query); the discrete switches only hide the UI's buttons.
func (u uiOptions) apply(c *uiconfig.Config) {
	off := !u.Writes
	c.DisableWriteActions = off
	c.WorkflowTerminateDisabled = off
	c.WorkflowCancelDisabled = off
	c.WorkflowSignalDisabled = off
	c.WorkflowUpdateDisabled = off
	c.WorkflowResetDisabled = off
	c.WorkflowPauseDisabled = off
	c.BatchActionsDisabled = off
	c.StartWorkflowDisabled = off
	c.ActivityCommandsDisabled = off
	if !u.Auth.enabled() {
		return
	}
	a := u.Auth
	c.Auth = uiconfig.Auth{
		Enabled: true,
		Providers: []uiconfig.AuthProvider{{
			Label: "OIDC", Type: "oidc", ProviderURL: a.ProviderURL, IssuerUrl: a.IssuerURL,
			ClientID: a.ClientID, ClientSecret: a.ClientSecret, CallbackURL: a.CallbackURL, Scopes: u.scopes(),
		}},
	}
}

// checkProvider fetches the OIDC provider's discovery document as the ui-server will. The
// ui-server exits the whole process (log.Fatal) when it cannot; this makes that an error
// of serve, retried until ctx ends while the provider is not up yet.
func (u uiOptions) checkProvider(ctx context.Context) error {
	if !u.Auth.enabled() {
		return nil
	}
	return retry(ctx, "Web UI OIDC provider "+u.Auth.ProviderURL, func(callCtx context.Context) error {
		if u.Auth.IssuerURL != "" {
			callCtx = oidc.InsecureIssuerURLContext(callCtx, u.Auth.IssuerURL)
		}
		_, err := oidc.NewProvider(callCtx, u.Auth.ProviderURL)
		if err != nil && strings.Contains(err.Error(), "issuer did not match") {
			return permanentError{err}
		}
		return err
	})
}
