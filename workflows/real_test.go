package workflows

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// These tests run TrainingRun in the test environment with the real
// activities: Postgres, the small test suite, the default world model and
// real (in-process) executions.

func realActivities(t *testing.T, st *store.Store, sb *testenv.InProcess, dataDir string) *activities.Activities {
	t.Helper()
	if _, err := testenv.SmallSuite(); err != nil {
		t.Fatal(err)
	}
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	b := builtin.New(testenv.Suites{}, wm, sb)
	return &activities.Activities{Store: st, Tasks: b.Tasks, Policy: b.Policy, WorldModel: b.WorldModel, Grader: b.Grader, DataDir: dataDir}
}

// runToEnd runs a run through its continue-as-new segments and returns its
// result and the number of segments.
func runToEnd(t *testing.T, a *activities.Activities, in RunInput) (RunResult, int) {
	t.Helper()
	return runToEndWith(t, a, in, nil)
}

// runReal runs cfg to its end as run id on fresh real activities over st
// (an in-process sandbox, a data directory of its own).
func runReal(t *testing.T, st *store.Store, id string, cfg runconfig.Config) RunResult {
	t.Helper()
	res, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: id, Config: cfg})
	return res
}

// runTwice runs cfg twice (runs prefix-1 and prefix-2, runReal), fails
// unless both reach the same checkpoint and held-out score, and returns the
// first's result and both runs' stored steps, cfg.Steps each.
func runTwice(t *testing.T, st *store.Store, prefix string, cfg runconfig.Config) (RunResult, [2][]store.Step) {
	t.Helper()
	r1, r2 := runReal(t, st, prefix+"-1", cfg), runReal(t, st, prefix+"-2", cfg)
	if r1.Checkpoint != r2.Checkpoint || *r1.HeldOut != *r2.HeldOut {
		t.Fatalf("same seed, different outcomes: %+v %+v and %+v %+v", r1.Checkpoint, r1.HeldOut, r2.Checkpoint, r2.HeldOut)
	}
	var steps [2][]store.Step
	for i := range steps {
		s, err := st.Steps(t.Context(), fmt.Sprintf("%s-%d", prefix, i+1))
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != cfg.Steps {
			t.Fatalf("%s-%d: %d steps, want %d", prefix, i+1, len(s), cfg.Steps)
		}
		steps[i] = s
	}
	return r1, steps
}

// runToEndWith is runToEnd with setup applied to every segment's
// environment (nil: none), e.g. a GetVersion mock.
func runToEndWith(t *testing.T, a *activities.Activities, in RunInput, setup func(*testsuite.TestWorkflowEnvironment)) (RunResult, int) {
	t.Helper()
	if in.Config.Pipeline.OffPolicy() > 0 {
		// Pipelined runs carry their steps in flight across
		// continue-as-new: one environment (runChained).
		res, ch := runChained(t, a, in, setup)
		return res, len(ch.executions)
	}
	var s testsuite.WorkflowTestSuite
	for seg := 1; seg <= 20; seg++ {
		env := newEnv(t, &s)
		env.SetTestTimeout(2 * time.Minute)
		activities.Register(env, a)
		if setup != nil {
			setup(env)
		}
		env.ExecuteWorkflow(TrainingRun, in)
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			in = decodeContinueAsNew(t, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var res RunResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		return res, seg
	}
	t.Fatal("run did not end in 20 segments")
	return RunResult{}, 0
}

func TestRealRun(t *testing.T) {
	for _, m := range []mode.Mode{mode.WMRL, mode.GRPO, mode.WM, mode.Anchor} {
		t.Run(string(m), func(t *testing.T) {
			st := testenv.FreshStore(t)
			sb := &testenv.InProcess{}
			a := realActivities(t, st, sb, t.TempDir())
			cfg := tiny(t, m)
			cfg.SuiteSeed = testenv.SuiteSeed
			res, segs := runToEnd(t, a, RunInput{RunID: "real-" + string(m), Config: cfg})
			if res.Steps != cfg.Steps || segs != 2 || res.HeldOut == nil || res.HeldOut.Tasks != cfg.Eval.Tasks {
				t.Fatalf("result %+v after %d segments", res, segs)
			}
			ctx := t.Context()
			c, err := st.Count(ctx, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			G, n := cfg.Groups, cfg.Samples
			wantExec := map[mode.Mode]int{mode.GRPO: cfg.Steps * G * n, mode.WM: 0, mode.WMRL: cfg.Steps * 1 * n,
				mode.Anchor: cfg.Steps * 1 * n}[m]
			wantPairs := map[mode.Mode]int{mode.GRPO: 0, mode.WM: 0, mode.WMRL: wantExec, mode.Anchor: 0}[m]
			if c.Steps != cfg.Steps || c.Trajectories != cfg.Steps*G*n || c.Executed != wantExec ||
				c.AnchorPairs != wantPairs || c.Checkpoints != cfg.Steps+1 || c.Evaluations != cfg.Eval.Tasks*cfg.Eval.Samples {
				t.Fatalf("counts %+v (executed want %d, pairs want %d)", c, wantExec, wantPairs)
			}
			if sb.Runs() != wantExec+cfg.Eval.Tasks*cfg.Eval.Samples {
				t.Fatalf("sandbox ran %d times, want %d training + %d held-out", sb.Runs(), wantExec, cfg.Eval.Tasks*cfg.Eval.Samples)
			}
			cps, err := st.Checkpoints(ctx, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			for v, cp := range cps {
				if cp.Version != v {
					t.Fatalf("checkpoint versions not contiguous: %+v", cps)
				}
			}
			if cps[len(cps)-1].Hash != res.Checkpoint.Hash {
				t.Fatalf("final checkpoint %+v, result says %+v", cps[len(cps)-1], res.Checkpoint)
			}
		})
	}
}

// TestRealRunAnchor runs wmrl and its control, the anchor mode, on the same
// seed: the anchor run executes exactly wmrl's anchor trajectories (the same
// groups and samples at every step, so the same number of executions),
// scores nothing by the world model, and trains on its anchor groups alone.
func TestRealRunAnchor(t *testing.T) {
	st := testenv.FreshStore(t)
	ctx := t.Context()
	sbs := map[mode.Mode]*testenv.InProcess{}
	cfgs := map[mode.Mode]runconfig.Config{}
	for _, m := range []mode.Mode{mode.WMRL, mode.Anchor} {
		sbs[m] = &testenv.InProcess{}
		cfg := tiny(t, m)
		cfg.SuiteSeed = testenv.SuiteSeed
		cfg.Eval.Tasks = 1
		cfgs[m] = cfg
		runToEnd(t, realActivities(t, st, sbs[m], t.TempDir()), RunInput{RunID: "ctl-" + string(m), Config: cfg})
	}
	cfg := cfgs[mode.Anchor]
	G, n := cfg.Groups, cfg.Samples
	held := cfg.Eval.Tasks * cfg.Eval.Samples
	if a, w := sbs[mode.Anchor].Runs()-held, sbs[mode.WMRL].Runs()-held; a != w || a != cfg.Steps*1*n {
		t.Errorf("training executions: anchor %d, wmrl %d, want both %d", a, w, cfg.Steps*n)
	}
	executed := func(ts []store.Trajectory) (keys []string, scored int) {
		for _, tr := range ts {
			if tr.Exec != nil {
				keys = append(keys, fmt.Sprintf("%d/%d anchor=%v", tr.Group, tr.Sample, tr.Anchor))
			}
			if tr.WMScore != nil {
				scored++
			}
		}
		return keys, scored
	}
	var wmScores int
	var gradNorm float64
	for step := range cfg.Steps {
		var keys [2][]string
		for i, m := range []mode.Mode{mode.WMRL, mode.Anchor} {
			ts, err := st.StepTrajectories(ctx, "ctl-"+string(m), step)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != G*n {
				t.Fatalf("%s step %d: %d trajectories, want %d", m, step, len(ts), G*n)
			}
			var scored int
			keys[i], scored = executed(ts)
			if m == mode.Anchor {
				wmScores += scored
			}
		}
		if !slices.Equal(keys[0], keys[1]) || len(keys[1]) != n {
			t.Errorf("step %d: executed wmrl %v, anchor %v", step, keys[0], keys[1])
		}
		steps, err := st.Steps(ctx, "ctl-anchor")
		if err != nil {
			t.Fatal(err)
		}
		if m := steps[step].Metrics; m.Executed != n || m.Graded != n || m.Ungraded != 0 || m.SkippedGroups != 0 ||
			m.MeanWM != 0 || m.Rho != 1 || m.AnchorShare != 1 {
			t.Errorf("step %d metrics %+v", step, m)
		}
		gradNorm += steps[step].Metrics.GradNorm
	}
	if gradNorm == 0 {
		t.Error("the anchor run never moved the policy: grad_norm 0 at every step")
	}
	if wmScores != 0 {
		t.Errorf("the anchor run has %d world-model scores, want 0", wmScores)
	}
	c, err := st.Count(ctx, "ctl-anchor")
	if err != nil {
		t.Fatal(err)
	}
	if c.Executed != cfg.Steps*n || c.Anchors != cfg.Steps*n || c.AnchorPairs != 0 || c.Calibrations != 0 ||
		c.Checkpoints != cfg.Steps+1 {
		t.Errorf("anchor run counts %+v", c)
	}
}

// TestRealRunDeterministic runs the same seed twice, the second time with a
// sandbox that fails now and then (retried): the final checkpoints are
// identical.
func TestRealRunDeterministic(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	a1 := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	r1, _ := runToEnd(t, a1, RunInput{RunID: "det-1", Config: cfg})
	flaky := &testenv.InProcess{}
	flaky.FailNext(2)
	a2 := realActivities(t, st, flaky, t.TempDir())
	r2, _ := runToEnd(t, a2, RunInput{RunID: "det-2", Config: cfg})
	if r1.Checkpoint.Hash != r2.Checkpoint.Hash || r1.Checkpoint.Version != r2.Checkpoint.Version {
		t.Fatalf("same seed, different final checkpoints: %+v and %+v", r1.Checkpoint, r2.Checkpoint)
	}
	if *r1.HeldOut != *r2.HeldOut {
		t.Fatalf("held-out scores differ: %+v and %+v", r1.HeldOut, r2.HeldOut)
	}
	// A different seed trains a different policy.
	cfg.Seed++
	r3, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "det-3", Config: cfg})
	if r3.Checkpoint.Hash == r1.Checkpoint.Hash {
		t.Fatal("different seeds gave the same checkpoint")
	}
}

// TestRealResumeFrom resumes a run that ended after 2 of 3 steps into a new
// run: it ends at the checkpoint of an uninterrupted 3-step run.
func TestRealResumeFrom(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.ContinueAsNewEvery = 10
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	full, _ := runToEnd(t, a, RunInput{RunID: "full", Config: cfg})
	short := cfg
	short.Steps = 2
	runToEnd(t, a, RunInput{RunID: "short", Config: short})
	res, _ := runToEnd(t, a, RunInput{RunID: "resumed", Config: cfg, ResumeFrom: "short"})
	if res.Steps != 3 || res.Checkpoint != full.Checkpoint {
		t.Fatalf("resumed run %+v, uninterrupted %+v", res, full)
	}
	n, err := st.Count(t.Context(), "resumed")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Count(t.Context(), "full")
	if err != nil {
		t.Fatal(err)
	}
	if n.Trajectories != m.Trajectories || n.Checkpoints != m.Checkpoints || n.AnchorPairs != m.AnchorPairs || n.Steps != m.Steps {
		t.Fatalf("resumed counts %+v, uninterrupted %+v", n, m)
	}
	r, err := st.Run(t.Context(), "resumed")
	if err != nil || r.ResumedFrom != "short" || r.ResumedStep != 1 || r.State != store.RunCompleted {
		t.Fatalf("resumed run row %+v, %v", r, err)
	}
}
