package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"

	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"go.temporal.io/server/common/config"
)

// The variables of TLS to a frontend, as wmrl's (internal/deployenv): the client
// commands take their flags' defaults from them.
const (
	envTLSCA         = "TEMPORAL_TLS_CA"
	envTLSCert       = "TEMPORAL_TLS_CERT"
	envTLSKey        = "TEMPORAL_TLS_KEY"
	envTLSServerName = "TEMPORAL_TLS_SERVER_NAME"
)

// serverTLS is the TLS of serve: the frontend's certificate, which the internal services
// also serve and present to one another, and with ClientCA, mutual TLS. The files are
// read by Temporal and the UI server; only their paths are here, never their contents.
type serverTLS struct {
	Cert, Key string
	// ClientCA, when set, is the CA bundle a client's certificate must be signed by
	// (mutual TLS, on the frontend and between the services).
	ClientCA string
	// CA is the bundle that verifies Cert for the server's own clients: the services, the
	// system workers, the Web UI and the startup checks (default ClientCA).
	CA string
	// ServerName is the name those clients check in Cert (default: --ip if Cert covers
	// it, else its first DNS name).
	ServerName string
}

func (t serverTLS) enabled() bool { return t.Cert != "" }

// mode names the frontend's security for the ready line: off, on (TLS) or mutual.
func (t serverTLS) mode() string {
	switch {
	case !t.enabled():
		return "off"
	case t.ClientCA != "":
		return "mutual"
	}
	return "on"
}

func addServerTLSFlags(fs *flag.FlagSet, t *serverTLS) {
	fs.StringVar(&t.Cert, "tls-cert", "", "PEM certificate of the frontend (and of the services among themselves): serve TLS")
	fs.StringVar(&t.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&t.ClientCA, "tls-client-ca", "", "PEM CA bundle of client certificates: require and verify one (mutual TLS)")
	fs.StringVar(&t.CA, "tls-ca", "", "PEM CA bundle of --tls-cert, for the server's own clients and the Web UI (default --tls-client-ca)")
	fs.StringVar(&t.ServerName, "tls-server-name", "", "name the server's own clients verify in --tls-cert (default: --ip if it covers it, else its first DNS name)")
}

// check validates the files, fills in CA and ServerName, and checks that the server's own
// clients will accept its certificate (and, with mutual TLS, it theirs: the same one).
func (t *serverTLS) check(ip string) error {
	if !t.enabled() {
		if t.Key != "" || t.ClientCA != "" || t.CA != "" || t.ServerName != "" {
			return errors.New("--tls-key, --tls-client-ca, --tls-ca and --tls-server-name need --tls-cert")
		}
		return nil
	}
	if t.Key == "" {
		return errors.New("--tls-cert needs --tls-key")
	}
	pair, err := loadKeyPair("--tls-cert", t.Cert, "--tls-key", t.Key)
	if err != nil {
		return err
	}
	caFlag := "--tls-ca"
	if t.CA == "" {
		t.CA, caFlag = t.ClientCA, "--tls-client-ca"
	}
	if t.CA == "" {
		return errors.New("--tls-cert needs --tls-ca (the CA of the certificate, for the server's own clients) or --tls-client-ca")
	}
	roots, err := loadPool(caFlag, t.CA)
	if err != nil {
		return err
	}
	leaf := pair.Leaf
	if t.ServerName == "" {
		switch {
		case leaf.VerifyHostname(ip) == nil:
			t.ServerName = ip
		case len(leaf.DNSNames) > 0:
			t.ServerName = leaf.DNSNames[0]
		default:
			return fmt.Errorf("--tls-cert %s names neither %s nor a DNS name: set --tls-server-name", t.Cert, ip)
		}
	}
	intermediates := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			intermediates.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: t.ServerName, Roots: roots, Intermediates: intermediates,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("--tls-cert %s does not verify under %s %s for %s: %w", t.Cert, caFlag, t.CA, t.ServerName, err)
	}
	if t.ClientCA != "" {
		clientRoots, err := loadPool("--tls-client-ca", t.ClientCA)
		if err != nil {
			return err
		}
		// The services present the frontend's certificate to one another.
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: clientRoots, Intermediates: intermediates,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return fmt.Errorf("--tls-cert %s is not a client certificate under --tls-client-ca %s (the services present it to one another): %w",
				t.Cert, t.ClientCA, err)
		}
	}
	return nil
}

// rootTLS is Temporal's TLS configuration: the frontend and the services among themselves
// serve the certificate, and, with mutual TLS, require one signed by ClientCA; their clients
// (the services' and the system workers' to the frontend) verify it with CA and present it.
func (t serverTLS) rootTLS() config.RootTLS {
	if !t.enabled() {
		return config.RootTLS{}
	}
	server := config.ServerTLS{CertFile: t.Cert, KeyFile: t.Key}
	if t.ClientCA != "" {
		server.ClientCAFiles = []string{t.ClientCA}
		server.RequireClientAuth = true
	}
	client := config.ClientTLS{ServerName: t.ServerName, RootCAFiles: []string{t.CA}}
	group := config.GroupTLS{Server: server, Client: client}
	return config.RootTLS{Internode: group, Frontend: group}
}

// uiTLS is the Web UI's TLS to the frontend: the server's own certificate as its client
// certificate, verified against CA for ServerName.
func (t serverTLS) uiTLS() uiconfig.TLS {
	if !t.enabled() {
		return uiconfig.TLS{}
	}
	return uiconfig.TLS{CaFile: t.CA, CertFile: t.Cert, KeyFile: t.Key, ServerName: t.ServerName, EnableHostVerification: true}
}

// clientConfig is the TLS of the startup checks: as the UI's.
func (t serverTLS) clientConfig() (*tls.Config, error) {
	if !t.enabled() {
		return nil, nil
	}
	return clientTLS{CA: t.CA, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName}.config()
}

// clientTLS is the TLS of check and register, with wmrl's variables as defaults.
type clientTLS struct {
	CA, Cert, Key, ServerName string
}

func addClientTLSFlags(fs *flag.FlagSet, t *clientTLS) {
	fs.StringVar(&t.CA, "tls-ca", os.Getenv(envTLSCA), "PEM CA bundle that verifies the frontend: connect with TLS ($"+envTLSCA+")")
	fs.StringVar(&t.Cert, "tls-cert", os.Getenv(envTLSCert), "PEM client certificate, for mutual TLS ($"+envTLSCert+")")
	fs.StringVar(&t.Key, "tls-key", os.Getenv(envTLSKey), "PEM private key of --tls-cert ($"+envTLSKey+")")
	fs.StringVar(&t.ServerName, "tls-server-name", os.Getenv(envTLSServerName), "name to verify in the frontend's certificate (default: the host of --address) ($"+envTLSServerName+")")
}

// config is the client TLS configuration (TLS 1.2 at least), or nil for plain text when no
// flag is set. A bad file is an error naming its flag and path, never showing its contents.
func (t clientTLS) config() (*tls.Config, error) {
	if t == (clientTLS{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pool, err := loadPool("--tls-ca", t.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.Cert == "" && t.Key == "":
	case t.Key == "":
		return nil, errors.New("--tls-cert needs --tls-key")
	case t.Cert == "":
		return nil, errors.New("--tls-key needs --tls-cert")
	default:
		pair, err := loadKeyPair("--tls-cert", t.Cert, "--tls-key", t.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// loadPool reads a PEM CA bundle.
func loadPool(flagName, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", flagName, path)
	}
	return pool, nil
}

// loadKeyPair reads a PEM certificate and its key; crypto/tls's errors say what is wrong,
// never the PEM.
func loadKeyPair(certFlag, certPath, keyFlag, keyPath string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", certFlag, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", keyFlag, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s and %s %s: %w", certFlag, certPath, keyFlag, keyPath, err)
	}
	return pair, nil
}
