package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// pipelineConfig is the tiny preset with pipeline.max_off_policy d.
func pipelineConfig(t *testing.T, d int) runconfig.Config {
	t.Helper()
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Pipeline.MaxOffPolicy = d
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stepMetrics reads the run's recorded step metrics, by step.
func stepMetrics(t *testing.T, st *store.Store, run string, steps int) []store.Step {
	t.Helper()
	rows, err := st.Steps(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != steps {
		t.Fatalf("%s: %d step rows, want %d", run, len(rows), steps)
	}
	return rows
}

// TestRealRunPipeline runs the tiny preset with d = 1 through the test
// environment with the real activities: twice with continue-as-new every 2
// steps and once every 10 (so the steps in flight are carried across
// continue-as-new at different places, changePipelineCarry), each ending at the same checkpoint, which is not the sequential
// run's; every step after the first reports an importance ratio and
// step 0, sampled from its own checkpoint, none.
func TestRealRunPipeline(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := pipelineConfig(t, 1)
	cfg.Steps = 5
	run := func(id string, c runconfig.Config) RunResult {
		res, segs := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: id, Config: c})
		t.Logf("%s: %d steps, checkpoint %d %s, %d segments", id, res.Steps, res.Checkpoint.Version, short(res.Checkpoint.Hash), segs)
		if res.Steps != c.Steps || res.Checkpoint.Version != c.Steps {
			t.Fatalf("%s: result %+v", id, res)
		}
		return res
	}
	a := run("pipe-a", cfg)
	b := run("pipe-b", cfg)
	wide := cfg
	wide.ContinueAsNewEvery = 10
	c := run("pipe-wide", wide)
	if a.Checkpoint != b.Checkpoint || a.Checkpoint != c.Checkpoint {
		t.Fatalf("same config and seed, different checkpoints: %+v, %+v, %+v", a.Checkpoint, b.Checkpoint, c.Checkpoint)
	}
	if *a.HeldOut != *c.HeldOut {
		t.Fatalf("held-out scores differ: %+v and %+v", a.HeldOut, c.HeldOut)
	}
	seq := cfg
	seq.Pipeline = runconfig.Pipeline{}
	s := run("pipe-seq", seq)
	if s.Checkpoint == a.Checkpoint {
		t.Fatal("d = 1 ended at the sequential run's checkpoint: the pipeline changed nothing")
	}
	// In the wide run, some step started before the one before it was
	// done: two steps were in flight.
	overlap := 0
	rows := stepMetrics(t, st, "pipe-wide", cfg.Steps)
	for i := 1; i < len(rows); i++ {
		if f := rows[i-1].FinishedAt; f != nil && rows[i].StartedAt.Before(*f) {
			overlap++
		}
	}
	t.Logf("pipe-wide: %d of %d steps started before the step before them was done", overlap, len(rows)-1)
	if overlap == 0 {
		t.Error("no step started before the one before it was done: nothing ran in flight")
	}
	for _, id := range []string{"pipe-a", "pipe-wide"} {
		for _, r := range stepMetrics(t, st, id, cfg.Steps) {
			m := r.Metrics
			t.Logf("%s step %d: ratio mean %.4f max %.4f", id, r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
			if r.Step == 0 && m.ImportanceRatioMean != 0 {
				t.Errorf("%s step 0: ratio %v, want none (sampled from its own checkpoint)", id, m.ImportanceRatioMean)
			}
			if r.Step > 0 && (m.ImportanceRatioMean <= 0 || m.ImportanceRatioMax < m.ImportanceRatioMean) {
				t.Errorf("%s step %d: ratio mean %v max %v, want a ratio", id, r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
			}
		}
	}
}

// runSignalled runs in (one segment: ContinueAsNewEvery above Steps) and
// calls signal once, in the activity goroutine, when step at's first
// Generate starts: steps at−1 and at are then in flight (d = 1).
func runSignalled(t *testing.T, a *activities.Activities, in RunInput, at int,
	signal func(env *testsuite.TestWorkflowEnvironment)) (RunResult, *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := newEnv(t, &s)
	env.SetTestTimeout(2 * time.Minute)
	activities.Register(env, a)
	var once sync.Once
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != "Generate" {
			return
		}
		var req activities.GenerateRequest
		if err := args.Get(&req); err != nil || req.Step != at {
			return
		}
		once.Do(func() { signal(env) })
	})
	env.ExecuteWorkflow(TrainingRun, in)
	res := workflowResult[RunResult](t, env)
	return res, env
}

// TestRealPipelineSignals: with d = 1, pause (then resume an hour later),
// stop and set-anchor-fraction sent while steps 1 and 2 are in flight. A
// paused run drains (rests at checkpoint 3, nothing in flight) and, resumed,
// ends at the unsignalled run's checkpoint; a stopped run ends after its last
// started step, at the unsignalled run's checkpoint 3; a new anchor fraction
// applies from the first step not started (3).
func TestRealPipelineSignals(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := pipelineConfig(t, 1)
	cfg.Steps, cfg.ContinueAsNewEvery = 5, 10
	newActs := func() *activities.Activities { return realActivities(t, st, &testenv.InProcess{}, t.TempDir()) }
	base, _ := runToEnd(t, newActs(), RunInput{RunID: "sig-base", Config: cfg})
	cps, err := st.Checkpoints(t.Context(), "sig-base")
	if err != nil {
		t.Fatal(err)
	}
	ck3 := activities.CheckpointRef{Version: cps[3].Version, Hash: cps[3].Hash}

	var paused Status
	res, _ := runSignalled(t, newActs(), RunInput{RunID: "sig-pause", Config: cfg}, 2, func(env *testsuite.TestWorkflowEnvironment) {
		env.SignalWorkflow(SignalPause, nil)
		env.RegisterDelayedCallback(func() { paused = queryStatus(t, env) }, 30*time.Minute)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalResume, nil) }, time.Hour)
	})
	t.Logf("paused: state %s at step %d, checkpoint %d; resumed run ends at %s", paused.State, paused.Step,
		paused.Checkpoint.Version, short(res.Checkpoint.Hash))
	if paused.State != StatePaused || paused.Step != 3 || paused.Checkpoint != ck3 || len(paused.InFlight) != 0 {
		t.Errorf("while paused: %+v, want paused at step 3 with checkpoint %+v", paused, cps[3])
	}
	if res.Steps != cfg.Steps || res.Checkpoint != base.Checkpoint {
		t.Errorf("paused and resumed run %+v, want the unsignalled run's checkpoint %+v", res, base.Checkpoint)
	}

	var during Status
	res, _ = runSignalled(t, newActs(), RunInput{RunID: "sig-stop", Config: cfg}, 2, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { during = queryStatus(t, env) }, 0)
		env.SignalWorkflow(SignalStop, nil)
	})
	t.Logf("as step 2 generates: %d steps done, in flight %v", during.Step, during.InFlight)
	if n := len(during.InFlight); n == 0 || n > 2 || during.InFlight[n-1] != 2 {
		t.Errorf("in flight as step 2 generates: %v, want step 2 and at most one before it", during.InFlight)
	}
	t.Logf("stopped: %d steps, checkpoint %d %s", res.Steps, res.Checkpoint.Version, short(res.Checkpoint.Hash))
	if !res.Stopped || res.Steps != 3 || res.Checkpoint != ck3 || res.HeldOut == nil || res.HeldOut.Version != 3 {
		t.Errorf("stopped run %+v, want 3 steps at checkpoint %+v, evaluated", res, cps[3])
	}

	var prev float64
	var uerr error
	res, _ = runSignalled(t, newActs(), RunInput{RunID: "sig-fraction", Config: cfg}, 2, func(env *testsuite.TestWorkflowEnvironment) {
		env.UpdateWorkflow(UpdateSetAnchorFraction, "f1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { uerr = err },
			OnComplete: func(v any, err error) {
				if err != nil {
					uerr = err
					return
				}
				prev, _ = v.(float64)
			}}, 0.75)
	})
	if uerr != nil || prev != cfg.Anchors.Fraction || res.Steps != cfg.Steps {
		t.Fatalf("set-anchor-fraction: previous %v, %v; result %+v", prev, uerr, res)
	}
	for _, r := range stepMetrics(t, st, "sig-fraction", cfg.Steps) {
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

// TestIntegrationPipeline runs the tiny preset with d = 1 (5 steps,
// continue-as-new every 3) twice on the Temporal server with in-process
// workers: both end at the same checkpoint, the one the test environment's
// runs end at (TestRealRunPipeline). A third run is paused once step 1 is
// done, has its anchor fraction set while paused, is resumed and stopped.
// With WMRL_RECORD_HISTORIES=1 it writes testdata/pipe_*.json, which
// TestReplay replays: the first run's two segments, its step 1 (which
// waited for step 0 by signal) and the signalled run.
func TestIntegrationPipeline(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	cfg := pipelineConfig(t, 1)
	cfg.Steps, cfg.ContinueAsNewEvery = 5, 3
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var first []string
	var results []RunResult
	for i := range 2 {
		id := fmt.Sprintf("it-pipe-%d-%d", i, stamp)
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
		if res.Steps != cfg.Steps || res.Checkpoint.Version != cfg.Steps {
			t.Fatalf("%s: result %+v", id, res)
		}
		first = append(first, we.GetRunID())
		results = append(results, res)
	}
	if results[0].Checkpoint != results[1].Checkpoint {
		t.Fatalf("same config and seed, different checkpoints: %+v and %+v", results[0].Checkpoint, results[1].Checkpoint)
	}
	// The sequential run of the same config, for its wall time (logged only:
	// in-process activities leave little to overlap).
	seq := cfg
	seq.Pipeline = runconfig.Pipeline{}
	seqID := fmt.Sprintf("it-pipe-seq-%d", stamp)
	start := time.Now()
	seqRes := runAndWait(ctx, t, c, seqID, RunInput{RunID: seqID, Config: seq})
	t.Logf("%s (d = 0): checkpoint %d %s in %v", seqID, seqRes.Checkpoint.Version, short(seqRes.Checkpoint.Hash),
		time.Since(start).Round(time.Millisecond))

	sig := cfg
	sig.Steps, sig.ContinueAsNewEvery = 8, 10 // room for the steps in flight after the stop
	id := fmt.Sprintf("it-pipe-signals-%d", stamp)
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: id, Config: sig})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, func(s Status) bool { return s.Step >= 1 })
	if err := c.SignalWorkflow(ctx, id, "", SignalPause, nil); err != nil {
		t.Fatal(err)
	}
	// Steps 0..before.Step+d were planned, anchor fraction included, before
	// the update below: the run plans step t once t−d steps are complete.
	var before Status
	waitStatus(t, c, id, func(s Status) bool { before = s; return s.State == StatePaused })
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: UpdateSetAnchorFraction,
		Args: []any{0.5}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.SignalWorkflow(ctx, id, "", SignalResume, nil); err != nil {
		t.Fatal(err)
	}
	var paused Status
	waitStatus(t, c, id, func(s Status) bool { paused = s; return s.Step >= 1 && s.State == StateRunning })
	if err := c.SignalWorkflow(ctx, id, "", SignalStop, nil); err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := we.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("signalled run: stopped %v after %d steps at checkpoint %d", res.Stopped, res.Steps, res.Checkpoint.Version)
	if !res.Stopped || res.Steps >= sig.Steps || res.Steps < paused.Step {
		t.Fatalf("signalled run %+v (running again at step %d)", res, paused.Step)
	}
	cps, err := st.Checkpoints(ctx, results[0].RunID)
	if err != nil {
		t.Fatal(err)
	}
	// A step planned after the update samples with fraction 0.5, so only a
	// run stopped before any of those is the unsignalled run's.
	d := sig.Pipeline.OffPolicy()
	if res.Steps-1 > before.Step+d {
		t.Logf("stopped after step %d, planned after the update (the steps up to %d were planned before it)",
			res.Steps-1, before.Step+d)
	} else if res.Steps < len(cps) && cps[res.Steps].Hash != res.Checkpoint.Hash {
		t.Fatalf("stopped at %+v, the unsignalled run's checkpoint %d is %s", res.Checkpoint, res.Steps, cps[res.Steps].Hash)
	}

	if os.Getenv("WMRL_RECORD_HISTORIES") == "1" {
		id0 := results[0].RunID
		d, err := c.DescribeWorkflowExecution(ctx, id0, "")
		if err != nil {
			t.Fatal(err)
		}
		record(t, c, id0, first[0], "testdata/pipe_run_wmrl.json")
		record(t, c, id0, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "testdata/pipe_run_wmrl_continued.json")
		record(t, c, StepWorkflowID(id0, 1), "", "testdata/pipe_step_wmrl.json")
		record(t, c, id, we.GetRunID(), "testdata/pipe_run_signals.json")
	}
}

// TestRealRunPipelineRefreshAdaptive: d = 2 with world_model.refresh every
// 2 steps and the adaptive anchor fraction, 6 steps, continue-as-new every
// 2 and every 10: the same world-model versions, fractions and final
// checkpoint either way (each step's are those planned after step t−d−1,
// carried across the handovers), and step t is scored by the version of the
// latest refresh after a step ≤ t−3.
func TestRealRunPipelineRefreshAdaptive(t *testing.T) {
	base := testenv.SmallBase(t)
	st := testenv.FreshStore(t)
	cfg := refreshConfig(t)
	cfg.Pipeline.MaxOffPolicy = 2
	cfg.Anchors.Adaptive = runconfig.AdaptiveAnchors{TargetRho: 1.05, Floor: 0.25, Ceiling: 0.75, Gain: 0.25}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	wide := cfg
	wide.ContinueAsNewEvery = 10
	type stepOf struct {
		fraction float64
		anchors  int
	}
	var runs [][]stepOf
	var ends []RunResult
	for _, c := range []runconfig.Config{cfg, wide} {
		id := fmt.Sprintf("pipe-refresh-%d", c.ContinueAsNewEvery)
		res := runWith(t, refreshActivities(t, st, base), RunInput{RunID: id, Config: c}, nil)
		if res.Steps != c.Steps {
			t.Fatalf("%s: %+v", id, res)
		}
		var steps []stepOf
		for _, r := range stepMetrics(t, st, id, c.Steps) {
			steps = append(steps, stepOf{r.Metrics.AnchorFraction, r.Metrics.AnchorGroups})
		}
		t.Logf("%s: checkpoint %s, steps %v", id, short(res.Checkpoint.Hash), steps)
		runs, ends = append(runs, steps), append(ends, res)
	}
	if ends[0].Checkpoint != ends[1].Checkpoint || fmt.Sprint(runs[0]) != fmt.Sprint(runs[1]) {
		t.Fatalf("handovers changed the run: %v %v / %v %v", ends[0].Checkpoint, runs[0], ends[1].Checkpoint, runs[1])
	}
	// Refreshes after steps 1 and 3; with d = 2 the one after step 1 scores
	// steps 4 and 5, the one after step 3 none.
	ctx := t.Context()
	vs, err := st.WorldModelVersions(ctx, "pipe-refresh-10")
	if err != nil || len(vs) != 2 || vs[0].Step != 1 || vs[1].Step != 3 {
		t.Fatalf("versions %+v, %v; want after steps 1 and 3", vs, err)
	}
	sealed, _ := base.Marshal()
	frozen, _ := worldmodel.Load(sealed)
	b, err := os.ReadFile(vs[0].Location)
	if err != nil {
		t.Fatal(err)
	}
	first, err := worldmodel.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	suite, _ := testenv.SmallSuite()
	for step, m := range []*worldmodel.Model{frozen, frozen, frozen, frozen, first, first} {
		ts, err := st.StepTrajectories(ctx, "pipe-refresh-10", step)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ts {
			task, err := suite.Task(tr.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.PredictText(task.Card.Vector(), tr.Program)
			if err != nil || tr.WMScore == nil || *tr.WMScore != want {
				t.Fatalf("step %d %s: r_wm %v, want %v from the model planned for it (%v)", step, tr.Key, tr.WMScore, want, err)
			}
		}
	}
}

// TestRealRunPipelineTurns runs the tiny preset with trajectory.turns: 3 and
// d = 1 (4 steps) in the test environment with the real activities, with
// continue-as-new every 2 steps and every 10 (in which steps overlap):
// every turn of step t is
// generated from checkpoint max(0, t−1) (the Generate requests, recorded as
// they start); every trajectory has its 3 answered turns; both runs end at
// the same checkpoint, which is neither the sequential 3-turn run's nor
// the single-shot pipelined run's; step 0 reports no importance ratio and
// the later steps one (the built-in policy's clipped ratio over every
// turn's tokens).
func TestRealRunPipelineTurns(t *testing.T) {
	const K = 3
	st := testenv.FreshStore(t)
	cfg := pipelineConfig(t, 1)
	cfg.Trajectory.Turns = K
	cfg.Steps = 4
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	type genKey struct{ step, group, turn int }
	run := func(id string, c runconfig.Config) (RunResult, map[genKey]int) {
		var mu sync.Mutex
		gens := map[genKey]int{}
		res, segs := runToEndWith(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: id, Config: c},
			func(env *testsuite.TestWorkflowEnvironment) {
				env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
					if info.ActivityType.Name != "Generate" {
						return
					}
					var req activities.GenerateRequest
					if err := args.Get(&req); err != nil {
						t.Errorf("Generate request: %v", err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					gens[genKey{req.Step, req.Group, req.Turn}] = req.Checkpoint.Version
				})
			})
		t.Logf("%s: %d steps, checkpoint %d %s, %d segments", id, res.Steps, res.Checkpoint.Version, short(res.Checkpoint.Hash), segs)
		if res.Steps != c.Steps || res.Checkpoint.Version != c.Steps {
			t.Fatalf("%s: result %+v", id, res)
		}
		return res, gens
	}
	a, gens := run("pipe-turns-a", cfg)
	wide := cfg
	wide.ContinueAsNewEvery = 10
	b, _ := run("pipe-turns-wide", wide)
	if a.Checkpoint != b.Checkpoint {
		t.Fatalf("same config and seed, different checkpoints: %+v and %+v", a.Checkpoint, b.Checkpoint)
	}
	overlap := 0
	rows := stepMetrics(t, st, b.RunID, cfg.Steps)
	for i := 1; i < len(rows); i++ {
		if f := rows[i-1].FinishedAt; f != nil && rows[i].StartedAt.Before(*f) {
			overlap++
		}
	}
	t.Logf("%s: %d of %d steps started before the step before them was done", b.RunID, overlap, len(rows)-1)
	if overlap == 0 {
		t.Error("no step started before the one before it was done: nothing ran in flight")
	}
	if len(gens) != cfg.Steps*cfg.Groups*K {
		t.Errorf("%d Generate requests (step, group, turn), want %d", len(gens), cfg.Steps*cfg.Groups*K)
	}
	for k, v := range gens {
		if want := max(0, k.step-1); v != want || k.turn < 1 || k.turn > K {
			t.Errorf("step %d group %d turn %d generated from checkpoint %d, want turn 1..%d from %d", k.step, k.group, k.turn, v, K, want)
		}
	}
	ctx := t.Context()
	for s := range cfg.Steps {
		ts, err := st.StepTurns(ctx, a.RunID, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != K*cfg.Groups*cfg.Samples {
			t.Fatalf("step %d: %d turns, want %d", s, len(ts), K*cfg.Groups*cfg.Samples)
		}
		for _, tr := range ts {
			if tr.Answer == nil {
				t.Errorf("%s unanswered", tr.TurnKey)
			}
		}
	}
	for _, r := range stepMetrics(t, st, a.RunID, cfg.Steps) {
		m := r.Metrics
		t.Logf("step %d: ratio mean %.4f max %.4f", r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
		if r.Step == 0 && m.ImportanceRatioMean != 0 {
			t.Errorf("step 0: ratio %v, want none (sampled from its own checkpoint)", m.ImportanceRatioMean)
		}
		if r.Step > 0 && (m.ImportanceRatioMean <= 0 || m.ImportanceRatioMax < m.ImportanceRatioMean) {
			t.Errorf("step %d: ratio mean %v max %v, want a ratio", r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
		}
		if m.Stages.Turns.IsZero() {
			t.Errorf("step %d: no turn loop in the stages %+v", r.Step, m.Stages)
		}
	}
	seq := cfg
	seq.Pipeline = runconfig.Pipeline{}
	s, _ := run("pipe-turns-seq", seq)
	single := cfg
	single.Trajectory = runconfig.Trajectory{}
	o, _ := run("pipe-turns-single", single)
	if s.Checkpoint == a.Checkpoint || o.Checkpoint == a.Checkpoint {
		t.Fatalf("d = 1 with 3 turns ended at %s, the sequential 3-turn run at %s, the pipelined single-shot run at %s",
			short(a.Checkpoint.Hash), short(s.Checkpoint.Hash), short(o.Checkpoint.Hash))
	}
}

// TestIntegrationPipelineTurns runs the tiny preset with trajectory.turns:
// 3 and pipeline.max_off_policy 1 (3 steps, continue-as-new every 2) on the
// Temporal server with in-process workers, twice: both runs end at the same
// checkpoint, every step with its 3 answered turns per trajectory, and the
// test environment's run of the same config ends there too. With WMRL_RECORD_HISTORIES=1 it
// writes the first run's first segment and its step 1 (which waited for
// step 0 by signal) to testdata/pipe_turns_*.json for TestReplay.
func TestIntegrationPipelineTurns(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	cfg := pipelineConfig(t, 1)
	cfg.Trajectory.Turns = 3
	cfg.Steps, cfg.ContinueAsNewEvery = 3, 2
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := twiceOnServer(t, c, st, cfg, "turns", 1, func(id string, res RunResult) {
		if res.Checkpoint.Version != cfg.Steps {
			t.Fatalf("%s: result %+v", id, res)
		}
		for s := range cfg.Steps {
			ts, err := st.StepTurns(t.Context(), id, s)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != 3*cfg.Groups*cfg.Samples {
				t.Fatalf("step %d: %d turns, want %d", s, len(ts), 3*cfg.Groups*cfg.Samples)
			}
		}
	})
	t.Logf("d = 1, 3 turns: checkpoint %s (both runs and the test environment's)", h)
}

// twiceOnServer runs cfg on the Temporal server twice (run ids
// it-pipe-<name>-<k>-<stamp>) and in the test environment once, checks
// each server run with check and that all three end at the same
// checkpoint, and returns its hash. With WMRL_RECORD_HISTORIES=1 it writes
// the first run's first segment and its step recordStep to
// testdata/pipe_<name>_run_wmrl.json and pipe_<name>_step_wmrl.json.
func twiceOnServer(t *testing.T, c client.Client, st *store.Store, cfg runconfig.Config, name string, recordStep int,
	check func(id string, res RunResult)) string {
	t.Helper()
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var hashes []string
	for k := range 2 {
		id := fmt.Sprintf("it-pipe-%s-%d-%d", name, k, stamp)
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
		if res.Steps != cfg.Steps {
			t.Fatalf("%s: result %+v", id, res)
		}
		check(id, res)
		hashes = append(hashes, res.Checkpoint.Hash)
		if k == 0 && os.Getenv("WMRL_RECORD_HISTORIES") == "1" {
			record(t, c, id, we.GetRunID(), "testdata/pipe_"+name+"_run_wmrl.json")
			record(t, c, StepWorkflowID(id, recordStep), "", "testdata/pipe_"+name+"_step_wmrl.json")
		}
	}
	if hashes[0] != hashes[1] {
		t.Fatalf("the same pipelined run (%s) twice ended at %s and %s", name, hashes[0], hashes[1])
	}
	res, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()),
		RunInput{RunID: fmt.Sprintf("env-pipe-%s-%d", name, stamp), Config: cfg})
	if res.Checkpoint.Hash != hashes[0] {
		t.Fatalf("the server's runs ended at %s, the test environment's at %s", short(hashes[0]), short(res.Checkpoint.Hash))
	}
	return hashes[0]
}

// TestRealRunPipelineActiveAnchors runs the tiny preset (8 groups) in wmrl
// with anchors.active and d = 1, 5 steps, in the test environment with the
// real activities, with continue-as-new every 2 steps and every 10: every
// step's AnchorUncertainty has lag 1 and is computed from the anchor pairs
// of steps 0..s−2 (none at steps 0 and 1), the steps complete before step s
// starts; both runs choose the same anchor groups with the same weights
// and end at the same checkpoint, which is not the sequential active run's.
func TestRealRunPipelineActiveAnchors(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := pipelineConfig(t, 1)
	cfg.Groups, cfg.Steps = 8, 5
	cfg.Anchors.Active = runconfig.ActiveAnchors{Enabled: true, Mix: 0.5, Floor: 0.25}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	run := func(id string, c runconfig.Config) (RunResult, map[int]int) {
		var mu sync.Mutex
		read := map[int]int{} // step -> pairs its uncertainty read
		asked := 0
		res, segs := runToEndWith(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: id, Config: c},
			func(env *testsuite.TestWorkflowEnvironment) {
				// Local activities run as closures here (their type is not
				// their name): AnchorUncertainty is told by its request and
				// its response.
				env.SetOnLocalActivityStartedListener(func(_ *activity.Info, _ context.Context, args []any) {
					for _, a := range args {
						req, ok := a.(activities.AnchorUncertaintyRequest)
						if !ok {
							continue
						}
						mu.Lock()
						asked++
						mu.Unlock()
						if req.Lag != c.Pipeline.OffPolicy() {
							t.Errorf("step %d: uncertainty with lag %d, want %d", req.Step, req.Lag, c.Pipeline.OffPolicy())
						}
					}
				})
				env.SetOnLocalActivityCompletedListener(func(info *activity.Info, result converter.EncodedValue, err error) {
					var fields map[string]json.RawMessage
					if err != nil || result.Get(&fields) != nil || fields["uncertainty"] == nil {
						return
					}
					var s int
					if _, err := fmt.Sscanf(info.WorkflowExecution.ID, id+"/step-%d", &s); err != nil {
						t.Errorf("workflow %s: %v", info.WorkflowExecution.ID, err)
						return
					}
					var u activities.AnchorUncertaintyResponse
					if err := result.Get(&u); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					read[s] = u.Pairs
				})
			})
		t.Logf("%s: %d steps, checkpoint %d %s, %d segments", id, res.Steps, res.Checkpoint.Version, short(res.Checkpoint.Hash), segs)
		if res.Steps != c.Steps || asked != c.Steps {
			t.Fatalf("%s: result %+v, %d uncertainty requests", id, res, asked)
		}
		return res, read
	}
	a, read := run("pipe-active-a", cfg)
	wide := cfg
	wide.ContinueAsNewEvery = 10
	b, _ := run("pipe-active-wide", wide)
	if a.Checkpoint != b.Checkpoint {
		t.Fatalf("same config and seed, different checkpoints: %+v and %+v", a.Checkpoint, b.Checkpoint)
	}
	ctx := t.Context()
	pa, err := st.AnchorPairs(ctx, a.RunID, cfg.Steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := st.AnchorPairs(ctx, b.RunID, cfg.Steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pa) == 0 || len(pa) != len(pb) {
		t.Fatalf("%d and %d anchor pairs", len(pa), len(pb))
	}
	weighted := 0
	for i := range pa {
		if pa[i].Step != pb[i].Step || pa[i].Group != pb[i].Group || pa[i].Weight != pb[i].Weight {
			t.Fatalf("pair %d: %+v and %+v", i, pa[i], pb[i])
		}
		if pa[i].Weight != 1 {
			weighted++
		}
	}
	if weighted == 0 {
		t.Error("no anchor pair has a weight other than 1: active selection chose uniformly")
	}
	if len(read) != cfg.Steps {
		t.Fatalf("uncertainty of %d steps recorded, want %d", len(read), cfg.Steps)
	}
	for s := range cfg.Steps {
		want := 0
		for _, p := range pa {
			if p.Step <= s-2 {
				want++
			}
		}
		t.Logf("step %d: uncertainty from %d pairs", s, read[s])
		if read[s] != want {
			t.Errorf("step %d: uncertainty from %d pairs, want the %d of steps 0..%d", s, read[s], want, s-2)
		}
	}
	seq := cfg
	seq.Pipeline = runconfig.Pipeline{}
	s, _ := run("pipe-active-seq", seq)
	if s.Checkpoint == a.Checkpoint {
		t.Fatal("d = 1 ended at the sequential run's checkpoint")
	}
}

// TestIntegrationPipelineActiveAnchors runs the tiny preset (8 groups) in
// wmrl with anchors.active and d = 1, 4 steps, continue-as-new every 2, on
// the Temporal server with in-process workers, twice: both runs end at the
// same checkpoint, the test environment's run too. With
// WMRL_RECORD_HISTORIES=1 it writes the first run's first segment and its
// step 2 (whose uncertainty reads step 0 only, change
// pipeline-active-anchors) to testdata/pipe_active_*.json for TestReplay.
func TestIntegrationPipelineActiveAnchors(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	cfg := pipelineConfig(t, 1)
	cfg.Groups, cfg.Steps, cfg.ContinueAsNewEvery = 8, 4, 2
	cfg.Anchors.Active = runconfig.ActiveAnchors{Enabled: true, Mix: 0.5, Floor: 0.25}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := twiceOnServer(t, c, st, cfg, "active", 2, func(string, RunResult) {})
	t.Logf("d = 1, active anchors: checkpoint %s (both runs and the test environment's)", h)
}

// TestRealResumePipeline: a pipelined run (d = 2, world_model.refresh every
// 2 steps, the adaptive anchor fraction; 6 steps) continued after 3 of its
// steps (ResumeFrom) ends at the uninterrupted run's checkpoint, with the
// same anchor fraction and anchor groups at every step and the same r_wm
// on every trajectory (steps 3..5 sample from checkpoints 1..3, copied,
// and are scored by the world models planned after steps 0..2: the frozen
// one, then the refresh after step 1, made again); continuing it with
// another max_off_policy is refused, naming the field.
func TestRealResumePipeline(t *testing.T) {
	base := testenv.SmallBase(t)
	st := testenv.FreshStore(t)
	cfg := refreshConfig(t)
	cfg.Pipeline.MaxOffPolicy = 2
	cfg.ContinueAsNewEvery = 10
	cfg.Anchors.Adaptive = runconfig.AdaptiveAnchors{TargetRho: 1.05, Floor: 0.25, Ceiling: 0.75, Gain: 0.25}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := refreshActivities(t, st, base)
	full := runWith(t, a, RunInput{RunID: "pres-full", Config: cfg}, nil)
	short := cfg
	short.Steps = 3
	runWith(t, a, RunInput{RunID: "pres-short", Config: short}, nil)
	res := runWith(t, a, RunInput{RunID: "pres-resumed", Config: cfg, ResumeFrom: "pres-short"}, nil)
	t.Logf("uninterrupted %s, resumed after step 2 %s", short12(full.Checkpoint.Hash), short12(res.Checkpoint.Hash))
	if res.Steps != cfg.Steps || res.Checkpoint != full.Checkpoint {
		t.Fatalf("resumed run %+v, uninterrupted %+v", res, full)
	}
	ctx := t.Context()
	sf, sr := stepMetrics(t, st, "pres-full", cfg.Steps), stepMetrics(t, st, "pres-resumed", cfg.Steps)
	var fractions []float64
	for i := range sf {
		mf, mr := sf[i].Metrics, sr[i].Metrics
		fractions = append(fractions, mf.AnchorFraction)
		if mf.AnchorFraction != mr.AnchorFraction || mf.AnchorGroups != mr.AnchorGroups {
			t.Errorf("step %d: fraction %v, %d anchor groups uninterrupted; %v, %d resumed", i, mf.AnchorFraction,
				mf.AnchorGroups, mr.AnchorFraction, mr.AnchorGroups)
		}
		tf, err := st.StepTrajectories(ctx, "pres-full", i)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := st.StepTrajectories(ctx, "pres-resumed", i)
		if err != nil {
			t.Fatal(err)
		}
		for j := range tf {
			wf, wr := tf[j].WMScore, tr[j].WMScore
			if tf[j].Program != tr[j].Program || (wf == nil) != (wr == nil) || (wf != nil && *wf != *wr) {
				t.Fatalf("step %d %s: program or r_wm differ after the resume", i, tf[j].Key)
			}
		}
	}
	t.Logf("fractions %v", fractions)
	if fractions[cfg.Steps-1] == fractions[0] {
		t.Error("the controller never moved the fraction: the test does not exercise the resumed fractions")
	}
	vs, err := st.WorldModelVersions(ctx, "pres-resumed")
	if err != nil || len(vs) != 2 || vs[0].Step != 1 || vs[1].Step != 3 {
		t.Fatalf("resumed run's versions %+v, %v; want after steps 1 (made again) and 3", vs, err)
	}
	other := cfg
	other.Pipeline.MaxOffPolicy = 1
	_, err = a.ResumeRun(ctx, activities.ResumeRunRequest{RunID: "pres-other", From: "pres-short", Config: other})
	if err == nil || !strings.Contains(err.Error(), "pipeline.max_off_policy: 1, run pres-short was run with 2") {
		t.Errorf("continue with d = 1 of a run with d = 2: %v, want refused", err)
	}
}

func short12(h string) string { return h[:min(12, len(h))] }

// TestIntegrationPipelineResume: on the Temporal server with in-process
// workers, a pipelined run (d = 1, the adaptive anchor fraction, 5 steps)
// and the same run stopped after 3 steps and continued (ResumeFrom) end at
// the same checkpoint. With WMRL_RECORD_HISTORIES=1 it writes the continued
// run's history (change pipeline-resume) to testdata/pipe_resumed_run.json
// for TestReplay.
func TestIntegrationPipelineResume(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	cfg := pipelineConfig(t, 1)
	cfg.Steps, cfg.ContinueAsNewEvery = 5, 10
	cfg.Anchors.Adaptive = runconfig.AdaptiveAnchors{TargetRho: 1.05, Floor: 0.25, Ceiling: 0.75, Gain: 0.25}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	fullID, shortID, resID := fmt.Sprintf("it-pres-full-%d", stamp), fmt.Sprintf("it-pres-short-%d", stamp), fmt.Sprintf("it-pres-resumed-%d", stamp)
	full := runAndWait(ctx, t, c, fullID, RunInput{RunID: fullID, Config: cfg})
	short := cfg
	short.Steps = 3
	runAndWait(ctx, t, c, shortID, RunInput{RunID: shortID, Config: short})
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: resID, TaskQueue: QueueControl}, TrainingRun,
		RunInput{RunID: resID, Config: cfg, ResumeFrom: shortID})
	if err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := we.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("uninterrupted %s, continued after step 2 %s", short12(full.Checkpoint.Hash), short12(res.Checkpoint.Hash))
	if res.Steps != cfg.Steps || res.Checkpoint != full.Checkpoint {
		t.Fatalf("continued run %+v, uninterrupted %+v", res, full)
	}
	if os.Getenv("WMRL_RECORD_HISTORIES") == "1" {
		record(t, c, resID, we.GetRunID(), "testdata/pipe_resumed_run.json")
	}
}
