// Command execbench measures what one real execution of the built-in suite
// costs, per model family, on real suite tasks: the reference-panel
// programs of each family run in-process (grpoloop.Execute, one at a time)
// on every step-th task of the suite, plus programs sampled from an initial
// policy (what a GRPO step actually executes). It prints the median wall and
// CPU time of one execution per family and the median ns per
// tabular.EstimateCost work unit (how well the static budget tracks time).
// With -sandbox process (or docker) every program is also run through that
// sandbox, as the orchestrated path runs it (job encoding, a fresh
// wmrl-executor process or container, limits), and its wall time is
// reported too.
//
// Against it, one prediction of the stored world model (worldmodel.Default)
// on the same task and program: the card vector, parsing, features and the
// model (timed over -wm-reps repetitions, so timer resolution does not
// matter), and the ratio of the median execution to the median prediction,
// per family and over the whole panel. The paper's premise is a ratio of at
// least 1000.
//
//	go run ./internal/bench/execbench [-suite-seed N] [-step 4] [-sandbox process -executor bin/wmrl-executor]
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/grpoloop"
	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/tabular"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "execbench:", err)
		os.Exit(1)
	}
}

// sample is one measured execution.
type sample struct {
	family    string
	task      *suite.Task
	program   string
	wall, cpu float64 // seconds, in-process
	boxWall   float64 // seconds through the sandbox (0 without one)
	predict   float64 // seconds per world-model prediction
	estimate  float64 // work units
	status    executor.Status
	refused   bool
}

func run() error {
	suiteSeed := flag.Uint64("suite-seed", suite.DefaultSeed, "suite seed")
	step := flag.Int("step", 4, "use every step-th task of the suite")
	policySamples := flag.Int("policy-samples", 8, "programs sampled from the initial policy per task")
	boxKind := flag.String("sandbox", "", "also run every program in this sandbox: process or docker (default: none)")
	executorBin := flag.String("executor", "", "wmrl-executor binary for -sandbox (default: sandbox.FindExecutor)")
	wmReps := flag.Int("wm-reps", 200, "world-model predictions timed together per program")
	flag.Parse()
	if *wmReps < 1 {
		return fmt.Errorf("-wm-reps %d: want >= 1", *wmReps)
	}
	if *step < 1 {
		return fmt.Errorf("-step %d: want >= 1", *step)
	}
	ctx := context.Background()
	s, err := suite.Loader{Progress: os.Stderr}.Load(ctx, suite.DefaultOptions(*suiteSeed))
	if err != nil {
		return err
	}
	var tasks []*suite.Task
	for i := 0; i < len(s.Tasks); i += *step {
		tasks = append(tasks, s.Tasks[i])
	}
	g := policy.ProgramGrammar{}
	pol, err := policy.Init(policy.DefaultConfig(g, suite.VectorLen), g, 1)
	if err != nil {
		return err
	}
	cfg := grpoloop.DefaultExecConfig()
	cfg.Workers = 1
	var box sandbox.Sandbox
	if *boxKind != "" {
		bin, err := sandbox.FindExecutor(*executorBin)
		if err != nil {
			return err
		}
		b, release, err := sandbox.Open(ctx, *boxKind, bin)
		if err != nil {
			return err
		}
		defer release()
		box = b
	}
	wm, err := worldmodel.Default()
	if err != nil {
		return err
	}
	var all []sample
	for _, t := range tasks {
		progs := map[string][]string{}
		for _, text := range suite.Panel(t.Kind, s.Options.PanelSize) {
			p, _ := program.Parse(text)
			progs[p.Model.Name] = append(progs[p.Model.Name], text)
		}
		for i := range *policySamples {
			smp, err := pol.Sample(t.Card.Vector(), grpoloop.HeldOutSeed(1, t.ID, i))
			if err != nil {
				return err
			}
			p, err := program.Decode(smp.Tokens)
			if err != nil {
				return err
			}
			progs["policy"] = append(progs["policy"], p.String())
		}
		for fam, texts := range progs {
			for _, text := range texts {
				sm, err := measure(ctx, cfg, box, t, fam, text)
				if err != nil {
					return err
				}
				if sm.predict, err = timePredict(wm, t, text, *wmReps); err != nil {
					return err
				}
				all = append(all, sm)
			}
		}
	}
	fmt.Printf("suite seed %d (hash %.12s), %d of %d tasks, GOMAXPROCS-independent single executions, budget %.3g work units\n",
		*suiteSeed, s.Hash, len(tasks), len(s.Tasks), cfg.Budget)
	return report(all)
}

func measure(ctx context.Context, cfg grpoloop.ExecConfig, box sandbox.Sandbox, t *suite.Task, fam, text string) (sample, error) {
	job := executor.NewJob(t, text, 1)
	p, err := program.Parse(text)
	if err != nil {
		return sample{}, err
	}
	n, c := t.Data.XTrain.Dims()
	m, _ := t.Data.XTest.Dims()
	res, cost, err := grpoloop.Execute(ctx, cfg, []*executor.Job{job})
	if err != nil {
		return sample{}, fmt.Errorf("task %s program %q: %w", t.ID, text, err)
	}
	sm := sample{
		family: fam, task: t, program: text, wall: res[0].WallSeconds, cpu: cost.CPUSeconds,
		estimate: tabular.EstimateCost(p, n, m, c), status: res[0].Status, refused: cost.Refused > 0,
	}
	if box != nil && !sm.refused {
		start := time.Now()
		req, err := sandbox.NewRequest(job, sandbox.DefaultLimits())
		if err != nil {
			return sample{}, err
		}
		r, err := box.Execute(ctx, req)
		if err != nil {
			return sample{}, fmt.Errorf("sandbox: task %s program %q: %w", t.ID, text, err)
		}
		sm.boxWall = time.Since(start).Seconds()
		if r.Status != sm.status {
			return sample{}, fmt.Errorf("task %s program %q: status %s in the sandbox, %s in-process", t.ID, text, r.Status, sm.status)
		}
	}
	return sm, nil
}

// timePredict returns the mean seconds of one world-model prediction of
// text on t over reps repetitions.
func timePredict(wm *worldmodel.Model, t *suite.Task, text string, reps int) (float64, error) {
	var sink float64
	start := time.Now()
	for range reps {
		v, err := wm.PredictText(t.Card.Vector(), text)
		if err != nil {
			return 0, fmt.Errorf("world model on %s %q: %w", t.ID, text, err)
		}
		sink += v
	}
	el := time.Since(start).Seconds() / float64(reps)
	if sink < 0 { // keeps the loop's work observable; predictions are >= 0
		return 0, fmt.Errorf("negative prediction")
	}
	return el, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(all []sample) error {
	fams := append(program.Models(), "policy")
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "family\texecutions\trefused\twall ms (median)\tCPU ms (median)\tns per work unit (median)\tsandbox wall ms (median)\tWM predict µs (median)\texec/WM\tsandbox/WM\t")
	var walls, cpus, rates, boxes, preds []float64
	for _, fam := range fams {
		var wl, cp, rt, bx, pr []float64
		refused := 0
		for _, sm := range all {
			if sm.family != fam {
				continue
			}
			if sm.refused {
				refused++
				continue
			}
			wl = append(wl, sm.wall*1e3)
			pr = append(pr, sm.predict*1e3)
			if sm.boxWall > 0 {
				bx = append(bx, sm.boxWall*1e3)
			}
			cp = append(cp, sm.cpu*1e3)
			if sm.estimate > 0 && sm.status == executor.StatusOK {
				rt = append(rt, sm.wall*1e9/sm.estimate)
			}
		}
		if len(wl) == 0 && refused == 0 {
			continue
		}
		if fam != "policy" {
			walls, cpus, rates, boxes, preds = append(walls, wl...), append(cpus, cp...), append(rates, rt...), append(boxes, bx...), append(preds, pr...)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%.3f\t%.3f\t%.2f\t%s\t%.2f\t%s\t%s\t\n", fam, len(wl), refused, median(wl), median(cp), median(rt), ms(bx),
			median(pr)*1e3, ratio(wl, pr), ratio(bx, pr))
	}
	fmt.Fprintf(w, "panel (all families)\t%d\t\t%.3f\t%.3f\t%.2f\t%s\t%.2f\t%s\t%s\t\n", len(walls), median(walls), median(cpus), median(rates), ms(boxes),
		median(preds)*1e3, ratio(walls, preds), ratio(boxes, preds))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Printf("panel means: execution %.3f ms in-process, %s ms in the sandbox; prediction %.2f µs; exec/WM %s, sandbox/WM %s\n",
		mean(walls), meanText(boxes), mean(preds)*1e3, meanRatio(walls, preds), meanRatio(boxes, preds))
	var panelMax float64
	for _, sm := range all {
		if sm.family != "policy" {
			panelMax = max(panelMax, sm.estimate)
		}
	}
	fmt.Printf("largest estimate among panel programs: %.3g work units\n", panelMax)
	slowest := slices.MaxFunc(all, func(a, b sample) int { return cmp.Compare(a.wall, b.wall) })
	fmt.Printf("slowest: %s on %s: %.1f ms (estimate %.3g units)\n", slowest.program, slowest.task.ID,
		slowest.wall*1e3, slowest.estimate)
	return nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func meanText(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", mean(xs))
}

func meanRatio(num, den []float64) string {
	if len(num) == 0 || len(den) == 0 || mean(den) <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fx", mean(num)/mean(den))
}

// ratio formats median(num)/median(den) as a multiple, or "-".
func ratio(num, den []float64) string {
	if len(num) == 0 || len(den) == 0 || median(den) <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fx", median(num)/median(den))
}

// ms formats the median of xs, or "-" when there are none.
func ms(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", median(xs))
}
