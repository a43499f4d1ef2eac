package grpoloop

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"

	"github.com/wmrl/wmrl/internal/policy"
	"github.com/wmrl/wmrl/internal/suite"
)

// smallSuite builds a small real suite once per options: full reference
// panel (so positions mean what they mean in the default suite), few tasks,
// few rows and features so that it builds in about a second.
var smallSuites sync.Map // suite.Options -> func() (*suite.Suite, error)

func smallSuite(t testing.TB, opts suite.Options) *suite.Suite {
	t.Helper()
	f, _ := smallSuites.LoadOrStore(opts, sync.OnceValues(func() (*suite.Suite, error) {
		return suite.Generate(context.Background(), opts)
	}))
	s, err := f.(func() (*suite.Suite, error))()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func learnOptions() suite.Options {
	return suite.Options{Seed: suite.DefaultSeed, Train: 6, HeldOut: 6, MinRows: 120, MaxRows: 240, MaxFeatures: 8}
}

func ids(s *suite.Suite, sp suite.Split) []string {
	var out []string
	for _, t := range s.Split(sp) {
		out = append(out, t.ID)
	}
	return out
}

// newPolicy is the initial policy of a run with seed runSeed (InitPolicy
// with the default configuration).
func newPolicy(t testing.TB, runSeed uint64) *policy.Policy {
	t.Helper()
	p, err := InitPolicy(policy.DefaultConfig(policy.ProgramGrammar{}, suite.VectorLen), runSeed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGRPOLearns is the end-to-end proof that the built-in suite learns: a
// GRPO loop with real executions on the training tasks raises the held-out
// score (avg@8, real executions on tasks never trained on) of the policy
// over its initial value.
func TestGRPOLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("real executions: about 5 s")
	}
	ctx := context.Background()
	s := smallSuite(t, learnOptions())
	train, held := ids(s, suite.Train), ids(s, suite.HeldOut)
	p := newPolicy(t, 3)
	eval := DefaultEvalConfig(7)

	before, err := HeldOut(ctx, s, p, held, eval)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(s, p, train, DefaultConfig(3))
	if err != nil {
		t.Fatal(err)
	}
	const steps = 24
	var first, last float64
	for i := range steps {
		r, err := l.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Updated {
			t.Fatalf("step %d: no update", r.Step)
		}
		switch i {
		case 0:
			first = r.MeanScore
		case steps - 1:
			last = r.MeanScore
		}
	}
	after, err := HeldOut(ctx, s, p, held, eval)
	if err != nil {
		t.Fatal(err)
	}
	c := l.Cost()
	t.Logf("held-out score (avg@8 on %d tasks) %.3f -> %.3f after %d GRPO steps of %dx%d on %d training tasks; train reward %.3f -> %.3f",
		len(held), before.Score, after.Score, p.Step(), l.cfg.Groups, l.cfg.Samples, len(train), first, last)
	t.Logf("training cost: %d executions, %d refused, %.2f CPU s, %.2f wall s; held-out cost: %d executions, %.2f CPU s",
		c.Executions, c.Refused, c.CPUSeconds, c.WallSeconds, after.Cost.Executions, after.Cost.CPUSeconds)
	if p.Step() != steps {
		t.Errorf("policy step %d, want %d", p.Step(), steps)
	}
	if after.Score < before.Score+0.12 {
		t.Errorf("held-out score %.3f -> %.3f: want a rise of at least 0.12", before.Score, after.Score)
	}
	if c.Executions+c.Refused != steps*l.cfg.Groups*l.cfg.Samples {
		t.Errorf("cost counts %d executions + %d refused, want %d in all", c.Executions, c.Refused, steps*l.cfg.Groups*l.cfg.Samples)
	}
}

// runRecord is everything a short run produces that must not depend on
// anything but the seeds.
type runRecord struct {
	SuiteHash string
	Before    HeldOutResult
	Steps     []StepResult
	Hashes    []string
	After     HeldOutResult
}

// deterministicRun builds a suite and runs a short loop; timings are
// zeroed, since they are the only outputs allowed to differ.
func deterministicRun(t *testing.T, procs, workers int) runRecord {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	ctx := context.Background()
	s, err := suite.Generate(ctx, suite.Options{Seed: 11, Train: 3, HeldOut: 2, MinRows: 120, MaxRows: 160, MaxFeatures: 6, PanelSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	p := newPolicy(t, 9)
	cfg := DefaultConfig(9)
	cfg.Groups, cfg.Samples, cfg.Exec.Workers = 3, 4, workers
	cfg.Exec.Budget = 3e6 // small enough that some programs are refused
	eval := EvalConfig{Seed: 2, Samples: 4, Exec: cfg.Exec}
	rec := runRecord{SuiteHash: s.Hash}
	if rec.Before, err = HeldOut(ctx, s, p, ids(s, suite.HeldOut), eval); err != nil {
		t.Fatal(err)
	}
	l, err := New(s, p, ids(s, suite.Train), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r, err := l.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec.Steps = append(rec.Steps, r)
		rec.Hashes = append(rec.Hashes, p.Hash())
	}
	if rec.After, err = HeldOut(ctx, s, p, ids(s, suite.HeldOut), eval); err != nil {
		t.Fatal(err)
	}
	zero := func(c *Cost) { c.CPUSeconds, c.WallSeconds = 0, 0 }
	zero(&rec.Before.Cost)
	zero(&rec.After.Cost)
	for i := range rec.Steps {
		zero(&rec.Steps[i].Cost)
		for j := range rec.Steps[i].Trajectories {
			r := &rec.Steps[i].Trajectories[j].Result
			r.CPUSeconds, r.WallSeconds = 0, 0
		}
	}
	return rec
}

// TestDeterminism: the same seeds give the same tasks, samples, scores,
// advantages and checkpoint hashes, whatever GOMAXPROCS and the number of
// execution workers.
func TestDeterminism(t *testing.T) {
	base := deterministicRun(t, 1, 1)
	var refused, ok int
	for _, st := range base.Steps {
		refused += st.Cost.Refused
		for _, tr := range st.Trajectories {
			if tr.Result.Status == "ok" {
				ok++
			}
		}
	}
	if refused == 0 || ok == 0 {
		t.Fatalf("%d refused and %d ok trajectories: want both kinds, to exercise the budget", refused, ok)
	}
	for _, c := range []struct{ procs, workers int }{{2, 0}, {2, 3}} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d,workers=%d", c.procs, c.workers), func(t *testing.T) {
			got := deterministicRun(t, c.procs, c.workers)
			if !reflect.DeepEqual(got, base) {
				a, _ := json.Marshal(base)
				b, _ := json.Marshal(got)
				t.Errorf("run differs from the GOMAXPROCS=1 run:\n%s\n%s", a, b)
			}
		})
	}
	if base.Hashes[0] == base.Hashes[2] {
		t.Errorf("checkpoint hash did not change over 3 updates")
	}
}
