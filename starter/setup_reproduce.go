package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/reproduce"
	"github.com/wmrl/wmrl/internal/reproduce/collect"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/workflows"
	"gopkg.in/yaml.v3"
)

// benchOptions are the flags of wmrl bench reproduce.
type benchOptions struct {
	asJSON bool
	preset string
	seeds  int
	from   int
	out    string
	id     string
	steps  int
	poll   time.Duration
	// config is a YAML file laid over the preset (--config); modes the
	// comma-separated modes to run (--modes, default all).
	config string
	modes  string
}

func newBenchCmd(cf *connFlags) *cobra.Command {
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks of wmrl on the real stack",
		Args:  cobra.NoArgs,
	}
	bench.AddCommand(newReproduceCmd(cf), newFrontierCmd())
	return bench
}

func newReproduceCmd(cf *connFlags) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "reproduce [--preset small|full] [--seeds N] [--out DIR] [--json]",
		Short: "Reproduce the paper's table: every mode, the same steps and seeds, through Temporal, Postgres and the sandbox",
		Long: `reproduce runs the modes grpo, wm, wmrl, mix, debias, denoise and anchor,
each for seeds 1..N, with the same configuration (the benchmark preset: ` + strings.Join(runconfig.BenchPresetNames(), ", ") + `;
tiny is for tests), as durable runs on Temporal served by the running
wmrl-worker processes, one run after another so that every run has the same
workers. Then it reads the runs from Postgres and writes to --out:

  results.json  {"header", "preset", "suite_seed", "steps", "runs": [...]}, one
                object per mode and seed (held-out score, training executions
                and their sandbox CPU and wall seconds, held-out evaluation
                cost apart, world-model calls, wall seconds, final rho, bias
                removed, anchor fraction)
  results.md    the table (execution cost, held-out score mean ± sd over seeds,
                cost reduction versus grpo), the held-out differences paired by
                seed (mean ± standard error), the ablation table and the goals
                (wmrl within one standard error of grpo's score at <= 1/3 of
                its CPU; wmrl above anchor, its control at the same executions,
                by more than one standard error; ...), each marked met or
                missed from the numbers
  *.png         held-out score versus step and versus sandbox CPU-seconds for
                every mode; rho and bias over the steps of wmrl

Every run has a fixed id, <id>-<mode>-s<seed> (--id, default bench-<preset>),
so an interrupted benchmark resumes: a completed run is collected, a running
one followed, a missing one started. --from-seed K runs seeds K..N only, so
that one benchmark can be split across invocations running side by side
(e.g. --seeds 2 and --from-seed 3 --seeds 5); the same command without it
then collects all N seeds. A failed run is reported and left out;
the command then fails after writing the others. Ctrl-C stops following; the
runs go on in Temporal, and the same command resumes. Progress goes to stderr.
--steps overrides the preset's number of steps (for a quick check; use
another --id). --config FILE lays a YAML run configuration over the preset
for every run (fields it omits keep the preset's; name, mode and seed are the
benchmark's and may not appear), for experiments such as a higher rho_max;
its text is kept in the results' header. --modes runs only the listed modes
(comma-separated, e.g. grpo,wmrl); goals that need a missing mode are
reported as lacking data. --json prints results.json to stdout instead of
the table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, cf, &o) },
	}
	uses(cmd, groupTemporal, groupPostgres)
	f := cmd.Flags()
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	f.StringVar(&o.preset, "preset", "small", "benchmark preset: "+strings.Join(runconfig.BenchPresetNames(), ", "))
	f.IntVar(&o.seeds, "seeds", 5, "number of seeds per mode (seeds 1..N); goals read differences paired by seed")
	f.IntVar(&o.from, "from-seed", 1, "first seed to run (seeds FROM..N), to split one benchmark across invocations or machines; the same --id and --seeds without it collects them all")
	f.StringVar(&o.out, "out", "docs/results", "directory of the results")
	f.StringVar(&o.id, "id", "", "benchmark id, the prefix of its run ids (default bench-<preset>)")
	f.IntVar(&o.steps, "steps", 0, "training steps per run (default: the preset's)")
	f.DurationVar(&o.poll, "poll", 2*time.Second, "how often to ask the running run for its status")
	f.StringVar(&o.config, "config", "", "YAML file laid over the preset for every run (not name, mode or seed)")
	f.StringVar(&o.modes, "modes", "", "comma-separated modes to run (default: "+strings.Join(mode.Names(), ",")+")")
	return cmd
}

// benchRun is one run of a benchmark.
type benchRun struct {
	ID   string
	Mode mode.Mode
	Seed uint64
	Cfg  runconfig.Config
}

// benchPlan returns the runs of a benchmark, seed by seed, modes in
// mode.All's order.
func benchPlan(preset, id string, from, seeds, steps int, overlay []byte, modes []mode.Mode) ([]benchRun, runconfig.Config, error) {
	base, err := runconfig.BenchPreset(preset)
	if err != nil {
		return nil, base, &usageError{Err: fmt.Errorf("--preset: %w", err)}
	}
	if len(overlay) > 0 {
		if err := benchOwned(overlay); err != nil {
			return nil, base, err
		}
		if base, err = runconfig.Load(base, overlay, runconfig.Overrides{}); err != nil {
			return nil, base, err
		}
	}
	if len(modes) == 0 {
		modes = mode.All()
	}
	if err := intIn("seeds", seeds, 1, 1000); err != nil {
		return nil, base, err
	}
	if err := intIn("from-seed", from, 1, seeds); err != nil {
		return nil, base, err
	}
	if err := intIn("steps", steps, 0, maxStep); err != nil {
		return nil, base, err
	}
	if steps > 0 {
		base.Steps = steps
	}
	if id == "" {
		id = base.Name
	}
	var plan []benchRun
	for seed := uint64(from); seed <= uint64(seeds); seed++ {
		for _, m := range modes {
			cfg := base
			cfg.Name, cfg.Mode, cfg.Seed = fmt.Sprintf("%s-%s-s%d", id, m, seed), m, seed
			// The --config is shared by every mode: a mode that does not
			// read the denoiser's estimator or memory records neither.
			cfg.FitDenoise(nil)
			if ps := cfg.Problems(); len(ps) > 0 {
				return nil, base, &configError{source: "benchmark " + id, problems: ps}
			}
			plan = append(plan, benchRun{ID: cfg.Name, Mode: m, Seed: seed, Cfg: cfg})
		}
	}
	return plan, base, nil
}

// benchOutcome is how a run of the benchmark ended.
type benchOutcome struct {
	run   benchRun
	state string // a workflow state (wf*), or "" when unknown
	note  string
}

func runBench(cmd *cobra.Command, cf *connFlags, o *benchOptions) error {
	if err := durationIn("poll", o.poll, minPoll, maxPoll); err != nil {
		return err
	}
	if err := runconfig.CheckName(o.id); o.id != "" && err != nil {
		return usagef("--id: %v", err)
	}
	modes, err := parseModes(o.modes)
	if err != nil {
		return err
	}
	var overlay []byte
	if o.config != "" {
		if overlay, err = readFileMax(o.config, runconfig.MaxBytes); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
	}
	plan, base, err := benchPlan(o.preset, o.id, o.from, o.seeds, o.steps, overlay, modes)
	if err != nil {
		if o.config != "" {
			return fmt.Errorf("--config %s: %w", o.config, err)
		}
		return err
	}
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	cs, err := cf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer cs.Close()
	tc, st := cs.tc, cs.st

	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Progress goes to stderr: runs done, the current run's step.
	pr := newProgress(stderr, len(plan), "runs", isTerminal(stderr), false)
	pr.count(0)
	var outcomes []benchOutcome
	for _, r := range plan {
		out, err := benchOne(sigCtx, o, tc, st, pr, r)
		if sigCtx.Err() != nil {
			pr.clear()
			return fmt.Errorf("interrupted at run %s: the runs go on in Temporal; the same command resumes the benchmark", r.ID)
		}
		if err != nil {
			pr.clear()
			return err
		}
		outcomes = append(outcomes, out)
		pr.count(len(outcomes))
		pr.note(strings.TrimSpace(fmt.Sprintf("%s %s %s", out.run.ID, stateText(out.state), out.note)))
	}
	pr.clear()

	hdr := benchHeader(cmd)
	hdr.Config = string(overlay)
	in := reproduce.Input{Header: hdr, Preset: o.preset, SuiteSeed: base.SuiteSeed, Steps: base.Steps}
	var failed []string
	for _, oc := range outcomes {
		if oc.state != wfCompleted {
			msg := fmt.Sprintf("%s (%s seed %d) %s, left out: %s", oc.run.ID, oc.run.Mode, oc.run.Seed, stateText(oc.state), oc.note)
			failed = append(failed, msg)
			in.Notes = append(in.Notes, msg)
			continue
		}
		rec, _, err := collect.Run(ctx, st, oc.run.ID)
		if err != nil {
			return err
		}
		in.Records = append(in.Records, rec)
	}
	if len(in.Records) == 0 {
		return fmt.Errorf("no run completed:\n  %s", strings.Join(failed, "\n  "))
	}
	res, sum, files, err := reproduce.WriteAll(o.out, in)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if o.asJSON {
		if err := reproduce.WriteJSON(w, res); err != nil {
			return err
		}
	} else {
		if err := reproduce.Table(w, sum); err != nil {
			return err
		}
		fmt.Fprintln(w)
		for _, g := range sum.Goals {
			fmt.Fprintf(w, "%-7s %s (%s)\n", g.Status, g.Name, g.Detail)
		}
		fmt.Fprintf(w, "\nwrote %s to %s\n", strings.Join(files, ", "), o.out)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d runs did not complete (left out of the results):\n  %s", len(failed), len(plan), strings.Join(failed, "\n  "))
	}
	return nil
}

func stateText(s string) string {
	if s == "" {
		return "unknown to Temporal"
	}
	return s
}

// benchOne brings one run of the benchmark to its end: collects it if it
// completed, follows it if it runs, starts it if it is missing.
func benchOne(ctx context.Context, o *benchOptions, tc client.Client, st *store.Store, pr *progress, r benchRun) (benchOutcome, error) {
	out := benchOutcome{run: r}
	wf, err := temporalState(ctx, tc, r.ID)
	if err != nil {
		return out, err
	}
	stored, err := st.Run(ctx, r.ID)
	switch {
	case err == nil:
		cfg, err := runConfig(stored)
		if err != nil {
			return out, err
		}
		if !reflect.DeepEqual(cfg, r.Cfg) {
			return out, fmt.Errorf("run %s exists with another configuration (another preset, --steps or version): choose another --id", r.ID)
		}
	case errors.Is(err, store.ErrNotFound):
	default:
		return out, err
	}
	switch wf {
	case "":
		if err == nil {
			// Known to Postgres but not to Temporal (its history was lost).
			out.state = wf
			if stored.State == store.RunCompleted {
				out.state = wfCompleted
			}
			out.note = fmt.Sprintf("recorded in Postgres as %s", stored.State)
			return out, nil
		}
		if _, err := startRun(ctx, tc, workflows.RunInput{RunID: r.ID, Config: r.Cfg}); err != nil {
			return out, err
		}
		pr.note(fmt.Sprintf("started %s", r.ID))
	case wfRunning, wfContinued:
		pr.note(fmt.Sprintf("following %s (already running)", r.ID))
	default:
		out.state = wf
		if wf == wfCompleted {
			out.note = "earlier"
		}
		return out, nil
	}
	return waitRun(ctx, o, tc, pr, r)
}

// waitRun follows a running run until its workflow ends.
func waitRun(ctx context.Context, o *benchOptions, tc client.Client, pr *progress, r benchRun) (benchOutcome, error) {
	out := benchOutcome{run: r}
	began := time.Now()
	var silent time.Time
	warned := false
	for {
		wf, err := temporalState(ctx, tc, r.ID)
		if err != nil {
			return out, err
		}
		if wf != wfRunning && wf != wfContinued {
			out.state = wf
			if wf != wfCompleted {
				out.note = "see wmrl status " + r.ID
			}
			return out, nil
		}
		s, err := queryStatus(ctx, tc, r.ID)
		switch {
		case err == nil:
			silent = time.Time{}
			pr.status(fmt.Sprintf("%s/%d", r.ID, s.Step),
				fmt.Sprintf("%s: step %d/%d (%s)", r.ID, s.Step, s.Steps, time.Since(began).Round(time.Second)))
		case silent.IsZero():
			silent = time.Now()
		case time.Since(silent) > 30*time.Second && !warned && ctx.Err() == nil:
			pr.note(fmt.Sprintf("%s does not answer (is a wmrl-worker serving %s?): %v", r.ID, workflows.QueueControl, err))
			warned = true
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(o.poll):
		}
	}
}

// benchHeader is the results' header: this command, now, this machine. The
// database URL's value is left out: it may hold a password, and results are
// meant to be shared.
func benchHeader(cmd *cobra.Command) reproduce.Header {
	args := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "database-url" {
			args = append(args, "--database-url=(not recorded)")
			return
		}
		if f.Value.Type() == "bool" && f.Value.String() == "true" {
			args = append(args, "--"+f.Name)
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return reproduce.Header{
		Command: strings.Join(args, " "),
		Date:    time.Now().UTC().Format(time.RFC3339),
		Machine: reproduce.Machine{Cores: runtime.NumCPU(), MemoryBytes: memTotal(), GoVersion: runtime.Version(),
			OS: runtime.GOOS, Arch: runtime.GOARCH},
		Defaults: runconfig.Defaults,
	}
}

// memTotal is the machine's memory from /proc/meminfo (0 when unknown).
func memTotal() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// parseModes reads --modes: comma-separated mode names, each at most once,
// returned in mode.All's order; empty means every mode.
func parseModes(list string) ([]mode.Mode, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	seen := map[mode.Mode]bool{}
	for _, name := range strings.Split(list, ",") {
		m, err := mode.Parse(strings.TrimSpace(name))
		if err != nil {
			return nil, &usageError{Err: fmt.Errorf("--modes: %w", err)}
		}
		if seen[m] {
			return nil, usagef("--modes: %s given twice", m)
		}
		seen[m] = true
	}
	var out []mode.Mode
	for _, m := range mode.All() {
		if seen[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

// benchOwned rejects a --config document that sets a field the benchmark
// sets for each run (name, mode, seed), naming the field and its line.
func benchOwned(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil // Decode reports an empty or malformed document
	}
	top := doc.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		switch k := top[i]; k.Value {
		case "name", "mode", "seed":
			return fmt.Errorf("line %d: %s is set by the benchmark for each run; remove it", k.Line, k.Value)
		}
	}
	return nil
}
