package workflows

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
)

func tiny(t *testing.T, m mode.Mode) runconfig.Config {
	t.Helper()
	c, err := runconfig.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Mode = m
	return c
}

func TestStepModes(t *testing.T) {
	// What each mode runs besides Generate, spelled out rather than derived
	// from its pieces: world-model scores, executions (all groups, the
	// anchor groups or none), a calibration map.
	type calls struct {
		wm        bool
		exec      string // "all", "anchors", ""
		calibrate bool
	}
	explicit := map[mode.Mode]calls{
		mode.GRPO:    {exec: "all"},
		mode.WM:      {wm: true},
		mode.WMRL:    {wm: true, exec: "anchors", calibrate: true},
		mode.Mix:     {wm: true, exec: "anchors"},
		mode.Debias:  {wm: true, exec: "anchors", calibrate: true},
		mode.Denoise: {wm: true, exec: "anchors"},
		// The control: wmrl's anchor groups executed, nothing scored by the
		// world model.
		mode.Anchor: {exec: "anchors"},
	}
	if len(explicit) != len(mode.All()) {
		t.Fatalf("the table covers %d modes, mode.All has %d", len(explicit), len(mode.All()))
	}
	var s testsuite.WorkflowTestSuite
	for _, m := range mode.All() {
		t.Run(string(m), func(t *testing.T) {
			cfg := tiny(t, m)
			env := newEnv(t, &s)
			f := &fake{}
			f.register(env, 0)
			in := StepInput{RunID: "r", Step: 3, Config: cfg, AnchorFraction: cfg.Anchors.Fraction,
				Checkpoint: activities.CheckpointRef{Version: 3, Hash: hashOf(3)}}
			env.ExecuteWorkflow(TrainingStep, in)
			res := workflowResult[StepResult](t, env)
			G, n := cfg.Groups, cfg.Samples
			pc := m.Pieces()
			want, err := anchors.Select(cfg.Seed, 3, G, cfg.Anchors.Fraction, cfg.Anchors.Min, -1)
			if err != nil {
				t.Fatal(err)
			}
			var wantExec []int
			switch {
			case pc.ExecuteAll:
				wantExec = []int{0, 1, 2, 3}
				want = []int{}
			case pc.Anchors:
				wantExec = want
			default:
				want = []int{}
			}
			if !slices.Equal(res.Anchors, want) {
				t.Errorf("anchors = %v, want %v", res.Anchors, want)
			}
			if got := f.executedGroups(3); !slices.Equal(got, wantExec) {
				t.Errorf("executed groups %v, want %v", got, wantExec)
			}
			b2i := func(b bool) int {
				if b {
					return 1
				}
				return 0
			}
			counts := []struct {
				name string
				want int
			}{
				{"StartStep", 1}, {"Generate", G}, {"ScoreWorldModel", b2i(pc.WorldModel) * G},
				{"Execute", len(wantExec) * n}, {"RecordAnchors", b2i(pc.Anchors)}, {"Calibrate", b2i(pc.Debias)},
				{"Fuse", 1}, {"Update", 1}, {"FinishStep", 1}, {"CreateRun", 0},
			}
			for _, c := range counts {
				if got := f.n(c.name); got != c.want {
					t.Errorf("%s called %d times, want %d", c.name, got, c.want)
				}
			}
			if res.Checkpoint.Version != 4 || res.Checkpoint.Hash != hashOf(4) {
				t.Errorf("checkpoint %+v, want version 4", res.Checkpoint)
			}
			if res.Metrics.Executed != len(wantExec)*n || res.Metrics.Ungraded != 0 {
				t.Errorf("metrics executed %d ungraded %d", res.Metrics.Executed, res.Metrics.Ungraded)
			}
			if (res.Calibration != nil) != pc.Debias {
				t.Errorf("calibration %+v with debias %v", res.Calibration, pc.Debias)
			}
			if len(f.fuses) != 1 || f.fuses[0].Mode != m || !slices.Equal(f.fuses[0].Anchors, res.Anchors) {
				t.Errorf("fuse requests %+v", f.fuses)
			}
			e := explicit[m]
			wantExecKind := map[string][]int{"all": {0, 1, 2, 3}, "anchors": want, "": nil}[e.exec]
			if (f.n("ScoreWorldModel") > 0) != e.wm || (f.n("Calibrate") > 0) != e.calibrate ||
				!slices.Equal(f.executedGroups(3), wantExecKind) {
				t.Errorf("world model %d calls, calibrate %d, executed groups %v; want %+v (anchors %v)",
					f.n("ScoreWorldModel"), f.n("Calibrate"), f.executedGroups(3), e, want)
			}
		})
	}
}

// stepInput0 is step 0 of a run with config cfg.
func stepInput0(cfg runconfig.Config) StepInput {
	return StepInput{RunID: "r", Step: 0, Config: cfg, AnchorFraction: cfg.Anchors.Fraction,
		Checkpoint: activities.CheckpointRef{Version: 0, Hash: hashOf(0)}}
}

// TestStepWaitsOutOutage: a sandbox that fails for a while (an outage of
// the engine or the database) delays the step; once it answers, every
// trajectory has its verdict and none is ungraded.
func TestStepWaitsOutOutage(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.GRPO)
	env := newEnv(t, &s)
	n := cfg.Samples
	f := &fake{failExec: map[int]bool{2: true}, recoverAfter: 3 * n}
	f.register(env, 0)
	env.ExecuteWorkflow(TrainingStep, stepInput0(cfg))
	res := workflowResult[StepResult](t, env)
	if res.Metrics.Ungraded != 0 || res.Metrics.Executed != cfg.Groups*n {
		t.Errorf("ungraded %d executed %d, want 0 and %d", res.Metrics.Ungraded, res.Metrics.Executed, cfg.Groups*n)
	}
	if got, want := f.n("Execute"), cfg.Groups*n+3*n; got != want {
		t.Errorf("Execute called %d times, want %d", got, want)
	}
	if f.n("Update") != 1 {
		t.Errorf("step did not reach Update")
	}
}

// TestStepFailsWhenOutageOutlastsBudget: an outage longer than
// sandbox.retry_hours fails the step with the reason; it never trains on
// fewer executions.
func TestStepFailsWhenOutageOutlastsBudget(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.WMRL)
	cfg.Sandbox.RetryHours = 0.05
	env := newEnv(t, &s)
	f := &fake{failExec: map[int]bool{0: true, 1: true, 2: true, 3: true}}
	f.register(env, 0)
	env.ExecuteWorkflow(TrainingStep, stepInput0(cfg))
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "no verdict within sandbox.retry_hours") {
		t.Fatalf("step error %v, want no verdict within sandbox.retry_hours", err)
	}
	if f.n("Update") != 0 || f.n("Fuse") != 0 {
		t.Errorf("step went on after the outage: %d fuse, %d update", f.n("Fuse"), f.n("Update"))
	}
	if f.n("Execute") < 2*cfg.Samples {
		t.Errorf("Execute called %d times: not retried", f.n("Execute"))
	}
}

// TestStepUngradedCeiling: trajectories the grader leaves without a verdict
// are counted; above max_ungraded the step fails with the reason.
func TestStepUngradedCeiling(t *testing.T) {
	tests := []struct {
		give    int // ungraded of the 4 executed (one anchor group of 4)
		wantErr bool
	}{{give: 0}, {give: 1}, {give: 2, wantErr: true}}
	for _, tt := range tests {
		var s testsuite.WorkflowTestSuite
		cfg := tiny(t, mode.WMRL)
		env := newEnv(t, &s)
		f := &fake{ungraded: tt.give}
		f.register(env, 0)
		env.ExecuteWorkflow(TrainingStep, stepInput0(cfg))
		err := env.GetWorkflowError()
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), "more than max_ungraded 25%") {
				t.Errorf("ungraded %d: error %v, want max_ungraded", tt.give, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ungraded %d: %v", tt.give, err)
		}
		var res StepResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.Metrics.Ungraded != tt.give || res.Metrics.Executed != cfg.Samples {
			t.Errorf("ungraded %d executed %d, want %d of %d", res.Metrics.Ungraded, res.Metrics.Executed, tt.give, cfg.Samples)
		}
	}
}

func decodeContinueAsNew(t *testing.T, err error) RunInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow error %v, want continue-as-new", err)
	}
	var next RunInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	return next
}

func TestRunContinueAsNewCarriesState(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.WMRL) // 3 steps, continue-as-new every 2
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, 0)
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "r", Config: cfg})
	next := decodeContinueAsNew(t, env.GetWorkflowError())
	st := next.State
	if st == nil || st.Step != 2 || st.Checkpoint != (activities.CheckpointRef{Version: 2, Hash: hashOf(2)}) {
		t.Fatalf("carried state %+v, want step 2 at checkpoint 2", st)
	}
	if st.Denoise.Groups != 2 || st.Tracker != (anchors.Tracker{Groups: 8, Anchors: 2}) || st.Last == nil || st.Last.Step != 1 {
		t.Fatalf("carried state %+v", st)
	}
	if st.Calibration == nil || st.Calibration.Step != 1 || st.AnchorFraction != cfg.Anchors.Fraction {
		t.Fatalf("carried calibration %+v fraction %v", st.Calibration, st.AnchorFraction)
	}
	if f.n("CreateRun") != 1 || f.n("Update") != 2 || f.n("Evaluate") != 0 {
		t.Fatalf("calls %v", f.calls)
	}

	// The continued run does the last step, evaluates and completes.
	env2 := newEnv(t, &s)
	f2 := &fake{}
	f2.register(env2, 0)
	env2.ExecuteWorkflow(TrainingRun, next)
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := env2.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Steps != 3 || res.Stopped || res.Checkpoint.Version != 3 || res.HeldOut == nil || res.HeldOut.Version != 3 {
		t.Fatalf("result %+v", res)
	}
	if f2.n("CreateRun") != 0 || f2.n("Update") != 1 || f2.n("Evaluate") != 2 || f2.n("SetRunState:completed") != 1 {
		t.Fatalf("calls %v", f2.calls)
	}
	if f2.fuses[0].Denoise.Groups != 2 {
		t.Fatalf("step 2 got denoiser state %+v, want the carried one", f2.fuses[0].Denoise)
	}
	var status Status
	v, err := env2.QueryWorkflow(QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&status); err != nil {
		t.Fatal(err)
	}
	if status.State != StateCompleted || status.Step != 3 || status.Steps != 3 || status.Mode != mode.WMRL ||
		status.Last == nil || status.HeldOut == nil {
		t.Fatalf("status %+v", status)
	}
}

func TestRunEvaluatesEveryE(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.Mix)
	cfg.Steps, cfg.Eval.Every, cfg.ContinueAsNewEvery = 4, 2, 10
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, 0)
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "r", Config: cfg})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// After step 2 and at the end (4): two evaluations of two tasks.
	if f.n("HeldOutScore") != 2 || f.n("Evaluate") != 4 {
		t.Fatalf("calls %v", f.calls)
	}
	// From changeShortHeartbeats on, the control, rollout and world-model
	// activities are scheduled with a heartbeat timeout (their workers
	// heartbeat while they run), so a killed worker's attempt is retried
	// after it rather than after the 2-minute start-to-close. Here the
	// run's HeldOutTasks (control); the step's Generate and ScoreWorldModel
	// are checked in a history the server recorded
	// (TestShortHeartbeatsRecorded: the SDK's test environment caps a child
	// workflow's activity heartbeat timeout at its schedule-to-close, 0
	// here, where the server caps it at the start-to-close).
	if f.heldOutHeartbeat != 30*time.Second {
		t.Errorf("HeldOutTasks: heartbeat timeout %v, want 30s", f.heldOutHeartbeat)
	}
}

func TestRunStopAfterCurrentStep(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.WMRL)
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalStop, nil) }, 30*time.Minute)
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "r", Config: cfg})
	res := workflowResult[RunResult](t, env)
	if res.Steps != 1 || !res.Stopped || res.Checkpoint.Version != 1 {
		t.Fatalf("result %+v, want a run stopped after step 0", res)
	}
	if f.n("Update") != 1 || f.n("SetRunState:completed") != 1 || f.n("Evaluate") != 2 {
		t.Fatalf("calls %v", f.calls)
	}
}

// workflowResult is the result of the workflow env ran; the test fails if
// the workflow failed or its result does not decode as T.
func workflowResult[T any](t *testing.T, env *testsuite.TestWorkflowEnvironment) T {
	t.Helper()
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res T
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) Status {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRunPauseResume(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.Debias)
	cfg.ContinueAsNewEvery = 10
	env := newEnv(t, &s)
	f := &fake{}
	f.register(env, time.Hour)
	var during, paused Status
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPause, nil)
	}, 30*time.Minute)
	env.RegisterDelayedCallback(func() { during = queryStatus(t, env) }, 45*time.Minute)
	env.RegisterDelayedCallback(func() {
		paused = queryStatus(t, env)
		env.SignalWorkflow(SignalResume, nil)
	}, 5*time.Hour)
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "r", Config: cfg})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if during.State != StatePaused || during.Step != 0 {
		t.Errorf("status right after pause %+v, want paused at step 0 (the step still runs)", during)
	}
	if paused.State != StatePaused || paused.Step != 1 || f.n("SetRunState:paused") != 1 {
		t.Errorf("status while paused %+v, calls %v", paused, f.calls)
	}
	var res RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Steps != cfg.Steps || res.Stopped {
		t.Fatalf("result %+v", res)
	}
	if f.n("SetRunState:running") != 1 {
		t.Errorf("resume not recorded: %v", f.calls)
	}
}

func TestSetAnchorFraction(t *testing.T) {
	tests := []struct {
		mode       mode.Mode
		give       float64
		wantReject bool
	}{
		{mode.WMRL, 1.5, true},
		{mode.WMRL, -0.1, true},
		{mode.GRPO, 0.5, true},
		{mode.WM, 0.5, true},
		{mode.WMRL, 0.5, false},
		{mode.Mix, 1, false},
	}
	var s testsuite.WorkflowTestSuite
	for _, tt := range tests {
		cfg := tiny(t, tt.mode)
		cfg.ContinueAsNewEvery = 10
		env := newEnv(t, &s)
		f := &fake{}
		f.register(env, time.Hour)
		var rejected error
		var prev float64
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(UpdateSetAnchorFraction, "u1", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { rejected = err },
				OnAccept: func() {},
				OnComplete: func(v any, err error) {
					if err == nil {
						prev = v.(float64)
					}
				},
			}, tt.give)
		}, 30*time.Minute)
		env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "r", Config: cfg})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if (rejected != nil) != tt.wantReject {
			t.Errorf("%s fraction %v: rejected = %v, want rejection %v", tt.mode, tt.give, rejected, tt.wantReject)
			continue
		}
		st := queryStatus(t, env)
		if tt.wantReject {
			if st.AnchorFraction != cfg.Anchors.Fraction {
				t.Errorf("rejected update changed the fraction to %v", st.AnchorFraction)
			}
			continue
		}
		if prev != cfg.Anchors.Fraction || st.AnchorFraction != tt.give {
			t.Errorf("update returned %v, fraction now %v", prev, st.AnchorFraction)
		}
		// Step 0 used the old fraction, the next steps the new one.
		wantK := int(tt.give*float64(cfg.Groups) + 0.5)
		if got := len(f.fuses[0].Anchors); got != 1 {
			t.Errorf("step 0 had %d anchor groups, want 1", got)
		}
		if got := len(f.fuses[1].Anchors); got != wantK {
			t.Errorf("step 1 had %d anchor groups, want %d", got, wantK)
		}
	}
}

// TestRunEvaluationFaults: an evaluation that evaluated nothing, or whose
// sandbox gives no verdict within sandbox.retry_hours, fails the run; it is
// never reported as a score.
func TestRunEvaluationFaults(t *testing.T) {
	tests := []struct {
		name string
		give *fake
		want string
	}{
		{"empty", &fake{emptyEval: true}, "evaluated no program"},
		{"outage", &fake{failEval: true}, "no verdict within sandbox.retry_hours"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			cfg := tiny(t, mode.WMRL)
			cfg.Steps, cfg.Sandbox.RetryHours = 1, 0.05
			env := newEnv(t, &s)
			tt.give.register(env, 0)
			env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "r", Config: cfg})
			err := env.GetWorkflowError()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run error %v, want %q", err, tt.want)
			}
		})
	}
}
