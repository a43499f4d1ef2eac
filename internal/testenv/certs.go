package testenv

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/certs"
)

// TLSFiles are the PEM files of a certificate authority made for one test:
// its certificate, a server certificate (for temporal, localhost and
// 127.0.0.1, valid for server and client authentication, as a Temporal
// server's own services present it to one another) and a client
// certificate, each with its key. Nothing signed by one TLSFiles is
// trusted by another.
type TLSFiles struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// TLSCerts makes a CA and its certificates in a temporary directory,
// valid for an hour, as deploy/gencerts does (certs.Generate).
func TLSCerts(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	if err := certs.Generate(dir, []string{"temporal", "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	return TLSFiles{
		CA:         p("ca.pem"),
		ServerCert: p("server.pem"), ServerKey: p("server-key.pem"),
		ClientCert: p("client.pem"), ClientKey: p("client-key.pem"),
	}
}
