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
// The certificates are made by internal/certs. The CA's private key is never written: once the two certificates are
// signed, nothing can sign another, and a new set replaces the whole
// directory. It refuses to overwrite an existing file. Keys are written
// with mode 0600, certificates 0644; nothing is printed but the
// directory's name.
//
//	go run ./deploy/gencerts -dir deploy/compose/.secrets/tls
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/wmrl/wmrl/internal/certs"
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
	if err := certs.Generate(*dir, dns, ips, time.Duration(*days)*24*time.Hour); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gencerts: CA, server and client certificates in %s\n", *dir)
	return nil
}
