package deployenv

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// The environment variables of TLS to the Temporal frontend. They hold
// paths of PEM files, never their contents; none set is plain text.
const (
	// EnvTLSCA is the CA bundle that verifies the frontend's certificate
	// (unset: the system's roots).
	EnvTLSCA = "TEMPORAL_TLS_CA"
	// EnvTLSCert and EnvTLSKey are the process's client certificate and
	// its private key, for a frontend that requires one (mutual TLS).
	EnvTLSCert = "TEMPORAL_TLS_CERT"
	EnvTLSKey  = "TEMPORAL_TLS_KEY"
	// EnvTLSServerName is the name the frontend's certificate must carry,
	// when it is not the host of TEMPORAL_ADDRESS.
	EnvTLSServerName = "TEMPORAL_TLS_SERVER_NAME"
)

// TLS is how a process reaches the Temporal frontend over TLS: the paths
// of its files and the server name, each from its variable. The zero
// value is plain text.
type TLS struct {
	CA, Cert, Key, ServerName string
}

func readTLS(getenv func(string) string) TLS {
	return TLS{CA: getenv(EnvTLSCA), Cert: getenv(EnvTLSCert), Key: getenv(EnvTLSKey), ServerName: getenv(EnvTLSServerName)}
}

// Enabled reports whether any TLS variable is set.
func (t TLS) Enabled() bool { return t != TLS{} }

// Config is the client TLS configuration of t (TLS 1.2 at least): nil
// without any variable set, so the connection stays plain text. A file
// that is missing, unreadable or holds no valid PEM, or a certificate
// without its key, is an error naming the variable. Errors name paths,
// never the files' contents.
func (t TLS) Config() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", EnvTLSCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("$%s: %s holds no PEM certificate", EnvTLSCA, t.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.Cert != "" && t.Key == "":
		return nil, fmt.Errorf("$%s is set without $%s (the client certificate's private key)", EnvTLSCert, EnvTLSKey)
	case t.Key != "" && t.Cert == "":
		return nil, fmt.Errorf("$%s is set without $%s (the client certificate)", EnvTLSKey, EnvTLSCert)
	case t.Cert != "":
		certPEM, err := os.ReadFile(t.Cert)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", EnvTLSCert, err)
		}
		keyPEM, err := os.ReadFile(t.Key)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", EnvTLSKey, err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// crypto/tls's errors say what is wrong, never the PEM.
			return nil, fmt.Errorf("$%s %s and $%s %s: %w", EnvTLSCert, t.Cert, EnvTLSKey, t.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
