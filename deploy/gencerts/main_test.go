package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/deployenv"
)

// TestGenerate: the server certificate verifies under the CA for each name, as a server
// and as a client; the client certificate as a client only; the files load as wmrl's
// TLS configuration; keys are private; no CA key is written; a second run refuses to
// overwrite.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var out strings.Builder
	if err := run([]string{"-dir", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "BEGIN") {
		t.Errorf("printed a PEM: %q", out.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "ca.pem client-key.pem client.pem server-key.pem server.pem" {
		t.Errorf("files %q, want the CA certificate and the two pairs only", names)
	}
	for _, f := range []string{"server-key.pem", "client-key.pem"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, st.Mode(), err)
		}
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem: no certificate")
	}
	leaf := func(name string) *x509.Certificate {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return pair.Leaf
	}
	srv, cli := leaf("server"), leaf("client")
	for _, name := range []string{"temporal", "localhost", "127.0.0.1"} {
		if _, err := srv.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	if _, err := srv.Verify(x509.VerifyOptions{DNSName: "elsewhere", Roots: roots}); err == nil {
		t.Error("server certificate verifies for elsewhere")
	}
	for what, c := range map[string]*x509.Certificate{"server": srv, "client": cli} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s certificate as a client: %v", what, err)
		}
	}
	if _, err := cli.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate verifies as a server's")
	}
	conf, err := deployenv.TLS{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}.Config()
	if err != nil || len(conf.Certificates) != 1 {
		t.Errorf("as $TEMPORAL_TLS_*: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "client-key.pem"))
	if err := run([]string{"-dir", dir}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second run: %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "client-key.pem")); string(after) != string(before) {
		t.Error("second run changed client-key.pem")
	}
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"-dir", filepath.Join(dir, "a"), "-names", "10.1.2.3, db.example"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "a", "server.pem"), filepath.Join(dir, "a", "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if l := pair.Leaf; len(l.IPAddresses) != 1 || l.IPAddresses[0].String() != "10.1.2.3" || len(l.DNSNames) != 1 || l.DNSNames[0] != "db.example" {
		t.Errorf("-names 10.1.2.3,db.example: IPs %v, DNS %v", l.IPAddresses, l.DNSNames)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "-dir: required"},
		{[]string{"-dir", dir, "-names", " , "}, "-names: empty"},
		{[]string{"-dir", dir, "-days", "0"}, "-days 0"},
		{[]string{"-dir", dir, "x"}, "unexpected arguments"},
	} {
		if err := run(tt.args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
}
