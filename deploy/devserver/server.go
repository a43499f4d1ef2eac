package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	// clusterName names the single local cluster.
	clusterName = "active"
	// storeName names the SQLite data store holding both executions and visibility.
	storeName = "sqlite"
	// historyShards is fixed for the life of a database: changing it breaks an existing file.
	historyShards = 1
)

// serve runs the dev server until SIGINT or SIGTERM. It prints one "temporal-dev: ready"
// line on stdout once the namespace, its search attributes and the UI all answer.
func serve(args []string, stdout, stderr io.Writer) error {
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	return serveUntil(ctx, args, stdout, stderr)
}

// serveUntil runs the dev server until ctx ends.
func serveUntil(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseServe(args, stderr)
	if err != nil {
		return err
	}

	// Fail early and clearly on a taken port: the UI server would otherwise exit the process.
	for _, p := range []struct {
		ip   string
		port int
	}{{o.IP, o.Port}, {o.IP, o.HTTPPort}, {o.UI.IP, o.UIPort}} {
		if p.port == 0 {
			continue
		}
		if err := portFree(p.ip, p.port); err != nil {
			return err
		}
	}
	if o.HTTPPort == 0 {
		if o.HTTPPort, err = freePort(o.IP); err != nil {
			return err
		}
	}
	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: o.LogLevel, Format: "console"}))
	var stores persistenceStores
	if o.Postgres.enabled() {
		prepCtx, cancel := context.WithTimeout(ctx, o.StartTimeout)
		err := preparePostgres(prepCtx, o.Postgres, logger)
		cancel()
		if err != nil {
			return err
		}
		stores = persistenceStores{
			main: o.Postgres.sqlConfig(o.Postgres.Database), visibility: o.Postgres.sqlConfig(o.Postgres.Visibility),
			shards: postgresHistoryShards, where: "postgres://" + o.Postgres.Address + "/" + o.Postgres.Database,
		}
	} else {
		if o.DB, err = filepath.Abs(o.DB); err != nil {
			return fmt.Errorf("db path: %w", err)
		}
		sqlConf := sqliteConfig(o.DB)
		if err := prepareDatabase(sqlConf, o); err != nil {
			return err
		}
		stores = persistenceStores{main: sqlConf, shards: historyShards, where: o.DB}
	}
	srv, err := newTemporalServer(o, stores, logger)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start temporal: %w", err)
	}
	var ui *uiserver.Server
	shutdown := func() error {
		if ui != nil {
			ui.Stop()
		}
		if err := srv.Stop(); err != nil {
			return fmt.Errorf("stop temporal: %w", err)
		}
		return nil
	}

	if err := ready(ctx, o, func(u *uiserver.Server) { ui = u }); err != nil {
		return errors.Join(err, shutdown())
	}
	uiMode := ""
	if o.UIPort != 0 {
		uiMode = " ui-access=" + o.UI.mode()
	}
	fmt.Fprintf(stdout, "temporal-dev: ready frontend=%s http=%s namespace=%s ui=%s db=%s tls=%s%s\n",
		o.FrontendAddress(), net.JoinHostPort(o.IP, fmt.Sprint(o.HTTPPort)), o.Namespace, o.UIURL(), stores.where, o.TLS.mode(), uiMode)

	<-ctx.Done()
	fmt.Fprintln(stdout, "temporal-dev: shutting down")
	if err := shutdown(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "temporal-dev: stopped")
	return nil
}

// ready waits for the namespace, registers missing search attributes and starts the UI,
// all within o.StartTimeout. started receives the UI server as soon as it runs.
func ready(ctx context.Context, o serveOptions, started func(*uiserver.Server)) error {
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	tlsConf, err := o.TLS.clientConfig()
	if err != nil {
		return err
	}
	c, err := dial(o.FrontendAddress(), tlsConf)
	if err != nil {
		return err
	}
	defer c.Close()
	// A SQLite file gets its namespace with the schema; a Postgres cluster through the
	// frontend, once it answers.
	if o.Postgres.enabled() {
		if err := c.ensureNamespace(ctx, o.Namespace, o.Retention); err != nil {
			return err
		}
	}
	if err := c.waitNamespace(ctx, o.Namespace); err != nil {
		return err
	}
	// A new database has the attributes from its namespace record; an older one may lack
	// attributes added to the list since, and gets them through the operator API.
	if _, err := c.ensureSearchAttributes(ctx, o.Namespace, o.SearchAttributes); err != nil {
		return err
	}
	if o.UIPort == 0 {
		return nil
	}
	// The UI server exits the process when its OIDC provider does not answer: ask first.
	if err := o.UI.checkProvider(ctx); err != nil {
		return err
	}
	ui := newUIServer(o)
	started(ui)
	go func() {
		// Start blocks until Stop; a listen failure exits the process from inside the
		// UI server, which portFree makes unlikely.
		_ = ui.Start()
	}()
	return waitPort(ctx, o.UIAddress())
}

func sqliteConfig(path string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"busy_timeout": "10000",
		},
	}
}

// prepareDatabase creates the schema when the file does not exist yet, then the namespace
// with its search attributes and retention if the database lacks it (an existing namespace
// is left as it is).
func prepareDatabase(conf *config.SQL, o serveOptions) error {
	if err := os.MkdirAll(filepath.Dir(o.DB), 0o755); err != nil {
		return fmt.Errorf("database directory: %w", err)
	}
	_, err := os.Stat(o.DB)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := sqliteschema.SetupSchema(conf); err != nil {
			// Leave no half-initialised file behind: the next start would skip the schema.
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(o.DB + suffix)
			}
			return fmt.Errorf("create schema in %s: %w", o.DB, err)
		}
	case err != nil:
		return fmt.Errorf("database file: %w", err)
	}
	attrs := make(map[string]enumspb.IndexedValueType, len(o.SearchAttributes))
	for _, a := range o.SearchAttributes {
		attrs[a.Name] = a.Type
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, o.Namespace, false, attrs)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", o.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(o.Retention)
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return fmt.Errorf("namespace %s: %w", o.Namespace, err)
	}
	return nil
}

// newTemporalServer wires frontend, history, matching and worker into one process. Only
// the frontend listens on chosen ports (o.HTTPPort is set by now); the internal services
// take free ports.
// persistenceStores are the SQL stores of the server: main holds executions (and
// visibility when visibility is nil); where names them for the ready line.
type persistenceStores struct {
	main, visibility *config.SQL
	shards           int32
	where            string
}

func newTemporalServer(o serveOptions, stores persistenceStores, logger log.Logger) (temporal.Server, error) {
	hosts := map[primitives.ServiceName]static.Hosts{}
	services := map[string]config.Service{}
	for _, name := range []primitives.ServiceName{
		primitives.FrontendService, primitives.HistoryService,
		primitives.MatchingService, primitives.WorkerService,
	} {
		rpc := config.RPC{BindOnIP: o.IP}
		if name == primitives.FrontendService {
			rpc.GRPCPort, rpc.HTTPPort = o.Port, o.HTTPPort
		} else {
			p, err := freePort(o.IP)
			if err != nil {
				return nil, err
			}
			rpc.GRPCPort = p
		}
		services[string(name)] = config.Service{RPC: rpc}
		hosts[name] = static.SingleLocalHost(net.JoinHostPort(o.IP, fmt.Sprint(rpc.GRPCPort)))
	}

	frontend := o.FrontendAddress()
	conf := &config.Config{Services: services}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = o.IP
	conf.Persistence.NumHistoryShards = stores.shards
	if stores.visibility == nil {
		conf.Persistence.DefaultStore = storeName
		conf.Persistence.VisibilityStore = storeName
		conf.Persistence.DataStores = map[string]config.DataStore{storeName: {SQL: stores.main}}
	} else {
		conf.Persistence.DefaultStore = "postgres"
		conf.Persistence.VisibilityStore = "postgres-visibility"
		conf.Persistence.DataStores = map[string]config.DataStore{
			"postgres": {SQL: stores.main}, "postgres-visibility": {SQL: stores.visibility},
		}
	}
	info := cluster.ClusterInformation{
		Enabled:                true,
		InitialFailoverVersion: 1,
		RPCAddress:             frontend,
		HTTPAddress:            net.JoinHostPort(o.IP, fmt.Sprint(o.HTTPPort)),
	}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation:       map[string]cluster.ClusterInformation{clusterName: info},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	conf.Global.TLS = o.TLS.rootTLS()

	dyn := dynamicconfig.StaticClient{
		// The UI polls visibility for lists and counts; the default of 10/s throttles it.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
	}
	for k, v := range o.DynamicConfig {
		dyn[dynamicconfig.MakeKey(k)] = v
	}

	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
			return authorization.NewNoopClaimMapper()
		}),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("build temporal server: %w", err)
	}
	return srv, nil
}

// newUIServer configures the Web UI: on o.UI.IP, read-only unless o.UI.Writes, with
// its OIDC login when o.UI.Auth is set (uiOptions says why).
func newUIServer(o serveOptions) *uiserver.Server {
	c := &uiconfig.Config{
		Host:                o.UI.IP,
		Port:                o.UIPort,
		TemporalGRPCAddress: o.FrontendAddress(),
		EnableUI:            true,
		DefaultNamespace:    o.Namespace,
		// Plain HTTP on localhost: the CSRF cookie must not require HTTPS.
		CORS:             uiconfig.CORS{CookieInsecure: true},
		HideLogs:         true,
		DisableNewsFetch: true,
		TLS:              o.TLS.uiTLS(),
	}
	o.UI.apply(c)
	return uiserver.NewServer(uioptions.WithConfigProvider(c))
}

// portFree reports an error if something already listens on ip:port.
func portFree(ip string, port int) error {
	addr := net.JoinHostPort(ip, fmt.Sprint(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port %s is not free: %w", addr, err)
	}
	return ln.Close()
}

// freePort asks the kernel for a free port on ip.
func freePort(ip string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitPort waits until addr accepts TCP connections.
func waitPort(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", addr, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
