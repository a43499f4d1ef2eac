package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/testenv"
)

// parse runs the command line with a serve that records its options.
func parse(t *testing.T, env deployenv.Env, args ...string) (o options, status int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	served := false
	status = execute(args, &out, &errOut, env, func(_ context.Context, got options) error {
		o, served = got, true
		return nil
	})
	if status == exitOK && !served && !strings.Contains(strings.Join(args, " "), "-h") && !slices.Contains(args, "--version") {
		t.Errorf("%q: exit 0 without serving", args)
	}
	return o, status, out.String(), errOut.String()
}

func TestParseFlags(t *testing.T) {
	env := deployenv.Env{Address: "temporal:7233", Namespace: "lab", DatabaseURL: "dbname=env", DataDir: "/data", Sandbox: "auto"}
	o, status, _, stderr := parse(t, env)
	if status != exitOK || stderr != "" {
		t.Fatalf("no flags: exit %d, stderr %q", status, stderr)
	}
	if o.address != "temporal:7233" || o.namespace != "lab" || o.databaseURL != "dbname=env" || o.dataDir != "/data" ||
		o.sandboxKind != "auto" || len(o.queues) != 5 || o.debug {
		t.Fatalf("defaults %+v", o)
	}
	o, status, _, _ = parse(t, env, "--queues", "sandbox, gpu,sandbox", "--sandbox", "process", "--address", "x:1",
		"--namespace=ns", "--database-url", "dbname=flag", "--data-dir", "/d", "--suite-seed", "7", "--debug",
		"--executor", "/bin/x", "--world-model", "wm.json")
	if status != exitOK || !slices.Equal(o.queues, []string{"sandbox", "gpu"}) || o.sandboxKind != "process" || o.address != "x:1" ||
		o.namespace != "ns" || o.databaseURL != "dbname=flag" || o.dataDir != "/d" || o.suiteSeed != 7 || !o.debug ||
		o.executor != "/bin/x" || o.worldModel != "wm.json" {
		t.Fatalf("parsed %+v (exit %d)", o, status)
	}
	if o, _, _, _ := parse(t, deployenv.Env{Sandbox: "auto"}); o.tls != nil {
		t.Errorf("no $TEMPORAL_TLS_*: TLS %+v, want plain text", o.tls)
	}
	certs := testenv.TLSCerts(t)
	tlsEnv := deployenv.TLS{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey, ServerName: "temporal"}
	if o, _, _, _ := parse(t, deployenv.Env{Sandbox: "auto", TLS: tlsEnv}); o.tls == nil || len(o.tls.Certificates) != 1 ||
		o.tls.RootCAs == nil || o.tls.ServerName != "temporal" {
		t.Errorf("$TEMPORAL_TLS_*: TLS %+v", o.tls)
	}
	// A wrong file stops the worker before it serves, naming the variable.
	bad := tlsEnv
	bad.Key = ""
	if _, status, _, stderr := parse(t, deployenv.Env{Sandbox: "auto", TLS: bad}); status != exitRuntime ||
		!strings.Contains(stderr, "$"+deployenv.EnvTLSCert+" is set without $"+deployenv.EnvTLSKey) {
		t.Errorf("certificate without key: exit %d, stderr %q", status, stderr)
	}
	if o, _, _, _ := parse(t, deployenv.Env{Sandbox: "process"}); o.sandboxKind != "process" || o.metricsAddr != "" {
		t.Errorf("$WMRL_SANDBOX=process: --sandbox %q, --metrics-addr %q", o.sandboxKind, o.metricsAddr)
	}
	if o, _, _, _ := parse(t, deployenv.Env{Sandbox: "auto", MetricsAddr: ":9464"}); o.metricsAddr != ":9464" {
		t.Errorf("$WMRL_METRICS_ADDR=:9464: --metrics-addr %q", o.metricsAddr)
	}
	if o, _, _, _ := parse(t, deployenv.Env{Sandbox: "auto", MetricsAddr: ":9464"}, "--metrics-addr", "127.0.0.1:9000"); o.metricsAddr != "127.0.0.1:9000" {
		t.Errorf("--metrics-addr 127.0.0.1:9000 over the environment's: %q", o.metricsAddr)
	}
}

func TestUsageErrors(t *testing.T) {
	env := deployenv.Env{Sandbox: "auto"}
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"--queues", "control,cpu"}, `unknown queue "cpu"`},
		{[]string{"--sandbox", "vm"}, "--sandbox"},
		{[]string{"--metrics-addr", "9464"}, `--metrics-addr: "9464" is not host:port`},
		{[]string{"--metrics-addr", "localhost:"}, "--metrics-addr"},
		{[]string{"--suite-seed", "-1"}, "--suite-seed"},
		{[]string{"--suite-seed", "x"}, "--suite-seed"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"--address"}, "flag needs an argument: --address"},
		{[]string{"--debug=maybe"}, "invalid argument"},
		{[]string{"-address", "x:1"}, "unknown shorthand flag"},
	}
	for _, tt := range tests {
		_, status, stdout, stderr := parse(t, env, tt.give...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, tt.want) ||
			!strings.HasPrefix(stderr, "wmrl-worker: ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line with %q", tt.give, status, stdout, stderr, tt.want)
		}
	}
}

func TestFailureAndVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	status := execute(nil, &out, &errOut, deployenv.Env{Sandbox: "auto"}, func(context.Context, options) error {
		return errors.New("connect to temporal at x:1:\n refused")
	})
	if status != exitRuntime || errOut.String() != "wmrl-worker: connect to temporal at x:1: refused\n" {
		t.Errorf("a failed worker: exit %d, stderr %q", status, errOut.String())
	}
	for _, give := range [][]string{{"--version"}, {"--help"}} {
		_, status, stdout, stderr := parse(t, deployenv.Env{}, give...)
		if status != exitOK || stderr != "" || stdout == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", give, status, stdout, stderr)
		}
	}
	if _, _, stdout, _ := parse(t, deployenv.Env{}, "--version"); !strings.HasPrefix(stdout, "wmrl-worker version ") {
		t.Errorf("--version printed %q", stdout)
	}
}
