package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/temporallog"
)

// The connection flag groups: Temporal's (--address, --namespace,
// --ui-url) and Postgres's (--database-url).
const (
	groupTemporal = "temporal"
	groupPostgres = "postgres"
)

// annotationConn, on a command, lists the connection flag groups it uses
// (comma-separated); its help shows those groups.
const annotationConn = "wmrl/connections"

// connGroups are the groups in the order the help shows them, with their
// titles.
var connGroups = []struct{ name, title string }{
	{groupTemporal, "Temporal flags"},
	{groupPostgres, "Postgres flags"},
}

// connFlags are the connection flags: where Temporal, its Web UI and
// Postgres are. They are persistent flags of the root command, so they may
// come before or after the subcommand; a command that needs neither
// ignores them and opens nothing. The defaults come from the environment,
// read once (deployenv).
type connFlags struct {
	address, namespace, uiURL string
	// databaseURL is "" unless given: its default, env.DatabaseURL, may
	// hold a password and is not printed in the help.
	databaseURL string
	env         deployenv.Env
}

// addConnFlags adds the connection flags to root as persistent flags in
// two groups, hidden from the generic flag lists: the help of a command
// shows the groups it uses (see uses and connHelp).
func addConnFlags(root *cobra.Command, env deployenv.Env) *connFlags {
	c := &connFlags{env: env}
	temporal := pflag.NewFlagSet(groupTemporal, pflag.ContinueOnError)
	temporal.StringVar(&c.address, "address", env.Address, "Temporal frontend host:port ($"+deployenv.EnvAddress+")")
	temporal.StringVar(&c.namespace, "namespace", env.Namespace, "Temporal namespace ($"+deployenv.EnvNamespace+")")
	temporal.StringVar(&c.uiURL, "ui-url", env.UIURL, "Temporal Web UI base URL ($"+deployenv.EnvUIURL+")")
	postgres := pflag.NewFlagSet(groupPostgres, pflag.ContinueOnError)
	postgres.StringVar(&c.databaseURL, "database-url", "",
		"Postgres DSN (default $"+deployenv.EnvDatabaseURL+", else \""+deployenv.DefaultDatabaseURL+"\")")
	for _, fs := range []*pflag.FlagSet{temporal, postgres} {
		fs.VisitAll(func(f *pflag.Flag) {
			f.Hidden = true
			f.Annotations = map[string][]string{annotationConn: {fs.Name()}}
		})
		root.PersistentFlags().AddFlagSet(fs)
	}
	return c
}

// uses records on cmd which connection flag groups it uses.
func uses(cmd *cobra.Command, groups ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationConn] = strings.Join(groups, ",")
}

// connHelp writes the connection flag groups cmd uses (all of them for the
// root command) after its help.
func connHelp(w io.Writer, cmd *cobra.Command) {
	used := strings.Split(cmd.Annotations[annotationConn], ",")
	all := !cmd.HasParent()
	for _, g := range connGroups {
		if !all && !contains(used, g.name) {
			continue
		}
		fs := pflag.NewFlagSet(g.name, pflag.ContinueOnError)
		cmd.Root().PersistentFlags().VisitAll(func(f *pflag.Flag) {
			if contains(f.Annotations[annotationConn], g.name) {
				shown := *f
				shown.Hidden = false
				fs.AddFlag(&shown)
			}
		})
		where := ""
		if all {
			where = ", for the commands that use them"
		}
		fmt.Fprintf(w, "\n%s (before or after the command%s):\n%s", g.title, where, fs.FlagUsages())
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// dsn is the Postgres DSN: --database-url, else the environment's.
func (c *connFlags) dsn() string {
	if c.databaseURL != "" {
		return c.databaseURL
	}
	return c.env.DatabaseURL
}

// dial connects to Temporal, over TLS when the environment says so
// (deployenv.TLS); the SDK logs only warnings, to stderr, through zap (the
// same bridge as the worker's).
func (c *connFlags) dial(ctx context.Context, stderr io.Writer) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(stderr), zapcore.WarnLevel)
	logger := temporallog.New(zap.New(core))
	// TLS from the environment ($TEMPORAL_TLS_*); none: plain text.
	tlsConf, err := c.env.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s: %w", c.address, err)
	}
	tc, err := client.DialContext(ctx, client.Options{HostPort: c.address, Namespace: c.namespace, Logger: logger,
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConf}})
	if err != nil {
		hint := "start one with deploy/temporal.sh start, or set --address"
		if tlsConf == nil {
			hint += "; over TLS, set $" + deployenv.EnvTLSCA + ", $" + deployenv.EnvTLSCert + " and $" + deployenv.EnvTLSKey
		}
		return nil, fmt.Errorf("connect to temporal at %s (%s): %w", c.address, hint, err)
	}
	return tc, nil
}

// open connects to Postgres and checks that the schema is there.
func (c *connFlags) open(ctx context.Context) (*store.Store, error) {
	st, err := store.Open(ctx, c.dsn())
	if err != nil {
		return nil, err
	}
	if ms, err := st.Applied(ctx); err != nil || len(ms) == 0 {
		st.Close()
		return nil, fmt.Errorf("the database has no wmrl schema: run `wmrl migrate` first (%v)", err)
	}
	return st, nil
}

// conns are the open connections of a command: Postgres and Temporal.
type conns struct {
	st *store.Store
	// tc is nil when Temporal did not answer a command that can do
	// without it (connectStore); noTemporal is then why.
	tc         client.Client
	noTemporal error
}

// Close closes the connections.
func (c conns) Close() {
	if c.tc != nil {
		c.tc.Close()
	}
	c.st.Close()
}

// connect opens Postgres (checking its schema), then Temporal: the one way
// the commands that need both get them.
func (c *connFlags) connect(ctx context.Context, stderr io.Writer) (conns, error) {
	st, err := c.open(ctx)
	if err != nil {
		return conns{}, err
	}
	tc, err := c.dial(ctx, stderr)
	if err != nil {
		st.Close()
		return conns{}, err
	}
	return conns{st: st, tc: tc}, nil
}

// connectStore opens Postgres (checking its schema) and, when it answers,
// Temporal: for the commands that can answer from Postgres alone (list,
// status), saying so.
func (c *connFlags) connectStore(ctx context.Context, stderr io.Writer) (conns, error) {
	st, err := c.open(ctx)
	if err != nil {
		return conns{}, err
	}
	tc, err := c.dial(ctx, stderr)
	return conns{st: st, tc: tc, noTemporal: err}, nil
}

// runURL is the Web UI page of a run's workflow.
func (c *connFlags) runURL(workflowID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(c.uiURL, "/"), c.namespace, workflowID)
}
