package workflows

import (
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/testenv"
)

func activeConfig(t *testing.T) runconfig.Config {
	t.Helper()
	cfg := tiny(t, mode.WMRL)
	cfg.Groups, cfg.Anchors.Fraction = 12, 0.25
	cfg.Anchors.Active = runconfig.ActiveAnchors{Enabled: true, Mix: 1, Floor: 0.2}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestStepActiveAnchors: with anchors.active the step asks AnchorUncertainty
// once, chooses the groups anchors.SelectActive chooses from its answer,
// executes those, and hands their weights to RecordAnchors and Fuse.
func TestStepActiveAnchors(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := activeConfig(t)
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, 0)
	in := StepInput{RunID: "r", Step: 3, Config: cfg, AnchorFraction: cfg.Anchors.Fraction,
		Checkpoint: activities.CheckpointRef{Version: 3, Hash: hashOf(3)}}
	env.ExecuteWorkflow(TrainingStep, in)
	res := workflowResult[StepResult](t, env)
	u := make([]float64, cfg.Groups)
	for g := range u {
		u[g] = uncertaintyOf(g)
	}
	want, err := anchors.SelectActive(cfg.Seed, 3, u, cfg.Anchors.Fraction, cfg.Anchors.Min, -1, cfg.Anchors.Active.Selection())
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Groups) != 3 {
		t.Fatalf("want %d anchors, the config gives 3", len(want.Groups))
	}
	if !slices.Equal(res.Anchors, want.Groups) || !slices.Equal(res.AnchorWeights, want.Weights) {
		t.Errorf("anchors %v weights %v, want %v %v", res.Anchors, res.AnchorWeights, want.Groups, want.Weights)
	}
	if f.n("AnchorUncertainty") != 1 {
		t.Errorf("AnchorUncertainty called %d times", f.n("AnchorUncertainty"))
	}
	if got := f.executedGroups(3); !slices.Equal(got, want.Groups) {
		t.Errorf("executed %v, want %v", got, want.Groups)
	}
	if len(f.records) != 1 || !slices.Equal(f.records[0].Weights, want.Weights) {
		t.Errorf("RecordAnchors %+v, want weights %v", f.records, want.Weights)
	}
	if len(f.fuses) != 1 || !slices.Equal(f.fuses[0].AnchorWeights, want.Weights) {
		t.Errorf("Fuse %+v, want weights %v", f.fuses, want.Weights)
	}
}

// TestStepUniformAnchorsUnchanged: without anchors.active a step asks for
// no uncertainty and sends no weights: requests as before the feature.
func TestStepUniformAnchorsUnchanged(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.WMRL)
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, 0)
	env.ExecuteWorkflow(TrainingStep, stepInput0(cfg))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.n("AnchorUncertainty") != 0 || f.records[0].Weights != nil || f.fuses[0].AnchorWeights != nil {
		t.Errorf("uniform step: %d uncertainty calls, weights %v, %v", f.n("AnchorUncertainty"), f.records[0].Weights,
			f.fuses[0].AnchorWeights)
	}
}

// TestRunAdaptiveFraction: the controller moves the fraction after every
// step whose denoiser is calibrated, by anchors.Adapt of the step's ρ,
// carries it across continue-as-new, and leaves it alone before.
func TestRunAdaptiveFraction(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := activeConfig(t) // 3 steps, continue-as-new every 2
	cfg.Groups = 4
	cfg.Anchors.Adaptive = runconfig.AdaptiveAnchors{TargetRho: 1.05, Floor: 0.25, Ceiling: 0.75, Gain: 0.25}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctl := cfg.Anchors.Adaptive.Controller()
	// The fake's ρ is 1 + (groups pushed)/10; it pushes one per anchor group.
	expect := func(calibrateAt int) (fractions []float64, next float64) {
		f, groups := cfg.Anchors.Fraction, 0
		for range 2 {
			fractions = append(fractions, f)
			k, _ := anchors.Count(cfg.Groups, f, cfg.Anchors.Min, -1)
			groups += k
			if calibrateAt > 0 && groups >= calibrateAt {
				f = anchors.Adapt(f, 1+float64(groups)/10, ctl)
			}
		}
		return fractions, f
	}
	for _, calibrateAt := range []int{1, 0} {
		env := newEnv(t, &s)
		f := &fake{calibrateAt: calibrateAt}
		f.register(env, 0)
		env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "r", Config: cfg})
		next := decodeContinueAsNew(t, env.GetWorkflowError())
		wantFractions, wantNext := expect(calibrateAt)
		if !slices.Equal(f.fractions, wantFractions) || next.State.AnchorFraction != wantNext {
			t.Errorf("calibrated at %d: fractions %v then %v, want %v then %v", calibrateAt, f.fractions,
				next.State.AnchorFraction, wantFractions, wantNext)
		}
		if calibrateAt > 0 && !(wantNext > cfg.Anchors.Fraction) {
			t.Errorf("ρ above the target did not raise the fraction: %v", wantNext)
		}
		if calibrateAt == 0 && wantNext != cfg.Anchors.Fraction {
			t.Errorf("an uncalibrated denoiser moved the fraction to %v", wantNext)
		}

		// The continued run starts from the carried fraction.
		env2 := newEnv(t, &s)
		f2 := &fake{calibrateAt: calibrateAt}
		f2.register(env2, 0)
		env2.ExecuteWorkflow(TrainingRun, next)
		if err := env2.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if len(f2.fractions) != 1 || f2.fractions[0] != wantNext {
			t.Errorf("continued run used fractions %v, want [%v]", f2.fractions, wantNext)
		}
	}
}

// TestRealRunActiveAnchors runs wmrl with active anchors and the adaptive
// fraction on real activities, twice with the same seed (the second time
// with a sandbox that fails now and then): the same final checkpoint, the
// same anchor pairs with the same weights, and weights other than 1 stored.
func TestRealRunActiveAnchors(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Groups = 8
	cfg.Anchors.Active = runconfig.ActiveAnchors{Enabled: true, Mix: 0.5, Floor: 0.25}
	cfg.Anchors.Adaptive = runconfig.AdaptiveAnchors{TargetRho: 1.2, Floor: 0.125, Ceiling: 0.5, Gain: 0.2}
	r1, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "act-1", Config: cfg})
	flaky := &testenv.InProcess{}
	flaky.FailNext(2)
	r2, _ := runToEnd(t, realActivities(t, st, flaky, t.TempDir()), RunInput{RunID: "act-2", Config: cfg})
	if r1.Checkpoint != r2.Checkpoint || *r1.HeldOut != *r2.HeldOut {
		t.Fatalf("same seed, different outcomes: %+v %+v and %+v %+v", r1.Checkpoint, r1.HeldOut, r2.Checkpoint, r2.HeldOut)
	}
	ctx := t.Context()
	p1, err := st.AnchorPairs(ctx, "act-1", cfg.Steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := st.AnchorPairs(ctx, "act-2", cfg.Steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p1) == 0 || len(p1) != len(p2) {
		t.Fatalf("%d and %d anchor pairs", len(p1), len(p2))
	}
	weighted := 0
	for i := range p1 {
		if p1[i].Group != p2[i].Group || p1[i].Step != p2[i].Step || p1[i].Weight != p2[i].Weight {
			t.Fatalf("pair %d: %+v and %+v", i, p1[i], p2[i])
		}
		if p1[i].Weight != 0 {
			weighted++
		}
	}
	if weighted == 0 {
		t.Error("no stored pair has a weight other than 1")
	}
}

// TestRealResumeActiveAnchors: a run with active anchors and the adaptive
// fraction resumed after 2 of 4 steps ends where the uninterrupted run
// does, with the same anchor pairs, weights and per-step fractions.
func TestRealResumeActiveAnchors(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Groups, cfg.Steps, cfg.ContinueAsNewEvery = 8, 4, 10
	cfg.Anchors.Active = runconfig.ActiveAnchors{Enabled: true, Mix: 0.5, Floor: 0.25}
	cfg.Anchors.Adaptive = runconfig.AdaptiveAnchors{TargetRho: 1.2, Floor: 0.125, Ceiling: 0.5, Gain: 0.2}
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	full, _ := runToEnd(t, a, RunInput{RunID: "afull", Config: cfg})
	short := cfg
	short.Steps = 2
	runToEnd(t, a, RunInput{RunID: "ashort", Config: short})
	res, _ := runToEnd(t, a, RunInput{RunID: "aresumed", Config: cfg, ResumeFrom: "ashort"})
	if res.Steps != cfg.Steps || res.Checkpoint != full.Checkpoint {
		t.Fatalf("resumed run %+v, uninterrupted %+v", res, full)
	}
	ctx := t.Context()
	pf, err := st.AnchorPairs(ctx, "afull", cfg.Steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := st.AnchorPairs(ctx, "aresumed", cfg.Steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pf) != len(pr) {
		t.Fatalf("%d pairs uninterrupted, %d resumed", len(pf), len(pr))
	}
	for i := range pf {
		if pf[i].Step != pr[i].Step || pf[i].Group != pr[i].Group || pf[i].Weight != pr[i].Weight {
			t.Fatalf("pair %d: %+v uninterrupted, %+v resumed", i, pf[i], pr[i])
		}
	}
	sf, err := st.Steps(ctx, "afull")
	if err != nil {
		t.Fatal(err)
	}
	sr, err := st.Steps(ctx, "aresumed")
	if err != nil {
		t.Fatal(err)
	}
	if len(sf) != cfg.Steps || len(sr) != cfg.Steps {
		t.Fatalf("%d and %d steps", len(sf), len(sr))
	}
	var fractions []float64
	for i := range sf {
		fractions = append(fractions, sf[i].Metrics.AnchorFraction)
		if sf[i].Metrics.AnchorFraction != sr[i].Metrics.AnchorFraction {
			t.Errorf("step %d: fraction %v uninterrupted, %v resumed", i, sf[i].Metrics.AnchorFraction, sr[i].Metrics.AnchorFraction)
		}
	}
	t.Logf("fractions %v", fractions)
	if fractions[cfg.Steps-1] == fractions[0] {
		t.Error("the controller never moved the fraction: the test does not exercise the resumed controller")
	}
}

// TestStepSelectiveScoring: with anchors.selective the step asks
// AnchorUncertainty once (also with active anchors), hands Fuse the
// world-model groups anchors.Selective.LeftOut names (the anchor groups
// among them dropped) with the cut κ·σ0, and records fusion's counts in
// its metrics.
func TestStepSelectiveScoring(t *testing.T) {
	for _, active := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		cfg := activeConfig(t)
		if !active {
			cfg.Anchors.Active = runconfig.ActiveAnchors{}
		}
		cfg.Anchors.Selective = runconfig.SelectiveScoring{Enabled: true, Ratio: 1.5}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		env := newEnv(t, &s)
		f := &fake{groups: cfg.Groups}
		f.register(env, 0)
		in := StepInput{RunID: "r", Step: 3, Config: cfg, AnchorFraction: cfg.Anchors.Fraction,
			Checkpoint: activities.CheckpointRef{Version: 3, Hash: hashOf(3)}}
		env.ExecuteWorkflow(TrainingStep, in)
		res := workflowResult[StepResult](t, env)
		if f.n("AnchorUncertainty") != 1 {
			t.Errorf("active %v: AnchorUncertainty called %d times", active, f.n("AnchorUncertainty"))
		}
		sigma0 := fakeSigma0 // a float64 at run time, as in the step
		cut := 1.5 * sigma0
		var want []int // uncertainty 0.2 and 0.3 are above 1.5·0.1
		for g := range cfg.Groups {
			if g%3 != 0 && !slices.Contains(res.Anchors, g) {
				want = append(want, g)
			}
		}
		if len(f.fuses) != 1 || f.fuses[0].Selective == nil || !slices.Equal(f.fuses[0].Selective.LeftOut, want) ||
			f.fuses[0].Selective.Cut != cut {
			t.Fatalf("active %v (anchors %v): Fuse selection %+v, want left out %v", active, res.Anchors, f.fuses[0].Selective, want)
		}
		u := make([]float64, cfg.Groups)
		for g := range u {
			u[g] = uncertaintyOf(g)
		}
		maxRatio := anchors.MaxRatio(u, sigma0, res.Anchors)
		if !(maxRatio > 2.9) {
			t.Fatalf("active %v: max ratio %v, want about 3 (a group of uncertainty 0.3 is not an anchor)", active, maxRatio)
		}
		wantScoring := anchors.Scoring{Scored: cfg.Groups - len(res.Anchors) - len(want), LeftOut: len(want), Cut: cut,
			MaxRatio: maxRatio}
		if m := res.Metrics.Scoring; m == nil || *m != wantScoring || len(f.scorings) != 1 || *f.scorings[0] != wantScoring {
			t.Errorf("active %v: metrics scoring %+v, finish %v, want %+v", active, m, f.scorings, wantScoring)
		}
		if !strings.Contains(stepLine(3, res), "left out") {
			t.Errorf("step line %q lacks the decision", stepLine(3, res))
		}
	}
}

// TestStepWithoutSelectiveScoring: without anchors.selective the Fuse
// request carries no selection and the metrics no decision.
func TestStepWithoutSelectiveScoring(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, 0)
	env.ExecuteWorkflow(TrainingStep, stepInput0(tiny(t, mode.WMRL)))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.fuses[0].Selective != nil || f.scorings[0] != nil {
		t.Errorf("selection %+v, scoring %+v without anchors.selective", f.fuses[0].Selective, f.scorings[0])
	}
}

// TestRealRunSelectiveScoring runs wmrl on the tiny preset with selective
// scoring on real activities, twice with the same seed: the same final
// checkpoint and the same decisions, and some world-model groups left out.
func TestRealRunSelectiveScoring(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Anchors.Selective = runconfig.SelectiveScoring{Enabled: true, Ratio: 1}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r1, steps := runTwice(t, st, "sel", cfg)
	s1, s2 := steps[0], steps[1]
	leftOut := 0
	for i := range s1 {
		a, b := s1[i].Metrics.Scoring, s2[i].Metrics.Scoring
		if a == nil || b == nil || *a != *b {
			t.Fatalf("step %d: decisions %+v and %+v", i, a, b)
		}
		if a.Scored+a.LeftOut+s1[i].Metrics.AnchorGroups != cfg.Groups {
			t.Errorf("step %d: %+v with %d anchor groups of %d", i, *a, s1[i].Metrics.AnchorGroups, cfg.Groups)
		}
		t.Logf("step %d: %s", i, a)
		leftOut += a.LeftOut
	}
	if s1[0].Metrics.Scoring.LeftOut != 0 {
		t.Errorf("step 0 (no past pairs, every uncertainty σ0) left out %d groups", s1[0].Metrics.Scoring.LeftOut)
	}
	if leftOut == 0 {
		t.Error("no world-model group was left out: the test does not exercise the decision")
	}
	// The run without selective scoring ends elsewhere: the decision
	// reached the update.
	off := cfg
	off.Anchors.Selective = runconfig.SelectiveScoring{}
	if r3 := runReal(t, st, "sel-off", off); r3.Checkpoint == r1.Checkpoint {
		t.Errorf("checkpoint %+v with and without selective scoring", r1.Checkpoint)
	}
}
