// Command orchbench measures wmrl's orchestration overhead on a real
// Temporal server: the wall time of a training step minus the time spent
// inside its activities, and the size of the step and run histories.
//
// It serves every task queue in this process (real activities: Postgres,
// the built-in suite, the stored world model, the process sandbox), runs one
// short wmrl run per size (G groups × n samples per step, the rest of the
// default preset), then reads each step child's history through the
// Temporal client. Per step: wall = WorkflowExecutionStarted to
// WorkflowExecutionCompleted; in activities = the union of the
// [ActivityTaskStarted, ActivityTaskCompleted] intervals; overhead = wall −
// union, split into time in which an activity waited in its task queue,
// time in which only a workflow task was pending, and the rest. From the run
// workflow's segments it measures the events of one step cycle, the fixed
// part and a held-out evaluation, and projects the history of each
// execution of a long run (default: 1000 steps, continue-as-new every 50).
//
// It starts no server: TEMPORAL_ADDRESS must answer (internal/bench/bench.sh
// starts a dev server on a spare port). It uses a namespace of its own,
// registered if missing, and migrates the database on start.
//
// Run from the repository root:
//
//	go run ./internal/bench/orchbench -executor bin/wmrl-executor
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/bench/benchenv"
	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/worldmodel"
	"github.com/wmrl/wmrl/workflows"
)

// Temporal's per-execution history limits (the server's defaults).
const (
	limitEvents = 51200
	limitBytes  = 50 << 20
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orchbench:", err)
		os.Exit(1)
	}
}

// size is one measured shape: groups × samples trajectories per step, of
// turns turns each (trajectory.turns; 0 or 1: single-shot).
type size struct{ groups, samples, turns int }

// String is GROUPSxSAMPLES, with xTURNS for more than one turn.
func (s size) String() string {
	if s.turns > 1 {
		return fmt.Sprintf("%dx%dx%d", s.groups, s.samples, s.turns)
	}
	return fmt.Sprintf("%dx%d", s.groups, s.samples)
}

type options struct {
	address, namespace string
	// tls is TLS to Temporal, from $TEMPORAL_TLS_* only (nil: plain text).
	tls          *tls.Config
	databaseURL  string
	dataDir      string
	executor     string
	sandboxKind  string
	sizes        []size
	steps, k     int
	evalTasks    int
	projectSteps int
	timeout      time.Duration
	// pollers is the activity task pollers per queue (0: the SDK's
	// default); parallelism overrides the preset's fan-out bound when > 0.
	pollers, parallelism int
}

func parseSizes(text string) ([]size, error) {
	var out []size
	for _, f := range strings.Split(text, ",") {
		parts := strings.Split(strings.TrimSpace(f), "x")
		if len(parts) != 2 && len(parts) != 3 {
			return nil, fmt.Errorf("size %q: want GROUPSxSAMPLES or GROUPSxSAMPLESxTURNS", f)
		}
		gi, err1 := strconv.Atoi(parts[0])
		ni, err2 := strconv.Atoi(parts[1])
		ki, err3 := 1, error(nil)
		if len(parts) == 3 {
			ki, err3 = strconv.Atoi(parts[2])
		}
		if err1 != nil || err2 != nil || err3 != nil || gi < 1 || ni < 2 || ki < 1 {
			return nil, fmt.Errorf("size %q: want GROUPSxSAMPLES[xTURNS] with groups >= 1, samples >= 2, turns >= 1", f)
		}
		out = append(out, size{gi, ni, ki})
	}
	return out, nil
}

func parseFlags(args []string) (options, error) {
	var o options
	env := deployenv.Read()
	fs := flag.NewFlagSet("orchbench", flag.ContinueOnError)
	fs.StringVar(&o.address, "address", env.Address, "Temporal frontend ($TEMPORAL_ADDRESS)")
	fs.StringVar(&o.namespace, "namespace", "wmrl-orchbench",
		"Temporal namespace, registered with wmrl's search attributes if missing (its own, so that no other worker takes the bench's tasks)")
	fs.StringVar(&o.databaseURL, "database-url", env.DatabaseURL, "Postgres DSN ($WMRL_DATABASE_URL)")
	fs.StringVar(&o.dataDir, "data-dir", "", "checkpoint directory (default: a temporary directory, removed at the end)")
	fs.StringVar(&o.executor, "executor", "", "wmrl-executor binary (default: $WMRL_EXECUTOR, next to this binary or on the PATH)")
	fs.StringVar(&o.sandboxKind, "sandbox", sandbox.KindProcess,
		"sandbox of real executions: process, docker or auto (docker when an engine answers, as the default preset's worker)")
	sizes := fs.String("sizes", "8x8,32x8,128x8",
		"comma-separated GROUPSxSAMPLES[xTURNS] per step (32x8 is the default preset; xTURNS sets trajectory.turns)")
	fs.IntVar(&o.steps, "steps", 6, "steps per run")
	fs.IntVar(&o.k, "k", 3, "continue-as-new every k steps in the measured runs")
	fs.IntVar(&o.evalTasks, "eval-tasks", 2, "held-out tasks of the final evaluation (1 sample each)")
	fs.IntVar(&o.projectSteps, "project-steps", 1000, "run length of the history projection")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.IntVar(&o.pollers, "activity-pollers", 0, "activity task pollers per queue (0: the SDK's default, as wmrl-worker)")
	fs.IntVar(&o.parallelism, "parallelism", 0, "fan-out bound of the runs (0: the default preset's)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.sizes, err = parseSizes(*sizes); err != nil {
		return o, fmt.Errorf("-sizes: %w", err)
	}
	if o.steps < 2 || o.k < 2 || o.k >= o.steps {
		return o, fmt.Errorf("want 2 <= -k < -steps so that a segment continues as new with two steps, got k=%d steps=%d", o.k, o.steps)
	}
	if o.evalTasks < 1 || o.projectSteps < 1 {
		return o, fmt.Errorf("-eval-tasks and -project-steps must be positive")
	}
	if o.tls, err = env.TLS.Config(); err != nil {
		return o, err
	}
	return o, nil
}

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
	if o.dataDir == "" {
		dir, err := os.MkdirTemp("", "orchbench-")
		if err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		defer os.RemoveAll(dir)
		o.dataDir = dir
	}

	st, dep, err := benchenv.OpenStore(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	acts := &activities.Activities{Store: st, DataDir: o.dataDir, RunsKey: deployenv.RunsKey(o.namespace, dep.Database, dep.ID)}
	suites := &builtin.SuiteCache{Load: suite.Load}
	su, err := suites.Suite(ctx, suite.DefaultSeed)
	if err != nil {
		return err
	}
	heldOutTasks := len(su.Split(suite.HeldOut))
	wm, err := worldmodel.Default()
	if err != nil {
		return err
	}
	bin, err := sandbox.FindExecutor(o.executor)
	if err != nil {
		return err
	}
	sb, kind, closeSB, err := openSandbox(ctx, o.sandboxKind, bin)
	if err != nil {
		return err
	}
	defer closeSB()
	b := builtin.New(suites, wm, sb)
	acts.Tasks, acts.Policy, acts.WorldModel, acts.Grader = b.Tasks, b.Policy, b.WorldModel, b.Grader
	o.sandboxKind = kind

	c, err := benchenv.Dial(ctx, o.address, o.namespace, o.tls)
	if err != nil {
		return err
	}
	defer c.Close()
	local := &localSpans{}
	stop, err := benchenv.StartWorkers(c, acts, worker.Options{MaxConcurrentActivityTaskPollers: o.pollers,
		Interceptors: []interceptor.WorkerInterceptor{local.interceptor()}})
	if err != nil {
		return err
	}
	defer stop()

	par := runconfig.Default().Parallelism
	if o.parallelism > 0 {
		par = o.parallelism
	}
	fmt.Fprintf(out, "orchestration overhead: %s, namespace %s, sandbox %s, %d steps per size, continue-as-new every %d, parallelism %d, activity pollers %d (0: SDK default), %s\n\n",
		o.address, o.namespace, o.sandboxKind, o.steps, o.k, par, o.pollers, time.Now().UTC().Format(time.RFC3339))
	var results []sizeResult
	for _, sz := range o.sizes {
		r, err := measure(ctx, c, o, sz, local)
		if err != nil {
			return fmt.Errorf("size %s: %w", sz, err)
		}
		results = append(results, r)
	}
	report(out, o, results, heldOutTasks)
	return nil
}

// openSandbox opens the sandbox of kind; auto is Docker when an engine
// answers within 20 s, the process sandbox otherwise. It returns the kind
// opened.
func openSandbox(ctx context.Context, kind, bin string) (sandbox.Sandbox, string, func() error, error) {
	switch kind {
	case sandbox.KindDocker, sandbox.KindProcess:
	case runconfig.SandboxAuto:
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		sb, closeSB, err := sandbox.Open(dctx, sandbox.KindDocker, bin)
		cancel()
		if err == nil {
			return sb, sandbox.KindDocker, closeSB, nil
		}
		kind = sandbox.KindProcess
	default:
		return nil, "", nil, fmt.Errorf("-sandbox: %q is not process, docker or auto", kind)
	}
	sb, closeSB, err := sandbox.Open(ctx, kind, bin)
	if err != nil {
		return nil, "", nil, err
	}
	return sb, kind, closeSB, nil
}

type sizeResult struct {
	size     size
	config   runconfig.Config
	runID    string
	steps    []StepStats
	segments []SegmentStats
}

// benchConfig is the default preset with sz's shape, o.steps steps,
// continue-as-new every o.k and a small final evaluation only.
func benchConfig(o options, sz size) runconfig.Config {
	cfg := runconfig.Default()
	cfg.Name = "orchbench-" + sz.String()
	cfg.Groups, cfg.Samples = sz.groups, sz.samples
	if sz.turns > 1 {
		cfg.Trajectory.Turns = sz.turns
	}
	cfg.Steps, cfg.ContinueAsNewEvery = o.steps, o.k
	cfg.Eval = runconfig.Eval{Every: 0, Samples: 1, Tasks: o.evalTasks}
	if o.parallelism > 0 {
		cfg.Parallelism = o.parallelism
	}
	return cfg
}

// measure runs one run of size sz to its end and reads its histories.
func measure(ctx context.Context, c client.Client, o options, sz size, local *localSpans) (sizeResult, error) {
	cfg := benchConfig(o, sz)
	if err := cfg.Validate(); err != nil {
		return sizeResult{}, err
	}
	r := sizeResult{size: sz, config: cfg, runID: fmt.Sprintf("orchbench-%s-%d", sz, time.Now().UnixNano())}
	t0 := time.Now()
	firstRunID, res, err := benchenv.RunToEnd(ctx, c, r.runID, cfg)
	if err != nil {
		return r, err
	}
	if res.Steps != cfg.Steps {
		return r, fmt.Errorf("run %s ended after %d of %d steps", r.runID, res.Steps, cfg.Steps)
	}
	fmt.Fprintf(os.Stderr, "orchbench: %s: run %s finished in %.1f s\n", sz, r.runID, time.Since(t0).Seconds())

	for s := 0; s < cfg.Steps; s++ {
		h, err := history(ctx, c, workflows.StepWorkflowID(r.runID, s), "")
		if err != nil {
			return r, err
		}
		ss, err := AnalyzeStep(h, local.of(workflows.StepWorkflowID(r.runID, s))...)
		if err != nil {
			return r, fmt.Errorf("step %d: %w", s, err)
		}
		r.steps = append(r.steps, ss)
	}
	for runID := firstRunID; runID != ""; {
		h, err := history(ctx, c, r.runID, runID)
		if err != nil {
			return r, err
		}
		r.segments = append(r.segments, AnalyzeSegment(h))
		runID = h[len(h)-1].GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
	}
	return r, nil
}

// history reads a closed execution's whole history.
func history(ctx context.Context, c client.Client, id, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		events = append(events, e)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("history of %s: empty", id)
	}
	return events, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

func pct(a, b time.Duration) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

// report prints the step table, the run-segment table and the projection.
func report(out io.Writer, o options, results []sizeResult, heldOutTasks int) {
	fmt.Fprintln(out, "Steps (each a TrainingStep child; times in ms, summed over the size's steps):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\ttrajectories\tsteps\tactivities/step\twall\tin activities\toverhead\toverhead %\tqueue wait\tworkflow task\t(task queued)\tother\tsched→start mean\tsched→start max\tevents/step\tKB/step\t")
	for _, r := range results {
		var t StepStats
		for _, s := range r.steps {
			t.Wall += s.Wall
			t.InActivities += s.InActivities
			t.Overhead += s.Overhead
			t.QueueWait += s.QueueWait
			t.WorkflowTask += s.WorkflowTask
			t.WorkflowTaskQueued += s.WorkflowTaskQueued
			t.Other += s.Other
			t.Activities += s.Activities
			t.SchedToStart += s.SchedToStart
			t.MaxSchedToStart = max(t.MaxSchedToStart, s.MaxSchedToStart)
			t.Events += s.Events
			t.Bytes += s.Bytes
		}
		n := len(r.steps)
		mean := time.Duration(0)
		if t.Activities > 0 {
			mean = t.SchedToStart / time.Duration(t.Activities)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%.0f\t%.1f\t\n",
			r.size, r.size.groups*r.size.samples, n, float64(t.Activities)/float64(n), ms(t.Wall), ms(t.InActivities),
			ms(t.Overhead), pct(t.Overhead, t.Wall), ms(t.QueueWait), ms(t.WorkflowTask), ms(t.WorkflowTaskQueued), ms(t.Other),
			float64(mean)/float64(time.Millisecond), ms(t.MaxSchedToStart),
			float64(t.Events)/float64(n), float64(t.Bytes)/float64(n)/1024)
	}
	tw.Flush()

	turnsTable(out, results)

	fmt.Fprintln(out, "\nBetween steps (run workflow: a step child's completion to the next one's start):")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tgaps\tmean ms\tacross continue-as-new ms\tstep overhead + gaps, % of step wall + gaps\t")
	for _, r := range results {
		var between, wall, over, can time.Duration
		gaps, cans := 0, 0
		for i, sg := range r.segments {
			between += sg.Between
			gaps += sg.Gaps
			if i > 0 && !r.segments[i-1].LastChildCompleted.IsZero() && !sg.FirstChildStarted.IsZero() {
				can += sg.FirstChildStarted.Sub(r.segments[i-1].LastChildCompleted)
				cans++
			}
		}
		for _, s := range r.steps {
			wall += s.Wall
			over += s.Overhead
		}
		mean, canMean := "-", "-"
		if gaps > 0 {
			mean = fmt.Sprintf("%.1f", float64(between)/float64(gaps)/float64(time.Millisecond))
		}
		if cans > 0 {
			canMean = fmt.Sprintf("%.1f", float64(can)/float64(cans)/float64(time.Millisecond))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", r.size, gaps, mean, canMean,
			pct(over+between+can, wall+between+can))
	}
	tw.Flush()

	fmt.Fprintln(out, "\nPer step:")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tstep\twall ms\tin activities ms\toverhead ms\toverhead %\tevents\t")
	for _, r := range results {
		for i, s := range r.steps {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t\n", r.size, i, ms(s.Wall), ms(s.InActivities), ms(s.Overhead),
				pct(s.Overhead, s.Wall), s.Events)
		}
	}
	tw.Flush()

	fmt.Fprintln(out, "\nActivity phases (mean per step, ms): span = union of the phase's activities, gap = from the previous phase's last close (or the step's start) to this phase's first start:")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size	phase	activities	span	gap before	")
	for _, r := range results {
		for _, p := range phaseMeans(r.steps) {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t\n", r.size, p.name, p.count, p.span, p.gap)
		}
	}
	tw.Flush()

	fmt.Fprintln(out, "\nRun segments (TrainingRun executions):")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tsegment\tsteps\tevents\tKB\tevents/step cycle\tbytes/step cycle\teval events\teval tasks\tcontinued as new\t")
	for _, r := range results {
		for i, s := range r.segments {
			pe, pb, ok := s.PerStep()
			pes, pbs := "-", "-"
			if ok {
				pes, pbs = fmt.Sprintf("%.1f", pe), fmt.Sprintf("%.0f", pb)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%d\t%d\t%v\t\n", r.size, i, s.Steps, s.Events,
				float64(s.Bytes)/1024, pes, pbs, s.EvalEvents, s.EvalTasks, s.ContinuedAsNew)
		}
	}
	tw.Flush()

	def := runconfig.Default()
	fmt.Fprintf(out, "\nProjected largest history of one execution, %d steps, default K=%d, held-out evaluation of all %d tasks every %d steps:\n",
		o.projectSteps, def.ContinueAsNewEvery, heldOutTasks, def.Eval.Every)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\texecutions\tevents/execution\tof 51,200\tMB/execution\tof 50 MB\tstep child events\tof 51,200\t")
	for _, r := range results {
		p, ok := project(r, o.projectSteps, def.ContinueAsNewEvery, def.Eval.Every, heldOutTasks)
		if !ok {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t\n", r.size)
			continue
		}
		maxStep := 0
		for _, s := range r.steps {
			maxStep = max(maxStep, s.Events)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f%%\t%.3f\t%.2f%%\t%d\t%.1f%%\t\n", r.size, p.Executions, p.Events,
			100*p.Events/limitEvents, p.Bytes/(1<<20), 100*p.Bytes/limitBytes, maxStep, 100*float64(maxStep)/limitEvents)
	}
	tw.Flush()
}

// project derives the projection of r's run from its first continued-as-new
// segment (fixed part and step cycle) and its evaluation.
func project(r sizeResult, steps, k, evalEvery, evalTasks int) (Projection, bool) {
	var can, eval *SegmentStats
	for i := range r.segments {
		s := &r.segments[i]
		if s.ContinuedAsNew && can == nil {
			can = s
		}
		if s.EvalTasks > 0 && eval == nil {
			eval = s
		}
	}
	if can == nil || eval == nil {
		return Projection{}, false
	}
	pe, pb, ok := can.PerStep()
	if !ok {
		return Projection{}, false
	}
	fixedE := float64(can.Events) - float64(can.Steps)*pe
	fixedB := float64(can.Bytes) - float64(can.Steps)*pb
	perTaskE := float64(eval.EvalEvents) / float64(eval.EvalTasks)
	perTaskB := float64(eval.EvalBytes) / float64(eval.EvalTasks)
	return Project(steps, k, evalEvery, evalTasks, fixedE, fixedB, pe, pb, perTaskE, perTaskB), true
}

type phaseMean struct {
	name             string
	count, span, gap float64 // per step; span and gap in ms
}

// phaseMeans averages the steps' phases by name, in the order of the first
// step's phases.
func phaseMeans(steps []StepStats) []phaseMean {
	var out []phaseMean
	index := map[string]int{}
	for _, s := range steps {
		prev := s.Start
		for _, p := range s.Phases {
			i, ok := index[p.Name]
			if !ok {
				i = len(out)
				index[p.Name] = i
				out = append(out, phaseMean{name: p.Name})
			}
			out[i].count += float64(p.Count)
			out[i].span += float64(p.Span) / float64(time.Millisecond)
			out[i].gap += float64(p.First.Sub(prev)) / float64(time.Millisecond)
			prev = p.Last
		}
	}
	for i := range out {
		n := float64(len(steps))
		out[i].count /= n
		out[i].span /= n
		out[i].gap /= n
	}
	return out
}

// turnsTable prints, for every multi-turn size measured beside the same
// shape at one turn, the mean step's wall time, time in activities and
// overhead at K = 1 and K, and their ratios (nothing when there is no
// such pair).
func turnsTable(out io.Writer, results []sizeResult) {
	single := map[[2]int]sizeResult{}
	for _, r := range results {
		if r.size.turns <= 1 {
			single[[2]int{r.size.groups, r.size.samples}] = r
		}
	}
	type pair struct{ one, k sizeResult }
	var pairs []pair
	for _, r := range results {
		if one, ok := single[[2]int{r.size.groups, r.size.samples}]; ok && r.size.turns > 1 {
			pairs = append(pairs, pair{one, r})
		}
	}
	if len(pairs) == 0 {
		return
	}
	fmt.Fprintln(out, "\nTurns (mean per step, ms: K turns against 1 at the same shape):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tK\twall K=1\twall K\twall ratio\tin activities K=1\tin activities K\toverhead K=1\toverhead K\toverhead ratio\toverhead % K=1\toverhead % K\tevents K=1\tevents K\t")
	for _, p := range pairs {
		a, b := stepMeans(p.one.steps), stepMeans(p.k.steps)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t\n", p.one.size, p.k.size.turns,
			ms(a.Wall), ms(b.Wall), ratio(b.Wall, a.Wall), ms(a.InActivities), ms(b.InActivities), ms(a.Overhead), ms(b.Overhead),
			ratio(b.Overhead, a.Overhead), pct(a.Overhead, a.Wall), pct(b.Overhead, b.Wall), a.events, b.events)
	}
	tw.Flush()
}

// meanStep is the mean step of a size.
type meanStep struct {
	Wall, InActivities, Overhead time.Duration
	events                       float64
}

func stepMeans(steps []StepStats) meanStep {
	var m meanStep
	if len(steps) == 0 {
		return m
	}
	for _, s := range steps {
		m.Wall += s.Wall
		m.InActivities += s.InActivities
		m.Overhead += s.Overhead
		m.events += float64(s.Events)
	}
	n := time.Duration(len(steps))
	m.Wall, m.InActivities, m.Overhead = m.Wall/n, m.InActivities/n, m.Overhead/n
	m.events /= float64(len(steps))
	return m
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}
