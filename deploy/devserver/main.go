// Command temporal-dev is wmrl's local Temporal development server.
//
// One process runs every Temporal service (frontend, history, matching, worker) on
// 127.0.0.1 with SQLite persistence in a file, so a restart keeps every run. At startup it
// registers the namespace and the custom search attributes wmrl sets on its workflows, and
// it serves the Temporal Web UI from the ui-server's embedded assets.
//
//	temporal-dev serve [flags]     run the server until SIGINT or SIGTERM
//	temporal-dev check [flags]     wait until a frontend answers for a namespace
//	temporal-dev register [flags]  add the search attributes to a running cluster
//
// With --tls-cert and --tls-key the frontend, and the services among themselves, speak
// TLS only; with --tls-client-ca, mutual TLS (a client certificate of that CA required).
// The Web UI and the startup checks present the server's own certificate. check and
// register connect with --tls-ca, --tls-cert and --tls-key, by default wmrl's
// TEMPORAL_TLS_CA, TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY.
//
// It is a Go module of its own (deploy/devserver), so the main wmrl module never depends
// on the Temporal server. deploy/temporal.sh builds it once and starts and stops it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `usage: temporal-dev <command> [flags]

commands:
  serve     run a single-process Temporal dev server with the Web UI
  check     wait until a Temporal frontend answers for a namespace
  register  add search attributes to a namespace of a running cluster

Run "temporal-dev <command> -h" for the flags of a command.
`

// errUsage reports a command line that names no known command; main prints the usage.
var errUsage = errors.New("missing or unknown command")

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // the flag set printed its usage
	}
	if errors.Is(err, errUsage) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "temporal-dev: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "register":
		return register(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("%w %q", errUsage, args[0])
}
