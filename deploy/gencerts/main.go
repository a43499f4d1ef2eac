// Command gencerts makes the certificates of a wmrl deployment's TLS to
// Temporal: a certificate authority, a server certificate for the Temporal
// frontend (and its services among themselves) and a client certificate
// for the workers and the wmrl command, each with its key, as PEM files in
// one directory:
//
//	ca.pem                      the CA's certificate (the trust of both sides)
//	server.pem, server-key.pem  for the names of -names; server and client
//	                            authentication, as Temporal's services present
//	                            it to one another
//	client.pem, client-key.pem  client authentication
//
// The CA's private key is never written: once the two certificates are
// signed, nothing can sign another, and a new set replaces the whole
// directory. It refuses to overwrite an existing file. Keys are written
// with mode 0600, certificates 0644; nothing is printed but the
// directory's name.
//
//	go run ./deploy/gencerts -dir deploy/compose/.secrets/tls
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "gencerts:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gencerts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of the PEM files (created with mode 0700 if missing)")
	names := fs.String("names", "temporal,localhost,127.0.0.1", "comma-separated DNS names and IP addresses of the server certificate")
	days := fs.Int("days", 825, "validity of the certificates in days")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *dir == "" {
		return errors.New("-dir: required")
	}
	if *days < 1 {
		return fmt.Errorf("-days %d: want at least 1", *days)
	}
	var dns []string
	var ips []net.IP
	for _, n := range strings.Split(*names, ",") {
		n = strings.TrimSpace(n)
		switch ip := net.ParseIP(n); {
		case n == "":
		case ip != nil:
			ips = append(ips, ip)
		default:
			dns = append(dns, n)
		}
	}
	if len(dns)+len(ips) == 0 {
		return errors.New("-names: empty")
	}
	if err := generate(*dir, dns, ips, time.Duration(*days)*24*time.Hour); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gencerts: CA, server and client certificates in %s\n", *dir)
	return nil
}

// The files generate writes.
var files = []string{"ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"}

// generate writes the CA, server and client certificates and keys into dir.
func generate(dir string, dns []string, ips []net.IP, validity time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range files {
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
