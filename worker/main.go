// Command wmrl-worker serves wmrl's Temporal task queues: the workflows and
// control activities (queue control), generation (rollout), world-model
// scoring (worldmodel), real executions (sandbox) and policy updates (gpu).
// --queues chooses which of them a process serves, so sandbox and GPU
// workers can run on other machines; by default it serves all of them.
//
// Every dependency is created once, here: the Postgres store, the logger,
// the metrics (--metrics-addr: package telemetry), the step's four ports
// (the built-in backend: the suite cache, the policy, the world model and
// the sandbox grader) and the worker's named backends, one registration
// each (registry.go: name, kind, --backends section, factory). The
// database must be migrated (`wmrl migrate`) before the first run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wmrl/wmrl/internal/namespace"
	"github.com/wmrl/wmrl/internal/temporallog"

	dockerclient "github.com/docker/docker/client"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/pysandbox"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tasks"
	"github.com/wmrl/wmrl/internal/telemetry"
	"github.com/wmrl/wmrl/internal/worldmodel"
	"github.com/wmrl/wmrl/workflows"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr, deployenv.Read(), serve))
}

// serve runs the worker with its options until SIGINT or SIGTERM.
func serve(ctx context.Context, o options) error {
	logger, err := newLogger(o.debug)
	if err != nil {
		return err
	}
	defer logger.Sync()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, o, logger)
}

func newLogger(debug bool) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	cfg.Encoding = "console"
	cfg.EncoderConfig = zap.NewDevelopmentEncoderConfig()
	if debug {
		cfg.Level = zap.NewAtomicLevelAt(zap.DebugLevel)
	}
	return cfg.Build()
}

func serves(o options, q string) bool {
	for _, x := range o.queues {
		if x == q {
			return true
		}
	}
	return false
}

// run creates every dependency once, the metrics first (a taken
// --metrics-addr fails before anything else starts), then serves the
// queues (serveQueues) until ctx is cancelled (SIGINT, SIGTERM).
func run(ctx context.Context, o options, logger *zap.Logger) error {
	exp, err := openMetrics(o.metricsAddr, logger)
	if err != nil {
		return err
	}
	defer exp.Close()
	acts := &activities.Activities{Logger: logger, DataDir: o.dataDir, Metrics: exp.Recorder()}
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	st, err := store.Open(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	acts.Store = st
	// The files of this deployment's runs are kept apart from other
	// deployments' sharing the data directory.
	dep, err := st.Deployment(ctx)
	if err != nil {
		return err
	}
	acts.RunsKey = deployenv.RunsKey(o.namespace, dep.Database, dep.ID)
	suites := &builtin.SuiteCache{Load: suite.Load}

	// Every queue's activities read tasks; the first build of a suite takes
	// a minute of CPU, so it happens before the worker takes work.
	logger.Info("loading suite", zap.Uint64("suite_seed", o.suiteSeed))
	if _, err := suites.Suite(ctx, o.suiteSeed); err != nil {
		return err
	}
	var wm, wm2 *worldmodel.Model
	if serves(o, "worldmodel") {
		if wm, err = loadWorldModel(o.worldModel); err != nil {
			return err
		}
		if wm2, err = loadWorldModelV2(o.worldModelV2); err != nil {
			return err
		}
	}
	var sb sandbox.Sandbox
	if serves(o, "sandbox") {
		var closeSB func() error
		if sb, closeSB, err = openSandbox(ctx, o, logger); err != nil {
			return err
		}
		defer closeSB()
		switch sb.(type) {
		case *sandbox.Docker:
			acts.SandboxKind = runconfig.SandboxDocker
		case *sandbox.Process:
			acts.SandboxKind = runconfig.SandboxProcess
		}
	}
	if err := setBackends(acts, backend.Builtin, suites, wm, sb); err != nil {
		return err
	}
	if wm2 != nil {
		acts.WorldModelV2 = &builtin.WorldModel{Model: wm2, Suites: suites}
		if dir, err := suite.CacheDir(); err == nil {
			acts.WorldModelV2.(*builtin.WorldModel).CacheDir = dir
		}
	}
	regs := registrations()
	f, err := readBackendsFile(o.backends, regs)
	if err != nil {
		return err
	}
	w := &wiring{st: st, getenv: os.Getenv, dataDir: o.dataDir, logger: logger, tasks: acts.Tasks,
		servesWorldModel: serves(o, "worldmodel")}
	defer w.close()
	if acts.Backends, err = buildBackends(ctx, w, f, regs); err != nil {
		return err
	}
	if names := acts.Backends.Names(); len(names) > 0 {
		logger.Info("backends", zap.Strings("backends", names))
	}

	return serveQueues(ctx, o, acts, exp, logger)
}

// openMetrics creates the worker's metrics and serves them on addr; with
// no addr, it returns nil (no metrics: a nil recorder and the SDK's no-op
// handler).
func openMetrics(addr string, logger *zap.Logger) (*telemetry.Exporter, error) {
	if addr == "" {
		return nil, nil
	}
	exp, err := telemetry.New(func(err error) { logger.Warn("metrics", zap.Error(err)) })
	if err != nil {
		return nil, err
	}
	if err := exp.Listen(addr); err != nil {
		exp.Close()
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	logger.Info("serving metrics", zap.String("url", "http://"+exp.Addr().String()+telemetry.Path))
	return exp, nil
}

// serveQueues dials Temporal (its SDK's metrics going to exp), starts one
// worker per served queue with acts and blocks until ctx is cancelled,
// then stops the workers, letting running activities finish within their
// stop timeout.
func serveQueues(ctx context.Context, o options, acts *activities.Activities, exp *telemetry.Exporter, logger *zap.Logger) error {
	// TLS from the environment ($TEMPORAL_TLS_*); none: plain text.
	c, err := client.Dial(client.Options{
		HostPort:          o.address,
		Namespace:         o.namespace,
		Logger:            temporallog.New(logger),
		MetricsHandler:    exp.TemporalHandler(),
		ConnectionOptions: client.ConnectionOptions{TLS: o.tls},
	})
	if err != nil {
		return fmt.Errorf("connect to temporal at %s: %w", o.address, err)
	}
	defer c.Close()
	// On an existing cluster the namespace may lack wmrl's search attributes
	// (the dev server registers them): add what is missing. Without the
	// permission to do so, say what is needed and go on.
	nsCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := namespace.Ensure(nsCtx, c, o.namespace, 72*time.Hour, workflows.SearchAttributes()); err != nil {
		logger.Warn("namespace setup: runs need the search attributes WmrlRunName, WmrlMode, WmrlStep, WmrlHeldoutScore", zap.Error(err))
	}
	cancel()

	var workers []worker.Worker
	for _, name := range o.queues {
		q, _ := workflows.Queue(name)
		w := worker.New(c, q, worker.Options{WorkerStopTimeout: 30 * time.Second})
		workflows.Register(w, q, acts)
		if err := w.Start(); err != nil {
			for _, s := range workers {
				s.Stop()
			}
			return fmt.Errorf("start worker on %s: %w", q, err)
		}
		workers = append(workers, w)
		logger.Info("serving", zap.String("queue", q))
	}
	logger.Info("worker ready", zap.String("address", o.address), zap.Bool("tls", o.tls != nil), zap.String("namespace", o.namespace),
		zap.Strings("queues", o.queues), zap.String("data_dir", o.dataDir), zap.String("runs", filepath.Join(o.dataDir, "runs", acts.RunsKey)))
	<-ctx.Done()
	logger.Info("stopping")
	for _, w := range workers {
		w.Stop()
	}
	return nil
}

// setBackends fills in the four ports of acts with the adapters of the
// named backend ("" or backend.Builtin, the only one today): the run
// config's policy.backend and world_model.backend accept no other. The
// world model and the grader are left nil (not a typed nil) when the worker
// serves neither the worldmodel nor the sandbox queue.
func setBackends(acts *activities.Activities, name string, suites builtin.Suites, wm *worldmodel.Model, sb sandbox.Sandbox) error {
	if name != "" && name != backend.Builtin {
		return fmt.Errorf("backend %q: this worker has only %q", name, backend.Builtin)
	}
	var model builtin.Predictor
	if wm != nil {
		model = wm
	}
	b := builtin.New(suites, model, sb)
	acts.Tasks, acts.Policy = b.Tasks, b.Policy
	if b.WorldModel != nil {
		// A refresh (world_model.refresh) regenerates the frozen model's
		// training data once; the cache keeps it across restarts.
		if dir, err := suite.CacheDir(); err == nil {
			b.WorldModel.CacheDir = dir
		}
		acts.WorldModel = b.WorldModel
	}
	if b.Grader != nil {
		acts.Grader = b.Grader
	}
	return nil
}

// loadWorldModelV2 loads the world model of world_model.features v2: the
// embedded default-v2.json, or the artefact at path, which must read v2.
func loadWorldModelV2(path string) (*worldmodel.Model, error) {
	if path == "" {
		return worldmodel.DefaultFor(worldmodel.FeaturesV2)
	}
	m, err := loadWorldModel(path)
	if err != nil {
		return nil, fmt.Errorf("--world-model-v2: %w", err)
	}
	if m.FeatureSet() != worldmodel.FeaturesV2 {
		return nil, fmt.Errorf("--world-model-v2 %s: the artefact reads feature set %s, not %s", path, m.FeatureSet(), worldmodel.FeaturesV2)
	}
	return m, nil
}

func loadWorldModel(path string) (*worldmodel.Model, error) {
	if path == "" {
		return worldmodel.Default()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("world model: %w", err)
	}
	m, err := worldmodel.Load(b)
	if err != nil {
		return nil, fmt.Errorf("world model %s: %w", path, err)
	}
	return m, nil
}

// openSandbox opens the configured sandbox; auto tries Docker and falls back
// to the process sandbox when no engine answers. A Docker sandbox first
// removes containers leaked by crashed workers.
func openSandbox(ctx context.Context, o options, logger *zap.Logger) (sandbox.Sandbox, func() error, error) {
	bin, err := sandbox.FindExecutor(o.executor)
	if err != nil {
		return nil, nil, err
	}
	kind := o.sandboxKind
	if kind == runconfig.SandboxAuto {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		sb, closeSB, err := sandbox.Open(pctx, sandbox.KindDocker, bin)
		cancel()
		if err == nil {
			cleanup(ctx, sb, logger)
			logger.Info("sandbox", zap.String("kind", sandbox.KindDocker))
			return sb, closeSB, nil
		}
		logger.Info("no docker engine, using the process sandbox", zap.Error(err))
		kind = sandbox.KindProcess
	}
	sb, closeSB, err := sandbox.Open(ctx, kind, bin)
	if err != nil {
		return nil, nil, err
	}
	cleanup(ctx, sb, logger)
	logger.Info("sandbox", zap.String("kind", kind), zap.String("executor", bin))
	return sb, closeSB, nil
}

// cleanup removes leftovers of crashed workers when the sandbox can.
func cleanup(ctx context.Context, sb sandbox.Sandbox, logger *zap.Logger) {
	c, ok := sb.(interface {
		Cleanup(context.Context) (int, error)
	})
	if !ok {
		return
	}
	n, err := c.Cleanup(ctx)
	if err != nil {
		logger.Warn("sandbox cleanup", zap.Error(err))
		return
	}
	if n > 0 {
		logger.Info("removed leaked sandbox containers", zap.Int("count", n))
	}
}

// openPython opens the Python sandbox of a --backends file and removes what
// crashed workers left behind (containers, staging directories).
func openPython(ctx context.Context, s pythonSection, dataDir string, logger *zap.Logger) (*pysandbox.Sandbox, error) {
	img := s.Image
	if img == "" {
		cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("--backends sandbox.python: %w", err)
		}
		img, err = pysandbox.LatestImage(ctx, cli)
		cli.Close()
		if err != nil {
			return nil, fmt.Errorf("--backends sandbox.python.image: none given and %w (build one: deploy/pyimage.sh)", err)
		}
	}
	sb, err := pysandbox.New(ctx, pysandbox.Options{Image: img, StagingDir: s.StagingDir})
	if err != nil {
		return nil, fmt.Errorf("--backends sandbox.python: %w", err)
	}
	if n, err := sb.Sweep(ctx); err != nil {
		logger.Warn("python sandbox cleanup", zap.Error(err))
	} else if n > 0 {
		logger.Info("removed leaked python sandbox containers", zap.Int("count", n))
	}
	logger.Info("python sandbox", zap.String("image", img), zap.String("tasks", tasks.StoreDir(dataDir)))
	return sb, nil
}
