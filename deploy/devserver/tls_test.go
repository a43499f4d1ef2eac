package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// testPKI is a CA made in a test, with a server certificate (for temporal, localhost and
// 127.0.0.1, valid for server and client authentication) and a client certificate.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	dir                                              string
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	p := testPKI{dir: t.TempDir()}
	caKey, caCert, caPEM := signCert(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	})
	p.CA = p.write(t, "ca.pem", caPEM)
	key, _, cert := signCert(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "temporal"}, DNSNames: []string{"temporal", "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	p.ServerCert, p.ServerKey = p.write(t, "server.pem", cert), p.write(t, "server-key.pem", keyPEM(t, key))
	key, _, cert = signCert(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "worker"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	p.ClientCert, p.ClientKey = p.write(t, "client.pem", cert), p.write(t, "client-key.pem", keyPEM(t, key))
	return p
}

func (p testPKI) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// signCert makes a key and a certificate of tmpl signed by parentKey (self-signed when
// parent is nil).
func signCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestServeTLSOptions: the TLS flags of serve are checked before anything starts, each
// error naming its flag.
func TestServeTLSOptions(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	ipOnlyCert, ipOnlyKey := func() (string, string) {
		// A server certificate for an IP address only.
		caKey, caCert, _ := signCert(t, nil, nil, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
		key, _, cert := signCert(t, caCert, caKey, &x509.Certificate{IPAddresses: []net.IP{net.IPv4(10, 9, 9, 9)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
		return p.write(t, "iponly.pem", cert), p.write(t, "iponly-key.pem", keyPEM(t, key))
	}()
	garbage := p.write(t, "garbage.pem", []byte("not PEM\n"))
	mtls := []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CA}
	tests := []struct {
		give    []string
		check   func(serveOptions) bool
		wantErr string
	}{
		{give: nil, check: func(o serveOptions) bool {
			r := o.TLS.rootTLS()
			return o.TLS.mode() == "off" && !r.Frontend.IsServerEnabled() && !r.Internode.IsServerEnabled() && o.TLS.uiTLS().CaFile == ""
		}},
		{give: mtls, check: func(o serveOptions) bool {
			r := o.TLS.rootTLS()
			return o.TLS.mode() == "mutual" && o.TLS.CA == p.CA && o.TLS.ServerName == "127.0.0.1" &&
				r.Frontend.IsServerEnabled() && r.Frontend.IsClientEnabled() && r.Frontend.Server.RequireClientAuth &&
				r.Internode.IsServerEnabled() && r.Internode.IsClientEnabled() && r.Internode.Server.RequireClientAuth &&
				o.TLS.uiTLS().EnableHostVerification && o.TLS.uiTLS().CaFile == p.CA
		}},
		{give: append([]string{"--ip", "auto"}, mtls...), check: func(o serveOptions) bool {
			// Unless the host's address is 127.0.0.1, the certificate does not name it: the
			// server's clients verify its first DNS name.
			if o.IP == "127.0.0.1" {
				return o.TLS.ServerName == "127.0.0.1"
			}
			return o.TLS.ServerName == "temporal"
		}},
		{give: append(mtls, "--tls-server-name", "localhost"), check: func(o serveOptions) bool { return o.TLS.ServerName == "localhost" }},
		{give: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-ca", p.CA}, check: func(o serveOptions) bool {
			r := o.TLS.rootTLS()
			return o.TLS.mode() == "on" && !r.Frontend.Server.RequireClientAuth && r.Frontend.IsClientEnabled()
		}},
		{give: []string{"--tls-key", p.ServerKey}, wantErr: "need --tls-cert"},
		{give: []string{"--tls-client-ca", p.CA}, wantErr: "need --tls-cert"},
		{give: []string{"--tls-cert", p.ServerCert, "--tls-client-ca", p.CA}, wantErr: "--tls-cert needs --tls-key"},
		{give: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey}, wantErr: "needs --tls-ca"},
		{give: []string{"--tls-cert", p.ServerCert + ".missing", "--tls-key", p.ServerKey, "--tls-ca", p.CA}, wantErr: "--tls-cert: open"},
		{give: []string{"--tls-cert", p.ServerCert, "--tls-key", other.ServerKey, "--tls-ca", p.CA}, wantErr: "--tls-key " + other.ServerKey},
		{give: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", garbage}, wantErr: "--tls-client-ca: " + garbage + " holds no PEM"},
		{give: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-ca", other.CA}, wantErr: "does not verify under --tls-ca"},
		{give: append(mtls, "--tls-server-name", "elsewhere"), wantErr: "for elsewhere"},
		{give: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-ca", p.CA, "--tls-client-ca", other.CA},
			wantErr: "not a client certificate under --tls-client-ca"},
		{give: []string{"--tls-cert", ipOnlyCert, "--tls-key", ipOnlyKey, "--tls-ca", p.CA}, wantErr: "set --tls-server-name"},
	}
	for _, tt := range tests {
		got, err := parseServe(tt.give, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseServe(%q) error = %v, want it to contain %q", tt.give, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("parseServe(%q) error shows a PEM: %v", tt.give, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseServe(%q): %v", tt.give, err)
			continue
		}
		if !tt.check(got) {
			t.Errorf("parseServe(%q) = %+v", tt.give, got)
		}
	}
}

// TestClientTLSOptions: check and register take TLS from flags, else from wmrl's
// variables.
func TestClientTLSOptions(t *testing.T) {
	p := newPKI(t)
	for _, k := range []string{envTLSCA, envTLSCert, envTLSKey, envTLSServerName} {
		t.Setenv(k, "")
	}
	o, err := parseClient("check", nil, io.Discard, "")
	if err != nil || o.TLS != nil {
		t.Fatalf("no TLS flag: TLS %v, %v; want plain text", o.TLS, err)
	}
	o, err = parseClient("check", []string{"--tls-ca", p.CA, "--tls-cert", p.ClientCert, "--tls-key", p.ClientKey, "--tls-server-name", "temporal"}, io.Discard, "")
	if err != nil || o.TLS == nil || len(o.TLS.Certificates) != 1 || o.TLS.RootCAs == nil || o.TLS.ServerName != "temporal" {
		t.Fatalf("TLS flags: %+v, %v", o.TLS, err)
	}
	t.Setenv(envTLSCA, p.CA)
	t.Setenv(envTLSCert, p.ClientCert)
	t.Setenv(envTLSKey, p.ClientKey)
	if o, err = parseClient("register", nil, io.Discard, ""); err != nil || o.TLS == nil || len(o.TLS.Certificates) != 1 {
		t.Fatalf("TLS from $%s...: %+v, %v", envTLSCA, o.TLS, err)
	}
	t.Setenv(envTLSKey, "")
	if _, err = parseClient("check", nil, io.Discard, ""); err == nil || !strings.Contains(err.Error(), "--tls-cert needs --tls-key") {
		t.Errorf("certificate without key: %v", err)
	}
	if _, err = parseClient("check", []string{"--tls-cert", "", "--tls-ca", p.ClientKey}, io.Discard, ""); err == nil ||
		!strings.Contains(err.Error(), "--tls-ca: "+p.ClientKey+" holds no PEM certificate") {
		t.Errorf("a key as the CA: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServeMutualTLS runs the dev server with mutual TLS on free ports: a client with a
// certificate of its CA lists the namespaces, the system workers poll through the TLS
// frontend, the Web UI answers from it, and check gets through; a client without a
// certificate, with one of another CA, or in plain text, does not.
func TestServeMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	p, other := newPKI(t), newPKI(t)
	const ip = "127.0.0.1"
	port, err := freePort(ip)
	if err != nil {
		t.Fatal(err)
	}
	uiPort, err := freePort(ip)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(ip, fmt.Sprint(port))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- serveUntil(ctx, []string{"--ip", ip, "--port", fmt.Sprint(port), "--ui-port", fmt.Sprint(uiPort),
			"--db", filepath.Join(t.TempDir(), "dev.db"), "--log-level", "error",
			"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CA}, &stdout, io.Discard)
	}()
	deadline := time.After(3 * time.Minute)
	for !strings.Contains(stdout.String(), "temporal-dev: ready") {
		select {
		case err := <-done:
			t.Fatalf("serve ended before ready: %v (stdout %q)", err, stdout.String())
		case <-deadline:
			t.Fatalf("not ready after 3 minutes (stdout %q)", stdout.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !strings.Contains(stdout.String(), " tls=mutual") {
		t.Errorf("ready line without tls=mutual: %q", stdout.String())
	}
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

	listNamespaces := func(tc clientTLS) ([]string, error) {
		conf, err := tc.config()
		if err != nil {
			t.Fatal(err)
		}
		c, err := dial(addr, conf)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		callCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.workflow.ListNamespaces(callCtx, &workflowservice.ListNamespacesRequest{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, ns := range resp.GetNamespaces() {
			names = append(names, ns.GetNamespaceInfo().GetName())
		}
		return names, nil
	}
	good := clientTLS{CA: p.CA, Cert: p.ClientCert, Key: p.ClientKey}
	names, err := listNamespaces(good)
	if err != nil || !strings.Contains(strings.Join(names, " "), "default") {
		t.Fatalf("with a client certificate of the CA: namespaces %q, %v", names, err)
	}
	for _, bad := range []struct {
		name string
		tls  clientTLS
	}{
		{"no client certificate", clientTLS{CA: p.CA}},
		{"a client certificate of another CA", clientTLS{CA: p.CA, Cert: other.ClientCert, Key: other.ClientKey}},
		{"another CA for the server", clientTLS{CA: other.CA, Cert: p.ClientCert, Key: p.ClientKey}},
		{"plain text", clientTLS{}},
	} {
		if names, err := listNamespaces(bad.tls); err == nil {
			t.Errorf("%s: listed the namespaces %q", bad.name, names)
		}
	}

	// The system workers reach the frontend over mutual TLS, and the frontend the matching
	// service: the system task queue has pollers.
	conf, _ := good.config()
	c, err := dial(addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var pollers int
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(500 * time.Millisecond) {
		callCtx, cancelCall := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.workflow.DescribeTaskQueue(callCtx, &workflowservice.DescribeTaskQueueRequest{
			Namespace:     "temporal-system",
			TaskQueue:     &taskqueuepb.TaskQueue{Name: "default-worker-tq", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
		})
		cancelCall()
		if err == nil {
			if pollers = len(resp.GetPollers()); pollers > 0 {
				break
			}
		}
	}
	if pollers == 0 {
		t.Error("no system worker polls temporal-system/default-worker-tq through the TLS frontend")
	}

	// The Web UI reaches the frontend over mutual TLS with the server's certificate.
	resp, err := http.Get(fmt.Sprintf("http://%s/api/v1/namespaces", net.JoinHostPort(ip, fmt.Sprint(uiPort))))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"default"`) {
		t.Errorf("Web UI /api/v1/namespaces: %s %.300s", resp.Status, body)
	}

	// check, with the client certificate from wmrl's variables; and without TLS.
	t.Setenv(envTLSCA, p.CA)
	t.Setenv(envTLSCert, p.ClientCert)
	t.Setenv(envTLSKey, p.ClientKey)
	t.Setenv(envTLSServerName, "localhost")
	var out strings.Builder
	if err := run([]string{"check", "--address", addr, "--timeout", "20s"}, &out, io.Discard); err != nil {
		t.Errorf("check over mutual TLS: %v", err)
	}
	if err := run([]string{"check", "--address", addr, "--timeout", "2s", "--tls-ca", "", "--tls-cert", "", "--tls-key", "", "--tls-server-name", ""},
		io.Discard, io.Discard); err == nil {
		t.Error("check in plain text: it got through")
	}
	if strings.Contains(out.String(), "BEGIN") {
		t.Errorf("check printed a PEM: %q", out.String())
	}
}
