package workflows

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/testenv"
)

// runDriver runs TrainingRun as its child, with workflow ID in.RunID. In
// the test environment a child's continue-as-new starts its next execution
// in the same environment, so the step children a pipelined run carries
// across continue-as-new (changePipelineCarry: parent close policy
// abandon) keep running, report to the run's workflow ID and are signalled
// by the next execution, as on a server. (Run directly, each segment would
// be an environment of its own, in which an abandoned step child waiting
// for the next execution's signal could never end.)
func runDriver(ctx workflow.Context, in RunInput) (RunResult, error) {
	co := workflow.ChildWorkflowOptions{WorkflowID: in.RunID, TaskQueue: QueueControl}
	var res RunResult
	err := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, co), TrainingRun, in).Get(ctx, &res)
	return res, err
}

// chain is what runChained saw: the input of each execution of the run, in
// order, and the number of times each step's child was started.
type chain struct {
	mu         sync.Mutex
	executions []RunInput
	steps      map[int]int
}

// runChained runs in to its end through runDriver (setup, when not nil,
// applied to the environment) and returns its result and what it saw.
func runChained(t *testing.T, a *activities.Activities, in RunInput, setup func(*testsuite.TestWorkflowEnvironment)) (RunResult, *chain) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	env.RegisterWorkflow(runDriver)
	env.SetTestTimeout(5 * time.Minute)
	activities.Register(env, a)
	ch := &chain{steps: map[int]int{}}
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		switch info.WorkflowType.Name {
		case "TrainingRun":
			var ri RunInput
			if err := args.Get(&ri); err != nil {
				t.Errorf("run input: %v", err)
			}
			ch.executions = append(ch.executions, ri)
		case "TrainingStep":
			var si StepInput
			if err := args.Get(&si); err != nil {
				t.Errorf("step input: %v", err)
			}
			ch.steps[si.Step]++
		}
	})
	if setup != nil {
		setup(env)
	}
	env.ExecuteWorkflow(runDriver, in)
	res := workflowResult[RunResult](t, env)
	return res, ch
}

// TestRealRunPipelineCarry: the tiny preset with d = 1, 5 steps,
// continue-as-new every 2 steps, in one test environment (runChained):
// every continue-as-new carries the step in flight, which the execution
// before started and the next folds (its input has that step in
// RunState.InFlight, not yet folded: State.Step is that step), no step's
// child is started twice, and the run ends at the checkpoint of the run
// without continue-as-new (TestRealRunPipeline's e8d0fe75353c; with the
// fused estimator without memory, the defaults before version 1,
// 55af68308dce, as recorded under them). With d = 2
// (continue-as-new every 2, 6 steps) two steps are carried, the second
// waiting for the first's outcome, which the next execution hands it by
// signalling its workflow ID; it ends where the run without continue-as-new
// does.
func TestRealRunPipelineCarry(t *testing.T) {
	st := testenv.FreshStore(t)
	for _, d := range []int{1, 2} {
		cfg := pipelineConfig(t, d)
		cfg.Steps, cfg.ContinueAsNewEvery = 5+d-1, 2
		run := func(id string, c runconfig.Config) (RunResult, *chain) {
			res, ch := runChained(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: id, Config: c}, nil)
			t.Logf("%s: %d steps, checkpoint %d %s, %d executions", id, res.Steps, res.Checkpoint.Version,
				short(res.Checkpoint.Hash), len(ch.executions))
			if res.Steps != c.Steps || res.Checkpoint.Version != c.Steps {
				t.Fatalf("%s: result %+v", id, res)
			}
			for s := range c.Steps {
				if ch.steps[s] != 1 {
					t.Errorf("%s: step %d started %d times, want once", id, s, ch.steps[s])
				}
			}
			return res, ch
		}
		a, ch := run(fmt.Sprintf("carry-%d", d), cfg)
		wide := cfg
		wide.ContinueAsNewEvery = 10
		b, wch := run(fmt.Sprintf("carry-%d-wide", d), wide)
		if len(wch.executions) != 1 {
			t.Fatalf("the wide run had %d executions", len(wch.executions))
		}
		if a.Checkpoint != b.Checkpoint {
			t.Fatalf("d = %d: carried across continue-as-new %s, without continue-as-new %s", d, short(a.Checkpoint.Hash),
				short(b.Checkpoint.Hash))
		}
		carried := 0
		for k, ex := range ch.executions[1:] {
			s := ex.State
			var steps []int
			for _, c := range s.InFlight {
				steps = append(steps, c.Step)
				t.Logf("execution %d starts at step %d carrying step %d (sampler %d, delivered %v, report received %v)",
					k+1, s.Step, c.Step, c.Sampler.Version, c.Delivered, c.Report != nil)
			}
			if len(steps) > 0 && steps[0] != s.Step {
				t.Errorf("execution %d starts at step %d carrying %v", k+1, s.Step, steps)
			}
			if len(steps) > d {
				t.Errorf("execution %d carries %v, more than d = %d", k+1, steps, d)
			}
			carried += len(steps)
		}
		if carried == 0 {
			t.Fatalf("d = %d: no continue-as-new carried a step in flight", d)
		}
		if d == 1 && a.Checkpoint.Hash[:12] != "e8d0fe75353c" {
			t.Errorf("d = 1: checkpoint %s, want TestRealRunPipeline's e8d0fe75353c", short(a.Checkpoint.Hash))
		}
		if d == 1 {
			// The defaults before version 1, written out, end at the
			// checkpoint this test recorded under them.
			old := cfg
			old.Denoise.Estimator, old.Denoise.Memory = denoise.EstimatorFused, false
			if o, _ := run("carry-1-fused", old); o.Checkpoint.Hash[:12] != "55af68308dce" {
				t.Errorf("d = 1, fused without memory: checkpoint %s, want 55af68308dce", short(o.Checkpoint.Hash))
			}
		}
	}
}

// serverExecution is one execution of a run on the server: its run ID,
// its input and the steps whose reports (SignalStepReport) it received.
type serverExecution struct {
	runID   string
	input   RunInput
	reports []int
}

// serverExecutions follows run id's executions from its first (run ID
// first) through their continue-as-new events.
func serverExecutions(t *testing.T, c client.Client, id, first string) []serverExecution {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	var out []serverExecution
	for run := first; run != ""; {
		ex := serverExecution{runID: run}
		next := ""
		it := c.GetWorkflowHistory(t.Context(), id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			switch e.GetEventType() {
			case enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				if err := dc.FromPayloads(e.GetWorkflowExecutionStartedEventAttributes().GetInput(), &ex.input); err != nil {
					t.Fatal(err)
				}
			case enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				a := e.GetWorkflowExecutionSignaledEventAttributes()
				if a.GetSignalName() != SignalStepReport {
					continue
				}
				var rep StepReport
				if err := dc.FromPayloads(a.GetInput(), &rep); err != nil {
					t.Fatal(err)
				}
				ex.reports = append(ex.reports, rep.Step)
			case enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				next = e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
			}
		}
		out = append(out, ex)
		run = next
	}
	return out
}

// TestIntegrationPipelineCarry runs the tiny preset pipelined with
// continue-as-new every 2 steps on the Temporal server with in-process
// workers: d = 1 (5 steps) and d = 2 (6 steps), each twice, and checks
// that each ends at the checkpoint of the test environment's run without
// continue-as-new, and that some step was started by one execution of the
// run (its parent run ID) and reported to the next (the report signal in
// that execution's history, the step in its input's RunState.InFlight). With
// WMRL_RECORD_HISTORIES=1 it writes, for d = 2, the first run's first two
// executions (the second folds the two steps the first started and hands
// the first's outcome to the second by signalling its workflow ID) and its
// step 1 (started with the parent close policy abandon, waiting for step
// 0's outcome by signal, reporting by signal) to testdata/pipe_carry_*.json
// for TestReplay.
func TestIntegrationPipelineCarry(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for _, d := range []int{1, 2} {
		cfg := pipelineConfig(t, d)
		cfg.Steps, cfg.ContinueAsNewEvery = 5+d-1, 2
		wide := cfg
		wide.ContinueAsNewEvery = 10
		want, _ := runChained(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()),
			RunInput{RunID: fmt.Sprintf("env-carry-%d-%d", d, stamp), Config: wide}, nil)
		for k := range 2 {
			id := fmt.Sprintf("it-carry-%d-%d-%d", d, k, stamp)
			start := time.Now()
			we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
				TrainingRun, RunInput{RunID: id, Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			var res RunResult
			if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d steps, checkpoint %d %s in %v", id, res.Steps, res.Checkpoint.Version, short(res.Checkpoint.Hash),
				time.Since(start).Round(time.Millisecond))
			if res.Steps != cfg.Steps || res.Checkpoint != want.Checkpoint {
				t.Fatalf("%s: %+v, the test environment's run without continue-as-new ends at %s", id, res, short(want.Checkpoint.Hash))
			}
			exs := serverExecutions(t, c, id, we.GetRunID())
			handed := 0
			for i, ex := range exs {
				var carried []int
				if s := ex.input.State; s != nil {
					for _, cs := range s.InFlight {
						carried = append(carried, cs.Step)
					}
				}
				t.Logf("%s execution %d: carried %v, reports of steps %v", id, i, carried, ex.reports)
				for _, s := range ex.reports {
					desc, err := c.DescribeWorkflowExecution(ctx, StepWorkflowID(id, s), "")
					if err != nil {
						t.Fatal(err)
					}
					parent := desc.GetWorkflowExecutionInfo().GetParentExecution().GetRunId()
					if parent != ex.runID {
						if i == 0 || parent != exs[i-1].runID || !slices.Contains(carried, s) {
							t.Errorf("%s: step %d reported to execution %d, started by %s", id, s, i, parent)
						}
						handed++
					}
				}
			}
			if len(exs) < 2 || handed == 0 {
				t.Fatalf("%s: %d executions, no step started by one and reported to the next", id, len(exs))
			}
			if d == 2 && k == 0 && os.Getenv("WMRL_RECORD_HISTORIES") == "1" {
				record(t, c, id, exs[0].runID, "testdata/pipe_carry_run_wmrl.json")
				record(t, c, id, exs[1].runID, "testdata/pipe_carry_run_wmrl_continued.json")
				record(t, c, StepWorkflowID(id, 1), "", "testdata/pipe_carry_step_wmrl.json")
			}
		}
		t.Logf("d = %d, continue-as-new every 2: checkpoint %s (both server runs and the test environment's)", d,
			short(want.Checkpoint.Hash))
	}
}

// TestRealPipelineCarrySignals: d = 1, 5 steps, continue-as-new every 2
// (runChained): the second execution starts carrying step 1, and pause,
// stop or set-anchor-fraction reach it as step 2 generates, with the
// carried step 1 and step 2 in flight. They keep their meaning: a pause
// rests at checkpoint 3 with nothing in flight and, resumed an hour later,
// the run ends at the unsignalled run's checkpoint; a stop ends the run
// after step 2 at the unsignalled run's checkpoint 3; a new anchor fraction
// applies from step 3, the first step not started, as the reply of
// set-anchor-fraction-from says.
func TestRealPipelineCarrySignals(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := pipelineConfig(t, 1)
	cfg.Steps, cfg.ContinueAsNewEvery = 5, 2
	newActs := func() *activities.Activities { return realActivities(t, st, &testenv.InProcess{}, t.TempDir()) }
	base, _ := runChained(t, newActs(), RunInput{RunID: "csig-base", Config: cfg}, nil)
	cps, err := st.Checkpoints(t.Context(), "csig-base")
	if err != nil {
		t.Fatal(err)
	}
	ck3 := activities.CheckpointRef{Version: cps[3].Version, Hash: cps[3].Hash}
	// signalled runs id, calling signal once as step 2's first Generate
	// starts.
	signalled := func(id string, signal func(env *testsuite.TestWorkflowEnvironment)) (RunResult, *chain) {
		var once sync.Once
		res, ch := runChained(t, newActs(), RunInput{RunID: id, Config: cfg}, func(env *testsuite.TestWorkflowEnvironment) {
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
				if info.ActivityType.Name != "Generate" {
					return
				}
				var req activities.GenerateRequest
				if err := args.Get(&req); err != nil || req.Step != 2 {
					return
				}
				once.Do(func() { signal(env) })
			})
		})
		if len(ch.executions) < 2 || len(ch.executions[1].State.InFlight) != 1 || ch.executions[1].State.InFlight[0].Step != 1 {
			t.Fatalf("%s: the second execution does not carry step 1", id)
		}
		return res, ch
	}
	status := func(env *testsuite.TestWorkflowEnvironment, id string) Status {
		v, err := env.QueryWorkflowByID(id, QueryStatus)
		if err != nil {
			t.Fatal(err)
		}
		var s Status
		if err := v.Get(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	var paused, during Status
	res, _ := signalled("csig-pause", func(env *testsuite.TestWorkflowEnvironment) {
		if err := env.SignalWorkflowByID("csig-pause", SignalPause, nil); err != nil {
			t.Error(err)
		}
		env.RegisterDelayedCallback(func() { during = status(env, "csig-pause") }, 0)
		env.RegisterDelayedCallback(func() { paused = status(env, "csig-pause") }, 30*time.Minute)
		env.RegisterDelayedCallback(func() {
			if err := env.SignalWorkflowByID("csig-pause", SignalResume, nil); err != nil {
				t.Error(err)
			}
		}, time.Hour)
	})
	t.Logf("pause as step 2 generates: in flight %v; paused %s at step %d (checkpoint %d), resumed run ends at %s",
		during.InFlight, paused.State, paused.Step, paused.Checkpoint.Version, short(res.Checkpoint.Hash))
	if paused.State != StatePaused || paused.Step != 3 || paused.Checkpoint != ck3 || len(paused.InFlight) != 0 {
		t.Errorf("while paused: %+v, want paused at step 3 with checkpoint %+v, nothing in flight", paused, ck3)
	}
	if res.Steps != cfg.Steps || res.Checkpoint != base.Checkpoint {
		t.Errorf("paused and resumed run %+v, want the unsignalled run's checkpoint %+v", res, base.Checkpoint)
	}

	res, _ = signalled("csig-stop", func(env *testsuite.TestWorkflowEnvironment) {
		if err := env.SignalWorkflowByID("csig-stop", SignalStop, nil); err != nil {
			t.Error(err)
		}
	})
	t.Logf("stopped: %d steps, checkpoint %d %s", res.Steps, res.Checkpoint.Version, short(res.Checkpoint.Hash))
	if !res.Stopped || res.Steps != 3 || res.Checkpoint != ck3 || res.HeldOut == nil || res.HeldOut.Version != 3 {
		t.Errorf("stopped run %+v, want 3 steps at checkpoint %+v, evaluated", res, ck3)
	}

	var change FractionChange
	var uerr error
	res, _ = signalled("csig-fraction", func(env *testsuite.TestWorkflowEnvironment) {
		err := env.UpdateWorkflowByID("csig-fraction", UpdateSetAnchorFractionFrom, "f1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { uerr = err },
			OnComplete: func(v any, err error) {
				if err != nil {
					uerr = err
					return
				}
				change, _ = v.(FractionChange)
			}}, 0.75)
		if err != nil {
			uerr = err
		}
	})
	t.Logf("set-anchor-fraction-from 0.75: %+v", change)
	if uerr != nil || change.Previous != cfg.Anchors.Fraction || change.FromStep != 3 || res.Steps != cfg.Steps {
		t.Fatalf("set-anchor-fraction-from: %+v, %v (want previous %v from step 3); result %+v", change, uerr,
			cfg.Anchors.Fraction, res)
	}
	for _, r := range stepMetrics(t, st, "csig-fraction", cfg.Steps) {
		want := cfg.Anchors.Fraction
		if r.Step >= 3 {
			want = 0.75
		}
		t.Logf("step %d: anchor fraction %v, %d anchor groups", r.Step, r.Metrics.AnchorFraction, r.Metrics.AnchorGroups)
		if r.Metrics.AnchorFraction != want {
			t.Errorf("step %d: anchor fraction %v, want %v", r.Step, r.Metrics.AnchorFraction, want)
		}
	}
}

// TestRealPipelineCarryFailure: d = 2, step 1's Update fails (a
// non-retryable error): the run fails, and step 2, in flight and waiting
// for step 1's outcome, started with the parent close policy abandon, is
// cancelled by the failing run instead of outliving it.
func TestRealPipelineCarryFailure(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := pipelineConfig(t, 2)
	cfg.Steps, cfg.ContinueAsNewEvery = 5, 10
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	env.SetTestTimeout(2 * time.Minute)
	activities.Register(env, a)
	env.RegisterActivityWithOptions(func(ctx context.Context, req activities.UpdateRequest) (activities.UpdateResponse, error) {
		if req.Step == 1 {
			return activities.UpdateResponse{}, temporal.NewNonRetryableApplicationError("injected", "injected", nil)
		}
		return a.Update(ctx, req)
	}, activity.RegisterOptions{Name: activities.NameUpdate})
	var mu sync.Mutex
	ended := map[int]error{}
	env.SetOnChildWorkflowCompletedListener(func(info *workflow.Info, _ converter.EncodedValue, err error) {
		var si int
		if _, serr := fmt.Sscanf(info.WorkflowExecution.ID, "carry-fail/step-%d", &si); serr != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ended[si] = err
	})
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "carry-fail", Config: cfg})
	err := env.GetWorkflowError()
	t.Logf("run: %v", err)
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("run error %v, want step 1's injected failure", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range 3 {
		t.Logf("step %d ended: %v", s, ended[s])
	}
	if _, ok := ended[2]; !ok || !temporal.IsCanceledError(ended[2]) {
		t.Errorf("step 2 ended with %v, want cancelled by the failing run", ended[2])
	}
	if e, ok := ended[0]; !ok || e != nil {
		t.Errorf("step 0 ended with %v (%v), want completed", e, ok)
	}
}
