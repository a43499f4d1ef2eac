package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
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
// valid for an hour.
func TLSCerts(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caPEM := leaf(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "wmrl test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	})
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f := TLSFiles{CA: write("ca.pem", caPEM)}
	key, _, cert := leaf(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "temporal"}, DNSNames: []string{"temporal", "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	f.ServerCert, f.ServerKey = write("server.pem", cert), write("server-key.pem", pemKey(t, key))
	key, _, cert = leaf(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "wmrl worker"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	f.ClientCert, f.ClientKey = write("client.pem", cert), write("client-key.pem", pemKey(t, key))
	return f
}

// leaf signs tmpl with parent's key (itself when parent is nil).
func leaf(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
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

func pemKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
