// Command pipebench measures a run's throughput, steps per hour, with the
// asynchronous pipeline off and on (pipeline.max_off_policy d = 0, 1, 2
// side by side) where a step's stages take comparable time on different
// machines: the three HTTP backends (the Tinker API policy, the
// OpenAI-compatible world model, the /grade grader) against the handlers
// of wmrl serve, given the service times its --update-time (each policy
// update) and --grade-time (each graded item) set, emulating a GPU's and a
// sandbox's time on a machine with neither.
//
// Per d it runs one run of the tiny preset (more steps, -steps) on a real
// Temporal server with every queue served in this process, reads its
// steps' stage times from Postgres (stepsummary.Stages, recorded by the
// step workflow) and prints steps per hour over the steps' span (first
// step's start to last step's end), the mean stage seconds, and from the
// stages of d = 0 the ideals 3600/max(stage) (perfect overlap) and
// 3600/sum(stages) (none), where the stages are the rollout (generation,
// world-model scoring and executions, from the first Generate to the last
// answer), calibrate+fuse and the update. A d the run configuration
// refuses (before the pipeline's workflows exist, validation refuses
// d > 0) is reported as skipped with the validation's message.
//
// It starts no Temporal server: TEMPORAL_ADDRESS must answer
// (internal/bench/bench.sh starts a dev server on a spare port).
//
//	go run ./internal/bench/pipebench -executor bin/wmrl-executor
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/bench/benchenv"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/serve/gradeserve"
	"github.com/wmrl/wmrl/internal/serve/openaiserve"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pipebench:", err)
		os.Exit(1)
	}
}

type options struct {
	address, namespace string
	tls                *tls.Config
	databaseURL        string
	executor           string
	steps              int
	offPolicy          []int
	updateTime         time.Duration
	gradeTime          time.Duration
	capacity           int
	timeout            time.Duration
	// serveURL is a running wmrl serve (all three services) to use
	// instead of serving its handlers in process; its service times are
	// its own flags'.
	serveURL string
}

func parseFlags(args []string) (options, error) {
	var o options
	env := deployenv.Read()
	fs := flag.NewFlagSet("pipebench", flag.ContinueOnError)
	fs.StringVar(&o.address, "address", env.Address, "Temporal frontend ($TEMPORAL_ADDRESS)")
	fs.StringVar(&o.namespace, "namespace", "wmrl-pipebench", "Temporal namespace, registered if missing (its own, so no other worker takes the bench's tasks)")
	fs.StringVar(&o.databaseURL, "database-url", env.DatabaseURL, "Postgres DSN ($WMRL_DATABASE_URL)")
	fs.StringVar(&o.executor, "executor", "", "wmrl-executor binary (default: $WMRL_EXECUTOR, next to this binary or on the PATH)")
	fs.IntVar(&o.steps, "steps", 8, "steps per run")
	d := fs.String("d", "0,1,2", "comma-separated pipeline.max_off_policy values")
	fs.DurationVar(&o.updateTime, "update-time", 1250*time.Millisecond, "service time of each policy update (wmrl serve --update-time)")
	fs.DurationVar(&o.gradeTime, "grade-time", time.Second, "service time of each graded item (wmrl serve --grade-time)")
	fs.IntVar(&o.capacity, "capacity", 4, "items the grader takes at once (wmrl serve --capacity)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.StringVar(&o.serveURL, "serve", "", "URL of a running `wmrl serve` (grade, openai, tinker) with its own --update-time, --grade-time and --capacity; "+
		"default: its handlers in this process with -update-time, -grade-time and -capacity")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, f := range strings.Split(*d, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return o, fmt.Errorf("-d: %q is not a number >= 0", f)
		}
		o.offPolicy = append(o.offPolicy, v)
	}
	switch {
	case o.steps < 2:
		return o, fmt.Errorf("-steps %d: want at least 2", o.steps)
	case o.updateTime < 0 || o.gradeTime < 0:
		return o, fmt.Errorf("-update-time and -grade-time: want >= 0")
	case o.capacity < 1:
		return o, fmt.Errorf("-capacity %d: want >= 1", o.capacity)
	}
	var err error
	o.tls, err = env.TLS.Config()
	return o, err
}

// result is one d's measurement; skipped, when set, is why it did not run.
type result struct {
	d       int
	skipped string
	runID   string
	steps   int
	span    time.Duration
	// mean seconds per step of the rollout, calibrate+fuse, update, the
	// whole step, and of the step that overlapped other steps.
	rollout, fuse, update, step, overlapped float64
}

func (r result) perHour() float64 { return float64(r.steps) / r.span.Hours() }

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dataDir, err := os.MkdirTemp("", "pipebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)

	st, dep, err := benchenv.OpenStore(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	bin, err := sandbox.FindExecutor(o.executor)
	if err != nil {
		return err
	}
	sb, closeSB, err := sandbox.Open(ctx, sandbox.KindProcess, bin)
	if err != nil {
		return err
	}
	defer closeSB()
	wm, err := worldmodel.Default()
	if err != nil {
		return err
	}
	b := builtin.New(&builtin.SuiteCache{Load: suite.Load}, wm, sb)
	acts := &activities.Activities{Store: st, DataDir: dataDir, RunsKey: deployenv.RunsKey(o.namespace, dep.Database, dep.ID),
		Tasks: b.Tasks, Policy: b.Policy, WorldModel: b.WorldModel, Grader: b.Grader}
	url, served := o.serveURL, "wmrl serve at "+o.serveURL+" (its own service times)"
	if url == "" {
		var stopServe func()
		if url, stopServe, err = serve(st, b, o); err != nil {
			return err
		}
		defer stopServe()
		served = fmt.Sprintf("wmrl serve's handlers in process, update time %v, grade time %v per item at capacity %d",
			o.updateTime, o.gradeTime, o.capacity)
	}
	if acts.Backends, err = httpBackends(st, url); err != nil {
		return err
	}

	c, err := benchenv.Dial(ctx, o.address, o.namespace, o.tls)
	if err != nil {
		return err
	}
	defer c.Close()
	stopWorkers, err := benchenv.StartWorkers(c, acts, worker.Options{})
	if err != nil {
		return err
	}
	defer stopWorkers()

	fmt.Fprintf(out, "throughput: tiny preset, %d steps per run, Tinker policy, OpenAI world model, /grade grader over HTTP: %s; Temporal %s, %s\n\n",
		o.steps, served, o.address, time.Now().UTC().Format(time.RFC3339))
	var results []result
	for _, d := range o.offPolicy {
		r, err := measure(ctx, c, st, o, d)
		if err != nil {
			return fmt.Errorf("d = %d: %w", d, err)
		}
		results = append(results, r)
	}
	report(out, results)
	return nil
}

// serve serves the handlers of wmrl serve --services grade,openai,tinker
// with o's service times on a free loopback port.
func serve(st *store.Store, b builtin.Backend, o options) (string, func(), error) {
	gh, err := gradeserve.NewGrader(b.Grader, b.Tasks, gradeserve.Options{Capacity: o.capacity, ItemTime: o.gradeTime})
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(gradehttp.PathHealth, gh)
	mux.Handle(gradehttp.PathGrade, gh)
	mux.Handle("/v1/", openaiserve.New(b.WorldModel, b.Tasks, "wmrl-builtin"))
	mux.Handle("/api/v1/", tinkerserve.New(st.Pool(), b.Tasks, tinkerserve.Options{UpdateTime: o.updateTime}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// httpBackends are the three remote adapters against url.
func httpBackends(st *store.Store, url string) (*backend.Registry, error) {
	pol, err := tinker.New(tinker.Config{BaseURL: url, BaseModel: tinker.BuiltinBaseModel}, tinker.BuiltinTokenizer{},
		tinker.PostgresJournal{Store: st}, nil)
	if err != nil {
		return nil, err
	}
	ocfg := openaiwm.DefaultConfig()
	ocfg.BaseURL, ocfg.Model = url+"/v1", "wmrl-builtin"
	owm, err := openaiwm.New(ocfg, openaiwm.Key{}, openaiwm.StoreCache{Store: st})
	if err != nil {
		return nil, err
	}
	gr, err := gradehttp.New(gradehttp.Config{URL: url})
	if err != nil {
		return nil, err
	}
	return backend.NewRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol},
		backend.Entry{Kind: backend.KindWorldModel, Name: backend.OpenAI, Adapter: owm},
		backend.Entry{Kind: backend.KindGrader, Name: backend.GradeHTTP, Adapter: gr})
}

// config is the tiny preset with o.steps steps, the HTTP backends and d.
func config(o options, d int) runconfig.Config {
	cfg, _ := runconfig.Preset("tiny")
	cfg.Name = fmt.Sprintf("pipebench-d%d", d)
	cfg.Steps = o.steps
	cfg.ContinueAsNewEvery = o.steps + 1
	cfg.Policy.Backend, cfg.WorldModel.Backend, cfg.Sandbox.Kind = backend.Tinker, backend.OpenAI, backend.GradeHTTP
	cfg.Pipeline.MaxOffPolicy = d
	return cfg
}

// measure runs d's run to its end and reads its steps' stage times.
func measure(ctx context.Context, c client.Client, st *store.Store, o options, d int) (result, error) {
	r := result{d: d}
	cfg := config(o, d)
	if err := cfg.Validate(); err != nil {
		r.skipped = err.Error()
		return r, nil
	}
	r.runID = fmt.Sprintf("pipebench-d%d-%d", d, time.Now().UnixNano())
	if _, _, err := benchenv.RunToEnd(ctx, c, r.runID, cfg); err != nil {
		return r, err
	}
	rows, err := st.Steps(ctx, r.runID)
	if err != nil {
		return r, err
	}
	all := make([]stepsummary.Stages, len(rows))
	var first, last time.Time
	for i, row := range rows {
		sg := row.Metrics.Stages
		if row.Status != store.StepCompleted || sg.IsZero() {
			return r, fmt.Errorf("run %s step %d: %s, no stage times", r.runID, row.Step, row.Status)
		}
		all[i] = sg
		if first.IsZero() || sg.Step.Start.Before(first) {
			first = sg.Step.Start
		}
		if sg.Step.End.After(last) {
			last = sg.Step.End
		}
		r.rollout += rollout(sg).Seconds()
		r.fuse += sg.CalibrateFuse.Seconds()
		r.update += sg.Update.Seconds()
		r.step += sg.Step.Seconds()
	}
	for i := range all {
		for _, x := range stepsummary.Overlap(all, i) {
			if x.Stage == "step" {
				r.overlapped += x.Overlapped
			}
		}
	}
	n := float64(len(rows))
	r.steps, r.span = len(rows), last.Sub(first)
	r.rollout, r.fuse, r.update, r.step, r.overlapped = r.rollout/n, r.fuse/n, r.update/n, r.step/n, r.overlapped/n
	return r, nil
}

// rollout is the span from the rollout's first activity to its last:
// generation, world-model scoring and executions (or the turn loop).
func rollout(sg stepsummary.Stages) stepsummary.Span {
	if !sg.Turns.IsZero() {
		return sg.Turns
	}
	out := sg.Generate
	for _, sp := range []stepsummary.Span{sg.Score, sg.Execute} {
		if sp.IsZero() {
			continue
		}
		if sp.Start.Before(out.Start) {
			out.Start = sp.Start
		}
		if sp.End.After(out.End) {
			out.End = sp.End
		}
	}
	return out
}

func report(w io.Writer, rs []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "d\tsteps\tspan s\tsteps/hour\tvs d=0\trollout s\tcalibrate+fuse s\tupdate s\tstep s\toverlapped s\t")
	var base *result
	for i := range rs {
		r := &rs[i]
		if r.skipped != "" {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", r.d)
			continue
		}
		ratio := "-"
		if base == nil && r.d == 0 {
			base = r
		}
		if base != nil {
			ratio = fmt.Sprintf("%.2fx", r.perHour()/base.perHour())
		}
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.0f\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", r.d, r.steps, r.span.Seconds(), r.perHour(), ratio,
			r.rollout, r.fuse, r.update, r.step, r.overlapped)
	}
	tw.Flush()
	for _, r := range rs {
		if r.skipped != "" {
			fmt.Fprintf(w, "d = %d skipped: %s\n", r.d, r.skipped)
		}
	}
	if base != nil {
		sum := base.rollout + base.fuse + base.update
		most := math.Max(base.rollout, math.Max(base.fuse, base.update))
		fmt.Fprintf(w, "\nideal from d = 0's stages (rollout %.3f s, calibrate+fuse %.3f s, update %.3f s): "+
			"3600/max(stage) = %.0f steps/hour (full overlap), 3600/sum(stages) = %.0f steps/hour (none); "+
			"measured d = 0: %.0f steps/hour (its %.3f s per step beyond the stages is orchestration)\n",
			base.rollout, base.fuse, base.update, 3600/most, 3600/sum, base.perHour(), base.span.Seconds()/float64(base.steps)-sum)
	}
}
