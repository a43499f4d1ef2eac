package deployenv_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestTLSConfigHandshake: the configuration of the variables completes a
// mutual-TLS handshake with a server of the same CA, and fails without a
// client certificate, against a server of another CA, with a client
// certificate of another CA, or with a name the server's certificate lacks.
func TestTLSConfigHandshake(t *testing.T) {
	ca, other := testenv.TLSCerts(t), testenv.TLSCerts(t)
	pair, err := tls.LoadX509KeyPair(ca.ServerCert, ca.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(ca.CA)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(caPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientCAs: clientCAs, ClientAuth: tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				// A byte after the handshake: the client's Read sees
				// whether the server accepted its certificate.
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte{1})
				}
				c.Close()
			}()
		}
	}()
	addr := ln.Addr().String()
	handshake := func(tc deployenv.TLS) error {
		cfg, err := tc.Config()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Read(make([]byte, 1))
		return err
	}
	mtls := deployenv.TLS{CA: ca.CA, Cert: ca.ClientCert, Key: ca.ClientKey}
	if err := handshake(mtls); err != nil {
		t.Fatalf("mutual TLS with the right CA and client certificate: %v", err)
	}
	named := mtls
	named.ServerName = "temporal"
	if err := handshake(named); err != nil {
		t.Errorf("with %s=temporal: %v", deployenv.EnvTLSServerName, err)
	}
	named.ServerName = "elsewhere"
	if err := handshake(named); err == nil {
		t.Errorf("with %s=elsewhere (not in the certificate): handshake succeeded", deployenv.EnvTLSServerName)
	}
	if err := handshake(deployenv.TLS{CA: ca.CA}); err == nil {
		t.Error("without a client certificate: the server accepted it")
	}
	wrongCA := mtls
	wrongCA.CA = other.CA
	if err := handshake(wrongCA); err == nil {
		t.Error("with another CA: the server's certificate was trusted")
	}
	if err := handshake(deployenv.TLS{CA: ca.CA, Cert: other.ClientCert, Key: other.ClientKey}); err == nil {
		t.Error("with a client certificate of another CA: the server accepted it")
	}
	cfg, err := mtls.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x, want TLS 1.2", cfg.MinVersion)
	}
	if cfg, err := (deployenv.TLS{}).Config(); cfg != nil || err != nil {
		t.Errorf("Config of no variable = %v, %v; want nil, nil (plain text)", cfg, err)
	}
}

// TestTLSConfigErrors: each wrong setting is an error that names its
// variable and shows no PEM.
func TestTLSConfigErrors(t *testing.T) {
	ca, other := testenv.TLSCerts(t), testenv.TLSCerts(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	const (
		ca_, cert, key = deployenv.EnvTLSCA, deployenv.EnvTLSCert, deployenv.EnvTLSKey
	)
	tests := []struct {
		name string
		tls  deployenv.TLS
		want []string
	}{
		{"missing CA", deployenv.TLS{CA: missing}, []string{ca_, missing}},
		{"CA not PEM", deployenv.TLS{CA: garbage}, []string{ca_, garbage, "no PEM certificate"}},
		{"CA a key", deployenv.TLS{CA: ca.ClientKey}, []string{ca_, ca.ClientKey, "no PEM certificate"}},
		{"CA a directory", deployenv.TLS{CA: dir}, []string{ca_}},
		{"cert without key", deployenv.TLS{CA: ca.CA, Cert: ca.ClientCert}, []string{cert, key, "without"}},
		{"key without cert", deployenv.TLS{Key: ca.ClientKey}, []string{key, cert, "without"}},
		{"missing cert", deployenv.TLS{Cert: missing, Key: ca.ClientKey}, []string{cert, missing}},
		{"missing key", deployenv.TLS{Cert: ca.ClientCert, Key: missing}, []string{key, missing}},
		{"cert not PEM", deployenv.TLS{Cert: garbage, Key: ca.ClientKey}, []string{cert, key, garbage}},
		{"key not PEM", deployenv.TLS{Cert: ca.ClientCert, Key: garbage}, []string{key, garbage}},
		{"key of another certificate", deployenv.TLS{Cert: ca.ClientCert, Key: other.ClientKey}, []string{cert, key}},
		{"key given as the certificate", deployenv.TLS{Cert: ca.ClientKey, Key: ca.ClientKey}, []string{cert}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.tls.Config()
			if err == nil {
				t.Fatalf("Config = %v, want an error", cfg)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if strings.Contains(msg, "BEGIN") || strings.Contains(msg, "not a certificate") {
				t.Errorf("error %q shows a file's contents", msg)
			}
		})
	}
}
