package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/serve/gradeserve"
	"github.com/wmrl/wmrl/internal/serve/openaiserve"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// Defaults of wmrl serve.
const (
	defaultListen = "127.0.0.1:8089"
	// worldModelPrefix is where the world model's /health and /grade are.
	worldModelPrefix = "/worldmodel"
	// shutdownGrace is how long a stopping server lets requests finish.
	shutdownGrace = 30 * time.Second
	maxCapacity   = 1 << 16
	// openAIModelName is the model name of the built-in world model over
	// chat completions.
	openAIModelName = "wmrl-builtin"
)

// serveOptions are wmrl serve's flags.
type serveOptions struct {
	listen               string
	sandboxKind          string
	executor             string
	worldModel           string
	suiteSeed            uint64
	capacity, wmCapacity int
	// deferPolls is how many polls of each Tinker future answer pending.
	deferPolls int
	// strictSeq makes the Tinker server refuse a model's request whose
	// seq_id is not the next one.
	strictSeq bool
	// services are the protocols served (serviceNames).
	services []string
	// updateTime and gradeTime are service times that emulate a GPU's
	// (each policy update) and a sandbox's (each graded item) on a
	// machine with neither.
	updateTime, gradeTime time.Duration
}

// maxServiceTime bounds --update-time and --grade-time.
const maxServiceTime = time.Hour

// The services of wmrl serve.
const (
	serviceGrade  = "grade"  // /health, /grade, /worldmodel/health, /worldmodel/grade
	serviceOpenAI = "openai" // /v1/chat/completions, /v1/models: the built-in world model
	serviceTinker = "tinker" // /api/v1/...: the built-in policy over the Tinker training API (needs Postgres)
)

var serviceNames = []string{serviceGrade, serviceOpenAI, serviceTinker}

func newServeCmd(cf *connFlags) *cobra.Command { return newServeCmdWith(cf, suite.DefaultOptions) }

func newServeCmdWith(cf *connFlags, options suiteOptionsFunc) *cobra.Command {
	o := serveOptions{listen: defaultListen}
	cmd := &cobra.Command{
		Use:   "serve [--listen HOST:PORT]",
		Short: "Serve the built-in policy, world model and grader over the protocols of remote backends",
		Long: `serve runs wmrl's built-in pieces as HTTP services speaking the protocols of
the remote backends (wmrl-worker --backends), so that a deployment's real
clients can be checked where no GPU, model server or grading service
exists. --services picks them (default: all):

  grade   the built-in grader (real executions in a sandbox) and world model
          over the /grade protocol of the grade-http backend
  openai  the built-in world model over OpenAI-compatible chat completions
          (POST /v1/chat/completions, GET /v1/models; model "` + openAIModelName + `"),
          for world_model.backend: openai; $WMRL_WORLD_MODEL_API_KEY, when set,
          is required as the bearer key; n > 1, stream: true (server-sent
          events) and prompts outside the template (answered with no
          prediction) are served as vLLM serves them
  tinker  the built-in policy over the Tinker training API (/api/v1/...;
          base model "wmrl/builtin-policy"), for policy.backend: tinker; its
          models and futures are kept in Postgres (--database-url; migrated
          with wmrl migrate), so a restart loses nothing; $TINKER_API_KEY, when
          set, is required

The /grade protocol, the reference implementation's:

  GET  /health             {"capacity": N}: how many items it grades at once
  POST /grade              {"items": [...]} -> one result per item, in order
  GET  /worldmodel/health  the same for the world model
  POST /worldmodel/grade   (the reward of a result is the prediction)

An item names a task of the built-in suite (task, suite), the program (code),
the execution's seed and limits, and carries its idempotency key (id); a
result has the status on the reward ladder, the reward, the leaderboard
position (pos) and feedback. See internal/backend/gradehttp for the contract.
The reference implementation's items are taken unchanged: one without a
suite is graded against --suite-seed's suite, its limit keys
(execution_timeout, memory_limit) lower the limits, and "action":
"request_info" answers the task's data structure without running anything.

--capacity bounds the executions running at once (and is what /health
advertises); --wm-capacity the world model's.

--update-time D and --grade-time D emulate a GPU's and a sandbox's time,
since the built-in pieces are much quicker than what they stand for: each
Tinker optim_step (one policy update, after its forward_backward) takes at
least D, holding its model's lock so a model's updates queue as on one GPU;
each item of /grade takes at least D more while it holds one of the
--capacity slots (a batch of N items at capacity C: ceil(N/C)·D). The world
model's /worldmodel/grade and chat completions get no service time. Use
them to measure throughput where the stages take comparable time (make
bench). When $` + gradehttp.TokenEnv + ` is set,
/grade requires it as a bearer token; /health is open. The suite of
--suite-seed loads at start, other suites on first use.

It runs until SIGINT or SIGTERM, then lets requests in flight finish (up to
30 s). Exit status: 0 when stopped by a signal; 1 when it cannot start (the
address is taken, no executor, no sandbox); 2 for a usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.sandboxKind == "" {
				o.sandboxKind = cf.env.Sandbox
			}
			if err := o.check(); err != nil {
				return err
			}
			return runServe(cmd, cf, o, options)
		},
	}
	uses(cmd, groupPostgres)
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&o.listen, "listen", o.listen, "address to serve on, HOST:PORT (port 0: any free port)")
	f.StringVar(&o.sandboxKind, "sandbox", "",
		"sandbox of the grader: docker, process or auto (docker when an engine answers) (default $WMRL_SANDBOX, else auto)")
	f.StringVar(&o.executor, "executor", "", "path of the wmrl-executor binary (default: $WMRL_EXECUTOR, next to wmrl, or on the PATH)")
	f.StringVar(&o.worldModel, "world-model", "", "world-model artefact (JSON); default: the embedded one")
	f.IntVar(&o.capacity, "capacity", o.capacity, "executions graded at once (default 0: the number of CPUs)")
	f.IntVar(&o.wmCapacity, "wm-capacity", o.wmCapacity, "world-model predictions made at once (default 0: the number of CPUs)")
	f.IntVar(&o.deferPolls, "defer", 0, "tinker: answer the first N polls of each future as pending (HTTP 408, then try_again), to exercise a client's waiting")
	f.BoolVar(&o.strictSeq, "strict-seq", false, "tinker: take a model's requests only in seq_id order 1, 2, 3, ... (refuse a gap or a request without seq_id with 409), as a service processing them in order would wait on a gap")
	f.DurationVar(&o.updateTime, "update-time", 0, "tinker: service time of each policy update (optim_step), emulating a GPU's time (e.g. 2s)")
	f.DurationVar(&o.gradeTime, "grade-time", 0, "grade: service time of each /grade item, in its capacity slot, emulating a sandbox's time (e.g. 500ms)")
	f.StringSliceVar(&o.services, "services", serviceNames, "services to run: grade, openai, tinker (comma-separated)")
	addSuiteSeedFlag(cmd, &o.suiteSeed)
	return cmd
}

// check refuses invalid flag values as usage errors.
func (o *serveOptions) check() error {
	if err := checkListen(o.listen); err != nil {
		return err
	}
	if len(o.services) == 0 {
		return usagef("--services: empty; want some of %v", serviceNames)
	}
	for _, s := range o.services {
		if !slices.Contains(serviceNames, s) {
			return usagef("--services: %q is not one of %v", clipArg(s), serviceNames)
		}
	}
	switch o.sandboxKind {
	case runconfig.SandboxAuto, runconfig.SandboxDocker, runconfig.SandboxProcess:
	default:
		return usagef("--sandbox: %q is not docker, process or auto", clipArg(o.sandboxKind))
	}
	for _, c := range []struct {
		name string
		v    *int
	}{{"capacity", &o.capacity}, {"wm-capacity", &o.wmCapacity}} {
		if *c.v == 0 {
			*c.v = runtime.NumCPU()
		}
		if err := intIn(c.name, *c.v, 1, maxCapacity); err != nil {
			return err
		}
	}
	if err := intIn("defer", o.deferPolls, 0, 1000); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"update-time", o.updateTime}, {"grade-time", o.gradeTime}} {
		if d.v < 0 || d.v > maxServiceTime {
			return usagef("--%s %v: want a duration in [0, %v]", d.name, d.v, maxServiceTime)
		}
	}
	return nil
}

// checkListen refuses an address that is not HOST:PORT with a port number.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--listen %q: want HOST:PORT, e.g. %s (%v)", clipArg(addr), defaultListen, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return usagef("--listen %q: port %q is not a number in 0..65535", clipArg(addr), clipArg(port))
	}
	return nil
}

// serveDeps are the services wmrl serve offers, each built once.
type serveDeps struct {
	// tasks resolves the items' (suite, task) for the built-in services.
	tasks backend.TaskSource
	// grader and worldModel are the built-in services (nil: not served),
	// with their handlers' options.
	grader            backend.Grader
	graderOptions     gradeserve.Options
	worldModel        backend.WorldModel
	worldModelOptions gradeserve.Options
	// openAI is the world model served over chat completions (nil: not
	// served); openAIKey is the bearer key it requires ("": none).
	openAI    backend.WorldModel
	openAIKey string
	// tinker is the built-in Tinker server (nil: not served).
	tinker http.Handler
}

// serveMux routes every service on one mux and lists its endpoints.
func serveMux(d serveDeps) (*http.ServeMux, []string, error) {
	mux := http.NewServeMux()
	var endpoints []string
	if d.grader != nil {
		h, err := gradeserve.NewGrader(d.grader, d.tasks, d.graderOptions)
		if err != nil {
			return nil, nil, err
		}
		mux.Handle(gradehttp.PathHealth, h)
		mux.Handle(gradehttp.PathGrade, h)
		endpoints = append(endpoints, "GET "+gradehttp.PathHealth, "POST "+gradehttp.PathGrade)
	}
	if d.worldModel != nil {
		h, err := gradeserve.NewWorldModel(d.worldModel, d.tasks, d.worldModelOptions)
		if err != nil {
			return nil, nil, err
		}
		mux.Handle(worldModelPrefix+"/", http.StripPrefix(worldModelPrefix, h))
		endpoints = append(endpoints, "GET "+worldModelPrefix+gradehttp.PathHealth, "POST "+worldModelPrefix+gradehttp.PathGrade)
	}
	if d.openAI != nil {
		var opts []openaiserve.Option
		if d.openAIKey != "" {
			opts = append(opts, openaiserve.WithAPIKey(d.openAIKey))
		}
		mux.Handle("/v1/", openaiserve.New(d.openAI, d.tasks, openAIModelName, opts...))
		endpoints = append(endpoints, "POST /v1/chat/completions", "GET /v1/models")
	}
	if d.tinker != nil {
		mux.Handle("/api/v1/", d.tinker)
		endpoints = append(endpoints, "POST /api/v1/... (Tinker)", "GET "+tinkerserve.PathHealthz)
	}
	return mux, endpoints, nil
}

// runServe builds the built-in pieces, serves them until SIGINT or
// SIGTERM (or the command's context ends), then shuts down gracefully.
func runServe(cmd *cobra.Command, cf *connFlags, o serveOptions, options suiteOptionsFunc) error {
	stderr := cmd.ErrOrStderr()
	logger := serveLogger(stderr)
	defer logger.Sync()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	suites := &builtin.SuiteCache{Load: func(ctx context.Context, seed uint64) (*suite.Suite, error) {
		return suite.Loader{Progress: stderr}.Load(ctx, options(seed))
	}}
	if _, err := suites.Suite(ctx, o.suiteSeed); err != nil {
		return fmt.Errorf("suite %d: %w", o.suiteSeed, err)
	}
	wm, err := worldmodel.LoadFile(o.worldModel)
	if err != nil {
		return err
	}
	var sb sandbox.Sandbox
	kind := "none"
	if slices.Contains(o.services, serviceGrade) {
		var closeSB func() error
		if sb, kind, closeSB, err = openServeSandbox(ctx, o, logger); err != nil {
			return err
		}
		defer closeSB()
	}
	b := builtin.New(suites, wm, sb)
	token := gradehttp.Token(os.Getenv(gradehttp.TokenEnv))
	deps := serveDeps{tasks: b.Tasks}
	if slices.Contains(o.services, serviceGrade) {
		deps.grader, deps.worldModel = b.Grader, b.WorldModel
		deps.graderOptions = gradeserve.Options{Capacity: o.capacity, Token: token, Logger: logger, Suite: &o.suiteSeed, ItemTime: o.gradeTime}
		deps.worldModelOptions = gradeserve.Options{Capacity: o.wmCapacity, Token: token, Logger: logger, Suite: &o.suiteSeed}
	}
	if slices.Contains(o.services, serviceOpenAI) {
		deps.openAI, deps.openAIKey = b.WorldModel, os.Getenv(openaiwm.EnvAPIKey)
	}
	if slices.Contains(o.services, serviceTinker) {
		st, err := store.Open(ctx, cf.dsn())
		if err != nil {
			return fmt.Errorf("--services tinker keeps its state in Postgres: %w", err)
		}
		defer st.Close()
		deps.tinker = tinkerserve.New(st.Pool(), b.Tasks, tinkerserve.Options{APIKey: os.Getenv(tinker.EnvAPIKey),
			Log: slog.New(slog.NewTextHandler(stderr, nil)), SuiteSeed: o.suiteSeed, Defer: o.deferPolls, StrictSeq: o.strictSeq,
			UpdateTime: o.updateTime})
	}
	mux, endpoints, err := serveMux(deps)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(logger)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("wmrl serve: listening", zap.String("url", "http://"+ln.Addr().String()), zap.Strings("endpoints", endpoints),
		zap.String("sandbox", kind), zap.Int("capacity", o.capacity), zap.Int("wm_capacity", o.wmCapacity),
		zap.Uint64("suite_seed", o.suiteSeed), zap.Bool("token", token != ""),
		zap.Duration("update_time", o.updateTime), zap.Duration("grade_time", o.gradeTime))

	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	logger.Info("wmrl serve: stopping; requests in flight may finish", zap.Duration("grace", shutdownGrace))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("stop: requests still running after %v: %w", shutdownGrace, err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("wmrl serve: stopped")
	return nil
}

// serveLogger logs at info level to w, as the worker does.
func serveLogger(w io.Writer) *zap.Logger {
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(w), zapcore.InfoLevel)
	return zap.New(core)
}

// openServeSandbox opens the sandbox as the worker does: auto tries Docker
// and falls back to the process sandbox when no engine answers; a Docker
// sandbox first removes containers leaked by crashed workers.
func openServeSandbox(ctx context.Context, o serveOptions, logger *zap.Logger) (sandbox.Sandbox, string, func() error, error) {
	bin, err := sandbox.FindExecutor(o.executor)
	if err != nil {
		return nil, "", nil, err
	}
	kind := o.sandboxKind
	if kind == runconfig.SandboxAuto {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		sb, closeSB, err := sandbox.Open(pctx, sandbox.KindDocker, bin)
		cancel()
		if err == nil {
			cleanupSandbox(ctx, sb, logger)
			return sb, sandbox.KindDocker, closeSB, nil
		}
		logger.Info("no docker engine, using the process sandbox", zap.Error(err))
		kind = sandbox.KindProcess
	}
	sb, closeSB, err := sandbox.Open(ctx, kind, bin)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%s sandbox: %w", kind, err)
	}
	cleanupSandbox(ctx, sb, logger)
	return sb, kind, closeSB, nil
}

// cleanupSandbox removes leftovers of crashed workers when the sandbox can.
func cleanupSandbox(ctx context.Context, sb sandbox.Sandbox, logger *zap.Logger) {
	c, ok := sb.(interface {
		Cleanup(context.Context) (int, error)
	})
	if !ok {
		return
	}
	if n, err := c.Cleanup(ctx); err != nil {
		logger.Warn("sandbox cleanup", zap.Error(err))
	} else if n > 0 {
		logger.Info("removed leaked sandbox containers", zap.Int("count", n))
	}
}
