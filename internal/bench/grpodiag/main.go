// Command grpodiag diagnoses the instability of the `grpo` mode in the small
// benchmark preset with the in-process reference loop (grpoloop): plain
// GRPO with real executions, deterministic, no Temporal.
//
// It mirrors the small preset (runconfig.BenchPreset("small")): G groups of
// n programs per step, the preset's hidden size, the default suite, and
// grpoloop takes the workflow's seeded choices (initial policy, each
// group's training task, sampling and execution seeds; internal/plan). For
// each learning rate and run seed it trains for -steps steps and measures
// the held-out score (avg@n by real execution) on ALL held-out tasks every
// -eval-every steps, with one fixed evaluation seed for every checkpoint
// (common random numbers). Per step it records the mean reward, an entropy
// estimate (mean −log π of the sampled programs) and how many distinct
// programs and model families the step sampled (a collapse check).
//
// It also measures the noise of the held-out estimate itself: one
// checkpoint (-noise-lr, -noise-seed, -noise-step) is evaluated under
// -noise-evals evaluation seeds, on all held-out tasks and on the first
// -bench-eval-tasks of them (what the benchmark evaluates).
//
//	go run ./internal/bench/grpodiag -lrs 0.01,0.003 -seeds 1,2,3 -json out.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/wmrl/wmrl/internal/grpoloop"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/suite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "grpodiag:", err)
		os.Exit(1)
	}
}

// StepStat is what one training step sampled and scored.
type StepStat struct {
	Step       uint64  `json:"step"`
	MeanReward float64 `json:"mean_reward"`
	// Entropy is the mean −log π of the step's sampled programs, a Monte
	// Carlo estimate of the policy's sequence entropy on the step's cards.
	Entropy  float64 `json:"entropy"`
	Distinct int     `json:"distinct_programs"`
	Families int     `json:"families"`
	// TopFamily is the most sampled model family and TopShare its share.
	TopFamily  string  `json:"top_family"`
	TopShare   float64 `json:"top_family_share"`
	GradNorm   float64 `json:"grad_norm"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// EvalPoint is the held-out score of one checkpoint.
type EvalPoint struct {
	Step uint64 `json:"step"`
	// All is the score on every held-out task; First the score on the
	// first BenchTasks of them (the benchmark's evaluation).
	All        float64   `json:"all"`
	First      float64   `json:"first"`
	TaskScores []float64 `json:"task_scores"`
	// Families counts the model families among the evaluated programs;
	// TopFamily is the most frequent one.
	Families  int    `json:"families"`
	TopFamily string `json:"top_family"`
	// TopProgram is the most frequent evaluated program and TopShare its
	// share; Failed counts, per task, the samples that failed (position 0,
	// including refusals by the budget); Refused counts the refusals.
	TopProgram string  `json:"top_program"`
	TopShare   float64 `json:"top_program_share"`
	Failed     []int   `json:"failed"`
	Refused    int     `json:"refused"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// Run is one training run.
type Run struct {
	LR    float64     `json:"lr"`
	Seed  uint64      `json:"seed"`
	Steps []StepStat  `json:"steps"`
	Evals []EvalPoint `json:"evals"`
}

// Noise is the spread of the held-out estimate of one checkpoint.
type Noise struct {
	LR        float64   `json:"lr"`
	Seed      uint64    `json:"seed"`
	Step      uint64    `json:"step"`
	EvalSeeds []uint64  `json:"eval_seeds"`
	All       []float64 `json:"all"`
	First     []float64 `json:"first"`
}

// Report is everything the command measured.
type Report struct {
	SuiteSeed  uint64  `json:"suite_seed"`
	Groups     int     `json:"groups"`
	Samples    int     `json:"samples"`
	Hidden     int     `json:"hidden"`
	HeldOut    int     `json:"heldout_tasks"`
	BenchTasks int     `json:"bench_eval_tasks"`
	EvalSeed   uint64  `json:"eval_seed"`
	Runs       []Run   `json:"runs"`
	Noise      *Noise  `json:"noise,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

func run() error {
	lrsFlag := flag.String("lrs", "0.01,0.003", "comma-separated policy learning rates")
	seedsFlag := flag.String("seeds", "1,2,3", "comma-separated run seeds")
	steps := flag.Int("steps", 0, "steps per run (0: the preset's)")
	evalEvery := flag.Int("eval-every", 0, "evaluate every E steps and at the end (0: the preset's)")
	evalSeed := flag.Uint64("eval-seed", 1, "evaluation seed of the per-run held-out scores")
	noiseLR := flag.Float64("noise-lr", 0.01, "learning rate of the checkpoint whose evaluation noise is measured (0: none)")
	noiseSeed := flag.Uint64("noise-seed", 1, "run seed of that checkpoint")
	noiseStep := flag.Uint64("noise-step", 20, "step of that checkpoint")
	noiseEvals := flag.Int("noise-evals", 8, "evaluation seeds for the noise measurement")
	preset := flag.String("preset", "small", "benchmark preset to mirror")
	jsonOut := flag.String("json", "", "also write the report as JSON to this file")
	flag.Parse()

	cfg, err := runconfig.BenchPreset(*preset)
	if err != nil {
		return err
	}
	lrs, err := parseFloats(*lrsFlag)
	if err != nil {
		return fmt.Errorf("-lrs: %w", err)
	}
	seeds, err := parseUints(*seedsFlag)
	if err != nil {
		return fmt.Errorf("-seeds: %w", err)
	}
	if *steps == 0 {
		*steps = cfg.Steps
	}
	if *evalEvery == 0 {
		*evalEvery = cfg.Eval.Every
	}
	if *steps < 1 || *evalEvery < 0 || *noiseEvals < 2 {
		return fmt.Errorf("-steps %d -eval-every %d -noise-evals %d: want >= 1, >= 0, >= 2", *steps, *evalEvery, *noiseEvals)
	}
	ctx := context.Background()
	s, err := suite.Loader{Progress: os.Stderr}.Load(ctx, suite.DefaultOptions(cfg.SuiteSeed))
	if err != nil {
		return err
	}
	train := s.Split(suite.Train)
	var heldOut []string
	for _, t := range s.Split(suite.HeldOut) {
		heldOut = append(heldOut, t.ID)
	}
	if len(train) == 0 || len(heldOut) == 0 {
		return fmt.Errorf("suite %d: %d training and %d held-out tasks", cfg.SuiteSeed, len(train), len(heldOut))
	}
	bench := cfg.Eval.Tasks
	if bench == 0 || bench > len(heldOut) {
		bench = len(heldOut)
	}
	rep := Report{SuiteSeed: cfg.SuiteSeed, Groups: cfg.Groups, Samples: cfg.Samples, Hidden: cfg.Policy.Hidden,
		HeldOut: len(heldOut), BenchTasks: bench, EvalSeed: *evalSeed}
	var trainIDs []string
	for _, t := range train {
		trainIDs = append(trainIDs, t.ID)
	}
	evalAt := func(p *policy.Policy, es uint64) (EvalPoint, error) {
		ecfg := grpoloop.DefaultEvalConfig(es)
		ecfg.Samples = cfg.Eval.Samples
		ecfg.Exec.Budget = cfg.Sandbox.Budget
		h, err := grpoloop.HeldOut(ctx, s, p, heldOut, ecfg)
		if err != nil {
			return EvalPoint{}, err
		}
		ep := EvalPoint{Step: p.Step(), All: h.Score, CPUSeconds: h.Cost.CPUSeconds, Refused: h.Cost.Refused}
		var progs []string
		for i, ts := range h.Tasks {
			ep.TaskScores = append(ep.TaskScores, ts.Score)
			failed := 0
			for _, pos := range ts.Positions {
				if pos == 0 {
					failed++
				}
			}
			ep.Failed = append(ep.Failed, failed)
			if i < bench {
				ep.First += ts.Score
			}
			progs = append(progs, ts.Programs...)
		}
		ep.First /= float64(bench)
		fams, top, _, err := Families(progs)
		if err != nil {
			return EvalPoint{}, err
		}
		ep.Families, ep.TopFamily = fams, top
		ep.TopProgram, ep.TopShare = Mode(progs)
		rep.CPUSeconds += h.Cost.CPUSeconds
		return ep, nil
	}

	for _, lr := range lrs {
		for _, rs := range seeds {
			pcfg := policy.DefaultConfig(policy.ProgramGrammar{}, len(train[0].Card.Vector()))
			pcfg.Hidden, pcfg.LearningRate, pcfg.KLCoef = cfg.Policy.Hidden, lr, cfg.Policy.KLCoef
			p, err := grpoloop.InitPolicy(pcfg, rs)
			if err != nil {
				return fmt.Errorf("lr %g seed %d: %w", lr, rs, err)
			}
			lcfg := grpoloop.Config{Seed: rs, Groups: cfg.Groups, Samples: cfg.Samples,
				Advantage: cfg.AdvantageConfig(), Exec: grpoloop.DefaultExecConfig()}
			lcfg.Exec.Budget = cfg.Sandbox.Budget
			loop, err := grpoloop.New(s, p, trainIDs, lcfg)
			if err != nil {
				return fmt.Errorf("lr %g seed %d: %w", lr, rs, err)
			}
			r := Run{LR: lr, Seed: rs}
			for st := 1; st <= *steps; st++ {
				res, err := loop.Step(ctx)
				if err != nil {
					return fmt.Errorf("lr %g seed %d: %w", lr, rs, err)
				}
				ss, err := Summarise(res)
				if err != nil {
					return fmt.Errorf("lr %g seed %d: %w", lr, rs, err)
				}
				r.Steps = append(r.Steps, ss)
				rep.CPUSeconds += res.Cost.CPUSeconds
				if (*evalEvery > 0 && st%*evalEvery == 0) || st == *steps {
					ep, err := evalAt(p, *evalSeed)
					if err != nil {
						return fmt.Errorf("lr %g seed %d step %d: %w", lr, rs, st, err)
					}
					r.Evals = append(r.Evals, ep)
					fmt.Fprintf(os.Stderr, "lr %g seed %d step %d: held-out all %.4f first-%d %.4f, entropy %.2f, families %d (top %s %.2f), cpu so far %.0f s\n",
						lr, rs, st, ep.All, bench, ep.First, ss.Entropy, ss.Families, ss.TopFamily, ss.TopShare, rep.CPUSeconds)
				}
				if *noiseLR == lr && *noiseSeed == rs && *noiseStep == uint64(st) {
					n := Noise{LR: lr, Seed: rs, Step: uint64(st)}
					for k := range *noiseEvals {
						es := uint64(1000 + k)
						ep, err := evalAt(p, es)
						if err != nil {
							return fmt.Errorf("noise eval seed %d: %w", es, err)
						}
						n.EvalSeeds = append(n.EvalSeeds, es)
						n.All, n.First = append(n.All, ep.All), append(n.First, ep.First)
					}
					rep.Noise = &n
					fmt.Fprintf(os.Stderr, "noise: all %v first %v\n", n.All, n.First)
				}
			}
			rep.Runs = append(rep.Runs, r)
		}
	}
	writeTables(os.Stdout, rep)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", " ")
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	return nil
}

// Summarise reduces a step to its collapse statistics.
func Summarise(res grpoloop.StepResult) (StepStat, error) {
	ss := StepStat{Step: res.Step, MeanReward: res.MeanScore, GradNorm: res.Update.GradNorm, CPUSeconds: res.Cost.CPUSeconds}
	progs := make([]string, len(res.Trajectories))
	for i, tr := range res.Trajectories {
		ss.Entropy -= tr.LogProb
		progs[i] = tr.Program
	}
	if len(progs) > 0 {
		ss.Entropy /= float64(len(progs))
	}
	fams, top, share, err := Families(progs)
	if err != nil {
		return StepStat{}, err
	}
	ss.Families, ss.TopFamily, ss.TopShare = fams, top, share
	seen := map[string]bool{}
	for _, p := range progs {
		seen[p] = true
	}
	ss.Distinct = len(seen)
	return ss, nil
}

// Families counts the distinct model families among programs and returns
// the most frequent one (the first to reach the highest count) and its
// share.
func Families(progs []string) (n int, top string, share float64, err error) {
	count := map[string]int{}
	most := 0
	for _, text := range progs {
		p, err := program.Parse(text)
		if err != nil {
			return 0, "", 0, fmt.Errorf("parse %q: %w", text, err)
		}
		count[p.Model.Name]++
		if c := count[p.Model.Name]; c > most {
			most, top = c, p.Model.Name
		}
	}
	if len(progs) == 0 {
		return 0, "", 0, nil
	}
	return len(count), top, float64(most) / float64(len(progs)), nil
}

// Mode returns the most frequent string of xs (the first to reach the
// highest count) and its share; "", 0 for none.
func Mode(xs []string) (string, float64) {
	count := map[string]int{}
	most, top := 0, ""
	for _, x := range xs {
		count[x]++
		if count[x] > most {
			most, top = count[x], x
		}
	}
	if len(xs) == 0 {
		return "", 0
	}
	return top, float64(most) / float64(len(xs))
}

// MeanSD returns the mean and the sample standard deviation of xs (sd 0
// for fewer than two values).
func MeanSD(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	if len(xs) < 2 {
		return m, 0
	}
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, math.Sqrt(v / float64(len(xs)-1))
}

// writeTables prints the report as markdown tables.
func writeTables(w io.Writer, rep Report) {
	if n := rep.Noise; n != nil {
		fmt.Fprintf(w, "## Noise of the held-out estimate (lr %g, seed %d, checkpoint %d, %d evaluation seeds)\n\n", n.LR, n.Seed, n.Step, len(n.EvalSeeds))
		fmt.Fprintln(w, "| evaluation | per-seed scores | mean | sd |")
		fmt.Fprintln(w, "|---|---|---:|---:|")
		m, sd := MeanSD(n.First)
		fmt.Fprintf(w, "| first %d tasks × %d | %s | %.4f | %.4f |\n", rep.BenchTasks, rep.Samples, join(n.First), m, sd)
		m, sd = MeanSD(n.All)
		fmt.Fprintf(w, "| all %d tasks × %d | %s | %.4f | %.4f |\n\n", rep.HeldOut, rep.Samples, join(n.All), m, sd)
	}
	// Collect the learning rates and evaluation steps in run order.
	var lrs []float64
	for _, r := range rep.Runs {
		if len(lrs) == 0 || lrs[len(lrs)-1] != r.LR {
			lrs = append(lrs, r.LR)
		}
	}
	fmt.Fprintf(w, "## Held-out score (all %d tasks × %d, evaluation seed %d)\n\n", rep.HeldOut, rep.Samples, rep.EvalSeed)
	fmt.Fprintln(w, "| lr | step | per seed | mean | sd | first-6 mean ± sd | eval families |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|")
	for _, lr := range lrs {
		runs := runsOf(rep, lr)
		for i, ep := range runs[0].Evals {
			var all, first, fam []float64
			for _, r := range runs {
				if i < len(r.Evals) {
					all, first, fam = append(all, r.Evals[i].All), append(first, r.Evals[i].First), append(fam, float64(r.Evals[i].Families))
				}
			}
			m, sd := MeanSD(all)
			fm, fsd := MeanSD(first)
			famm, _ := MeanSD(fam)
			fmt.Fprintf(w, "| %g | %d | %s | %.4f | %.4f | %.4f ± %.4f | %.1f |\n", lr, ep.Step, join(all), m, sd, fm, fsd, famm)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "## Collapse check (per training step, mean over seeds)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| lr | step | mean reward | entropy (nats) | distinct programs /64 | families | top family share | grad norm |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, lr := range lrs {
		runs := runsOf(rep, lr)
		for _, st := range []int{0, 4, 9, 14, 19, 24, 29} {
			var rw, en, di, fa, tf, gn []float64
			for _, r := range runs {
				if st < len(r.Steps) {
					s := r.Steps[st]
					rw, en, di = append(rw, s.MeanReward), append(en, s.Entropy), append(di, float64(s.Distinct))
					fa, tf, gn = append(fa, float64(s.Families)), append(tf, s.TopShare), append(gn, s.GradNorm)
				}
			}
			if len(rw) == 0 {
				continue
			}
			f := func(xs []float64) float64 { m, _ := MeanSD(xs); return m }
			fmt.Fprintf(w, "| %g | %d | %.3f | %.2f | %.1f | %.1f | %.2f | %.3f |\n", lr, st, f(rw), f(en), f(di), f(fa), f(tf), f(gn))
		}
	}
	fmt.Fprintf(w, "\nprocess CPU-seconds of all executions: %.0f\n", rep.CPUSeconds)
}

func runsOf(rep Report, lr float64) []Run {
	var out []Run
	for _, r := range rep.Runs {
		if r.LR == lr {
			out = append(out, r)
		}
	}
	return out
}

func join(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(parts, ", ")
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 || x > 1 {
			return nil, fmt.Errorf("%q: want numbers in (0,1]", f)
		}
		out = append(out, x)
	}
	return out, nil
}

func parseUints(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: want non-negative integers", f)
		}
		out = append(out, x)
	}
	return out, nil
}
