package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wmrl/wmrl/internal/cmdline"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/workflows"
)

// Exit statuses of wmrl-worker, as wmrl's.
const (
	exitOK      = cmdline.ExitOK
	exitRuntime = cmdline.ExitFailure // the worker failed
	exitUsage   = cmdline.ExitUsage   // the command line is wrong
)

// version is the worker's version, set at build time with
// -ldflags "-X main.version=v1.2.3"; empty, it comes from the build info.
var version string

// options are the worker's settings, from flags with environment defaults.
type options struct {
	address, namespace string
	databaseURL        string
	dataDir            string
	suiteSeed          uint64
	sandboxKind        string
	executor           string
	worldModel         string
	worldModelV2       string
	backends           string
	queues             []string
	metricsAddr        string
	debug              bool
	// tls is TLS to Temporal, from the environment only (nil: plain
	// text), built before anything starts.
	tls *tls.Config
}

// execute runs the worker's command line and returns its exit status: 0,
// 1 when serve fails, 2 when the command line is wrong (one line on stderr,
// starting "wmrl-worker: "). serve runs with the parsed, checked options.
func execute(args []string, stdout, stderr io.Writer, env deployenv.Env, serve func(context.Context, options) error) int {
	cmd := newCommand(env, serve)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	if err != nil {
		fmt.Fprintln(stderr, "wmrl-worker:", cmdline.OneLine(err.Error()))
	}
	return cmdline.ExitStatus(err)
}

// newCommand is the worker's command line: flags with defaults from env,
// parsed and checked into options, then handed to serve.
func newCommand(env deployenv.Env, serve func(context.Context, options) error) *cobra.Command {
	var (
		o      options
		queues string
	)
	cmd := &cobra.Command{
		Use:   "wmrl-worker [flags]",
		Short: "Serve wmrl's Temporal task queues",
		Long: `wmrl-worker serves wmrl's Temporal task queues: the workflows and control
activities (control), generation (rollout), world-model scoring (worldmodel),
real executions (sandbox) and policy updates (gpu). --queues chooses which of
them this process serves, so that sandbox and GPU workers can run on other
machines; by default it serves all of them. It runs until SIGINT or SIGTERM.
With --metrics-addr it serves Prometheus metrics at http://ADDR/metrics.

The database must be migrated (wmrl migrate) before the first run.

Exit status: 0 when stopped by a signal; 1 when the worker fails; 2 for a
usage error. An error of the command line is one line on stderr.`,
		Version:       cmdline.Version(version),
		Args:          noArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(queues); err != nil {
				return err
			}
			if o.databaseURL == "" {
				o.databaseURL = env.DatabaseURL
			}
			// A wrong TLS file fails here, not after the suite has loaded.
			var err error
			if o.tls, err = env.TLS.Config(); err != nil {
				return err
			}
			return serve(cmd.Context(), o)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdline.UsageError{Err: err} })
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&queues, "queues", strings.Join(workflows.QueueNames(), ","), "comma-separated task queues to serve")
	f.StringVar(&o.sandboxKind, "sandbox", env.Sandbox,
		"sandbox for real executions: docker, process or auto (docker when an engine answers) ($"+deployenv.EnvSandbox+")")
	f.StringVar(&o.executor, "executor", "", "path of the wmrl-executor binary (default: $WMRL_EXECUTOR, next to this binary, or on the PATH)")
	f.StringVar(&o.worldModel, "world-model", "", "world-model artefact (JSON); default: the embedded one")
	f.StringVar(&o.worldModelV2, "world-model-v2", "", "world-model artefact on feature set v2, for runs with world_model.features: v2; default: the embedded default-v2.json")
	f.StringVar(&o.backends, "backends", env.Backends,
		"YAML file of this worker's remote backends: a Tinker policy, OpenAI-compatible or /grade world models, "+
			"/grade graders; keys only from the environment ($"+deployenv.EnvBackends+")")
	f.Uint64Var(&o.suiteSeed, "suite-seed", suite.DefaultSeed, "suite seed to load at start (others load on first use)")
	f.StringVar(&o.dataDir, "data-dir", env.DataDir,
		"directory of checkpoints and fused batches, shared by all workers; each deployment's runs are under "+
			"runs/<namespace>/<database>-<id> ($"+deployenv.EnvDataDir+")")
	f.StringVar(&o.metricsAddr, "metrics-addr", env.MetricsAddr,
		"host:port to serve Prometheus metrics on at /metrics (wmrl's series and the Temporal SDK's); empty: none ($"+
			deployenv.EnvMetricsAddr+")")
	f.BoolVar(&o.debug, "debug", false, "log at debug level")
	f.AddFlagSet(connFlags(&o, env))
	return cmd
}

// connFlags are the connection flags, with the names and defaults of
// wmrl's.
func connFlags(o *options, env deployenv.Env) *pflag.FlagSet {
	fs := pflag.NewFlagSet("connection", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&o.address, "address", env.Address, "Temporal frontend host:port ($"+deployenv.EnvAddress+")")
	fs.StringVar(&o.namespace, "namespace", env.Namespace, "Temporal namespace ($"+deployenv.EnvNamespace+")")
	// The default is not printed: the environment's DSN may hold a password.
	fs.StringVar(&o.databaseURL, "database-url", "",
		"Postgres DSN (default $"+deployenv.EnvDatabaseURL+", else \""+deployenv.DefaultDatabaseURL+"\")")
	return fs
}

// noArgs refuses positional arguments as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cmdline.Usagef("unexpected arguments %q", args)
	}
	return nil
}

// check checks the flags' values and reads --queues.
func (o *options) check(queues string) error {
	switch o.sandboxKind {
	case runconfig.SandboxAuto, runconfig.SandboxDocker, runconfig.SandboxProcess:
	default:
		return cmdline.Usagef("--sandbox: %q is not docker, process or auto", o.sandboxKind)
	}
	if o.metricsAddr != "" {
		if _, port, err := net.SplitHostPort(o.metricsAddr); err != nil || port == "" {
			return cmdline.Usagef("--metrics-addr: %q is not host:port (e.g. :9464 or 127.0.0.1:9464)", o.metricsAddr)
		}
	}
	seen := map[string]bool{}
	o.queues = nil
	for _, q := range strings.Split(queues, ",") {
		q = strings.TrimSpace(q)
		if _, err := workflows.Queue(q); err != nil {
			return cmdline.Usagef("--queues: %v", err)
		}
		if !seen[q] {
			seen[q] = true
			o.queues = append(o.queues, q)
		}
	}
	return nil
}
