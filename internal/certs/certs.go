// Package certs makes the certificates of a wmrl deployment's TLS to
// Temporal (deploy/gencerts) and of the tests that exercise it
// (testenv.TLSCerts): a CA, a server and a client certificate.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the files Generate writes, in dir.
var Files = []string{"ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"}

// Generate writes into dir (created with mode 0700 if missing) a CA's
// certificate, a server certificate for the names dns and ips (valid for
// server and client authentication, as Temporal's services present it to one
// another) and a client certificate, each with its key, all valid for
// validity. The CA's key is never written. It refuses to overwrite any of
// Files; keys get mode 0600, certificates 0644.
func Generate(dir string, dns []string, ips []net.IP, validity time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range Files {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("%s exists: remove the directory's certificates to make a new set", filepath.Join(dir, f))
		}
	}
	now := time.Now().Add(-5 * time.Minute) // a little slack for clocks behind
	caKey, caCert, caDER, err := sign(nil, nil, &x509.Certificate{
		Subject:   pkix.Name{CommonName: "wmrl deployment CA"},
		NotBefore: now, NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	})
	if err != nil {
		return err
	}
	srvKey, _, srvDER, err := sign(caCert, caKey, &x509.Certificate{
		Subject:   pkix.Name{CommonName: firstName(dns, ips)},
		NotBefore: now, NotAfter: now.Add(validity),
		DNSNames: dns, IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	cliKey, _, cliDER, err := sign(caCert, caKey, &x509.Certificate{
		Subject:   pkix.Name{CommonName: "wmrl"},
		NotBefore: now, NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	srvKeyPEM, err := keyPEM(srvKey)
	if err != nil {
		return err
	}
	cliKeyPEM, err := keyPEM(cliKey)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"ca.pem", certPEM(caDER), 0o644},
		{"server.pem", certPEM(srvDER), 0o644},
		{"server-key.pem", srvKeyPEM, 0o600},
		{"client.pem", certPEM(cliDER), 0o644},
		{"client-key.pem", cliKeyPEM, 0o600},
	} {
		if err := writeNew(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func firstName(dns []string, ips []net.IP) string {
	if len(dns) > 0 {
		return dns[0]
	}
	return ips[0].String()
}

// sign makes a P-256 key and a certificate of tmpl signed by parentKey (self-signed when
// parent is nil), with a random 128-bit serial.
func sign(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		return nil, nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sign %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return key, cert, der, nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeNew creates path with mode (never following or replacing an existing file).
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, mode) // the umask may have narrowed it
}
