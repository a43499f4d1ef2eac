package main

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/testenv"
)

// tlsFrontend serves, over mutual TLS with ca's server certificate, a
// Temporal frontend that implements nothing: a client that reaches it
// gets "not implemented", one refused by TLS gets no further than the dial.
func tlsFrontend(t *testing.T, ca testenv.TLSFiles) string {
	t.Helper()
	conf, err := deployenv.TLS{CA: ca.CA, Cert: ca.ServerCert, Key: ca.ServerKey}.Config()
	if err != nil {
		t.Fatal(err)
	}
	// The server's side: its certificate, clients verified by the CA.
	conf.ClientCAs, conf.RootCAs = conf.RootCAs, nil
	conf.ClientAuth = tls.RequireAndVerifyClientCert
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(conf)))
	workflowservice.RegisterWorkflowServiceServer(srv, &workflowservice.UnimplementedWorkflowServiceServer{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestDialTLS: wmrl reaches a mutual-TLS frontend with $TEMPORAL_TLS_*
// (the call gets as far as the frontend's "not implemented"), and does not
// without its client certificate, over plain text, or with a wrong
// setting, which it names.
func TestDialTLS(t *testing.T) {
	ca := testenv.TLSCerts(t)
	addr := tlsFrontend(t, ca)
	tests := []struct {
		name           string
		env            map[string]string
		want, dontWant string
	}{
		{"mutual TLS", map[string]string{deployenv.EnvTLSCA: ca.CA, deployenv.EnvTLSCert: ca.ClientCert, deployenv.EnvTLSKey: ca.ClientKey},
			"not implemented", "connect to temporal"},
		{"server name", map[string]string{deployenv.EnvTLSCA: ca.CA, deployenv.EnvTLSCert: ca.ClientCert, deployenv.EnvTLSKey: ca.ClientKey,
			deployenv.EnvTLSServerName: "temporal"}, "not implemented", "connect to temporal"},
		{"no client certificate", map[string]string{deployenv.EnvTLSCA: ca.CA}, "connect to temporal at " + addr, "not implemented"},
		{"plain text", nil, "over TLS, set $" + deployenv.EnvTLSCA, "not implemented"},
		{"certificate without key", map[string]string{deployenv.EnvTLSCA: ca.CA, deployenv.EnvTLSCert: ca.ClientCert},
			"$" + deployenv.EnvTLSCert + " is set without $" + deployenv.EnvTLSKey, "not implemented"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{deployenv.EnvTLSCA, deployenv.EnvTLSCert, deployenv.EnvTLSKey, deployenv.EnvTLSServerName} {
				t.Setenv(k, tt.env[k])
			}
			got, out, errOut := runTree("--address", addr, "pause", "r1")
			if got != exitRuntime || out != "" || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, tt.dontWant) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", got, out, errOut, exitRuntime, tt.want)
			}
			if strings.Contains(errOut, "BEGIN") {
				t.Errorf("stderr shows a PEM file: %q", errOut)
			}
		})
	}
}
