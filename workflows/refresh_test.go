package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
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

func refreshActivities(t *testing.T, st *store.Store, base *worldmodel.Model) *activities.Activities {
	t.Helper()
	b := builtin.New(testenv.Suites{}, base, &testenv.InProcess{})
	return &activities.Activities{Store: st, Tasks: b.Tasks, Policy: b.Policy, WorldModel: b.WorldModel, Grader: b.Grader,
		DataDir: t.TempDir()}
}

func refreshConfig(t *testing.T) runconfig.Config {
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps = 6
	cfg.Debias.MinPairs = 4
	cfg.Eval.Tasks = 1
	cfg.WorldModel.Refresh = runconfig.Refresh{Every: 2, MinPairs: 4}
	return cfg
}

// runWith is runToEnd with RefreshWorldModel replaced by refresh (nil: the
// activity itself).
func runWith(t *testing.T, a *activities.Activities, in RunInput,
	refresh func(context.Context, activities.RefreshRequest) (activities.RefreshResponse, error)) RunResult {
	t.Helper()
	if in.Config.Pipeline.OffPolicy() > 0 {
		// Pipelined runs carry their steps in flight across
		// continue-as-new: one environment (runChained).
		res, _ := runChained(t, a, in, func(env *testsuite.TestWorkflowEnvironment) {
			if refresh != nil {
				env.RegisterActivityWithOptions(refresh, activity.RegisterOptions{Name: activities.NameRefreshWorldModel})
			}
		})
		return res
	}
	var s testsuite.WorkflowTestSuite
	for seg := 1; seg <= 20; seg++ {
		env := newEnv(t, &s)
		env.SetTestTimeout(3 * time.Minute)
		activities.Register(env, a)
		if refresh != nil {
			env.RegisterActivityWithOptions(refresh, activity.RegisterOptions{Name: activities.NameRefreshWorldModel})
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
		return res
	}
	t.Fatal("run did not end in 20 segments")
	return RunResult{}
}

// A wmrl run with world_model.refresh: the world model is refreshed after
// steps 1 and 3 (not after the last), the steps after a refresh are scored
// by that version and calibrated on the pairs it scored, and the same seed
// gives the same versions and the same final checkpoint, also when the
// refresh activity's worker is lost after recording its work.
func TestRealRunRefresh(t *testing.T) {
	base := testenv.SmallBase(t)
	cfg := refreshConfig(t)
	ctx := t.Context()

	st := testenv.FreshStore(t)
	a := refreshActivities(t, st, base)
	res := runWith(t, a, RunInput{RunID: "refresh", Config: cfg}, nil)
	if res.Steps != cfg.Steps {
		t.Fatalf("result %+v", res)
	}
	vs, err := st.WorldModelVersions(ctx, "refresh")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Step != 1 || vs[1].Step != 3 || vs[0].Hash == vs[1].Hash ||
		vs[0].Pairs != 2*cfg.Samples || vs[1].Pairs != 4*cfg.Samples {
		t.Fatalf("versions %+v, want after steps 1 (8 pairs) and 3 (16 pairs)", vs)
	}
	sealed, _ := base.Marshal()
	baseModel, _ := worldmodel.Load(sealed)
	suite, _ := testenv.SmallSuite()
	models := map[int]*worldmodel.Model{}
	for _, v := range vs {
		b, err := os.ReadFile(v.Location)
		if err != nil {
			t.Fatal(err)
		}
		m, err := worldmodel.Load(b)
		if err != nil || m.Fit.Base != baseModel.Checksum || m.Fit.RunExamples != v.Pairs || v.Base != baseModel.Checksum {
			t.Fatalf("version %+v: %v (fit %+v)", v, err, m.Fit)
		}
		models[v.Step] = m
	}
	// Which model scored each step: the frozen one before the first
	// refresh, then the latest version.
	scorer := []*worldmodel.Model{baseModel, baseModel, models[1], models[1], models[3], models[3]}
	for step, m := range scorer {
		ts, err := st.StepTrajectories(ctx, "refresh", step)
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
				t.Fatalf("step %d %s: r_wm %v, want %v from the model of that step (%v)", step, tr.Key, tr.WMScore, want, err)
			}
		}
		c, err := st.Calibration(ctx, "refresh", step)
		if err != nil {
			t.Fatal(err)
		}
		from := map[int]int{2: 2, 3: 2, 4: 4, 5: 4}[step]
		if want := (step - from + 1) * cfg.Samples; c.NPairs != want {
			t.Errorf("step %d calibrated on %d pairs, want %d (steps %d..%d)", step, c.NPairs, want, from, step)
		}
	}

	// The same seed on another database, the refresh's worker lost after
	// the activity recorded its work, the first time: same versions, same
	// final checkpoint.
	st2 := testenv.FreshStore(t)
	a2 := refreshActivities(t, st2, base)
	var lost atomic.Int32
	crash := func(ctx context.Context, req activities.RefreshRequest) (activities.RefreshResponse, error) {
		r, err := a2.RefreshWorldModel(ctx, req)
		if err == nil && r.Version != nil && lost.Add(1) == 1 {
			return activities.RefreshResponse{}, fmt.Errorf("worker lost after refreshing step %d", req.Step)
		}
		return r, err
	}
	res2 := runWith(t, a2, RunInput{RunID: "refresh", Config: cfg}, crash)
	if lost.Load() < 2 {
		t.Fatalf("the crash was not retried (%d calls with a version)", lost.Load())
	}
	vs2, err := st2.WorldModelVersions(ctx, "refresh")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs2) != len(vs) || vs2[0].Hash != vs[0].Hash || vs2[1].Hash != vs[1].Hash {
		t.Errorf("versions with a crash %+v, without %+v", vs2, vs)
	}
	if res2.Checkpoint != res.Checkpoint {
		t.Errorf("final checkpoint with a crash %+v, without %+v", res2.Checkpoint, res.Checkpoint)
	}

	// A run of the first 3 steps, continued to 6 by a resumed run (`wmrl
	// continue` after a failure): the resumed run makes the old run's
	// latest version again from the copied pairs, and ends where the
	// uninterrupted run did.
	st4 := testenv.FreshStore(t)
	a4 := refreshActivities(t, st4, base)
	short := cfg
	short.Steps = 3
	runWith(t, a4, RunInput{RunID: "first", Config: short}, nil)
	res4 := runWith(t, a4, RunInput{RunID: "continued", Config: cfg, ResumeFrom: "first"}, nil)
	vs4, err := st4.WorldModelVersions(ctx, "continued")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs4) != 2 || vs4[0].Hash != vs[0].Hash || vs4[1].Hash != vs[1].Hash || res4.Checkpoint != res.Checkpoint {
		t.Errorf("continued run: versions %+v, checkpoint %+v; want %+v, %+v", vs4, res4.Checkpoint, vs, res.Checkpoint)
	}

	// Without refresh the same seed gives another checkpoint (the world
	// model changed what the policy was trained on).
	plain := cfg
	plain.WorldModel.Refresh = runconfig.Refresh{}
	res3 := runWith(t, refreshActivities(t, testenv.FreshStore(t), base), RunInput{RunID: "plain", Config: plain}, nil)
	if res3.Checkpoint == res.Checkpoint {
		t.Errorf("the run without refresh ends on the same checkpoint %+v", res3.Checkpoint)
	}
}

// The plumbing of a refresh, with fake activities: RefreshWorldModel after
// every refresh.every-th step but the last, with the run's min_pairs; a
// version (none when the pairs are too few) carried across continue-as-new
// and named by the ScoreWorldModel requests of the following steps, whose
// calibration starts at the step after it; the status query reports it.
// Without the section, no refresh and requests without a version.
func TestRefreshPlumbing(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	cfg := tiny(t, mode.WMRL)
	cfg.Steps, cfg.ContinueAsNewEvery = 7, 3
	cfg.WorldModel.Refresh = runconfig.Refresh{Every: 2, MinPairs: 12}
	f := &fake{noVersionBefore: 2}
	in := RunInput{RunID: "r", Config: cfg}
	var status Status
	for seg := 1; ; seg++ {
		env := newEnv(t, &s)
		f.register(env, 0)
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
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Get(&status); err != nil {
			t.Fatal(err)
		}
		break
	}
	var steps []int
	for _, r := range f.refreshes {
		if r.RunID != "r" || r.MinPairs != 12 || r.SuiteSeed != cfg.SuiteSeed {
			t.Errorf("refresh request %+v", r)
		}
		steps = append(steps, r.Step)
	}
	if !slices.Equal(steps, []int{1, 3, 5}) {
		t.Fatalf("refreshed after steps %v, want 1, 3, 5 (not after the last, 6)", steps)
	}
	// Step 1's refresh made no version: steps 0-3 are scored by the frozen
	// model, 4-5 by the version of step 3, 6 by that of step 5.
	want := map[int]string{0: "", 1: "", 2: "", 3: "", 4: wmHashOf(3), 5: wmHashOf(3), 6: wmHashOf(5)}
	from := map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 4, 5: 4, 6: 6}
	if len(f.scores) != cfg.Steps*cfg.Groups {
		t.Fatalf("%d score requests", len(f.scores))
	}
	for _, r := range f.scores {
		if r.WorldModel != want[r.Step] {
			t.Errorf("step %d group %d scored by %q, want %q", r.Step, r.Group, r.WorldModel, want[r.Step])
		}
	}
	if len(f.calibrates) != cfg.Steps {
		t.Fatalf("%d calibrations", len(f.calibrates))
	}
	for _, c := range f.calibrates {
		if c.FromStep != from[c.Step] {
			t.Errorf("step %d calibrated from step %d, want %d", c.Step, c.FromStep, from[c.Step])
		}
	}
	if status.WorldModel == nil || *status.WorldModel != (activities.WorldModelRef{Step: 5, Hash: wmHashOf(5)}) {
		t.Errorf("status world model %+v", status.WorldModel)
	}

	// Without the section: no refresh, requests without a version, whose
	// JSON is the same as before refreshes existed.
	f2 := &fake{}
	env := newEnv(t, &s)
	f2.register(env, 0)
	plain := tiny(t, mode.WMRL)
	plain.ContinueAsNewEvery = 10
	env.ExecuteWorkflow(TrainingRun, RunInput{RunID: "p", Config: plain})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f2.n("RefreshWorldModel") != 0 {
		t.Errorf("%d refreshes without the section", f2.n("RefreshWorldModel"))
	}
	for _, r := range f2.scores {
		b, _ := json.Marshal(r)
		if r.WorldModel != "" || strings.Contains(string(b), "world_model") {
			t.Errorf("score request without refresh: %s", b)
		}
	}
	for _, c := range f2.calibrates {
		if b, _ := json.Marshal(c); strings.Contains(string(b), "from_step") {
			t.Errorf("calibrate request without refresh: %s", b)
		}
	}
}

// A multi-turn wmrl run with world_model.refresh: each version learns from
// the executed turns of steps 0..s that the world model graded (K per
// executed trajectory), the turns of the steps after it are answered by
// that version, and the same seed gives the same versions and final
// checkpoint; without refresh the checkpoint differs.
func TestRealRunRefreshTurns(t *testing.T) {
	const K = 3
	base := testenv.SmallBase(t)
	cfg := refreshConfig(t)
	cfg.Trajectory.Turns = K
	ctx := t.Context()
	run := func(c runconfig.Config) (*store.Store, RunResult) {
		st := testenv.FreshStore(t)
		return st, runWith(t, refreshActivities(t, st, base), RunInput{RunID: "refresh-turns", Config: c}, nil)
	}
	st, res := run(cfg)
	if res.Steps != cfg.Steps {
		t.Fatalf("result %+v", res)
	}
	vs, err := st.WorldModelVersions(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := st.TurnPairs(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	upTo := func(step int) int {
		n := 0
		for _, p := range pairs {
			if p.Step <= step {
				n++
			}
		}
		return n
	}
	if len(vs) != 2 || vs[0].Step != 1 || vs[1].Step != 3 || vs[0].Hash == vs[1].Hash ||
		vs[0].Pairs != upTo(1) || vs[1].Pairs != upTo(3) || vs[0].Pairs <= 2*cfg.Samples {
		t.Fatalf("versions %+v, want after steps 1 (%d turn pairs) and 3 (%d), more than the %d trajectories of steps 0-1",
			vs, upTo(1), upTo(3), 2*cfg.Samples)
	}
	// The turns of a world-model group of step 2 are answered by version 1.
	m1b, err := os.ReadFile(vs[0].Location)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := worldmodel.Load(m1b)
	if err != nil {
		t.Fatal(err)
	}
	sut, _ := testenv.SmallSuite()
	ts, err := st.StepTurns(ctx, res.RunID, 2)
	if err != nil {
		t.Fatal(err)
	}
	trs, err := st.StepTrajectories(ctx, res.RunID, 2)
	if err != nil {
		t.Fatal(err)
	}
	taskOf := map[[2]int]string{}
	for _, tr := range trs {
		taskOf[[2]int{tr.Group, tr.Sample}] = tr.TaskID
	}
	checked := 0
	for _, tu := range ts {
		if tu.Source != store.SourceWorldModel || tu.Answer == nil || tu.Answer.Reward == nil {
			continue
		}
		task, err := sut.Task(taskOf[[2]int{tu.Group, tu.Sample}])
		if err != nil {
			t.Fatal(err)
		}
		want, err := m1.PredictText(task.Card.Vector(), tu.Action)
		if err != nil || *tu.Answer.Reward != want {
			t.Fatalf("step 2 %s: reward %v, want %v from version 1 (%v)", tu.TurnKey, *tu.Answer.Reward, want, err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no world-model turn of step 2 checked")
	}
	_, again := run(cfg)
	if again.Checkpoint != res.Checkpoint {
		t.Errorf("same seed: checkpoint %+v, then %+v", res.Checkpoint, again.Checkpoint)
	}
	// Three steps, continued to six by a resumed run: the copied turns give
	// the resumed run's refresh the same pairs, and it ends where the
	// uninterrupted run did.
	st4 := testenv.FreshStore(t)
	a4 := refreshActivities(t, st4, base)
	short := cfg
	short.Steps = 3
	runWith(t, a4, RunInput{RunID: "first", Config: short}, nil)
	res4 := runWith(t, a4, RunInput{RunID: "continued", Config: cfg, ResumeFrom: "first"}, nil)
	vs4, err := st4.WorldModelVersions(ctx, "continued")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs4) != 2 || vs4[0].Hash != vs[0].Hash || vs4[1].Hash != vs[1].Hash || res4.Checkpoint != res.Checkpoint {
		t.Errorf("continued run: versions %+v, checkpoint %+v; want %+v, %+v", vs4, res4.Checkpoint, vs, res.Checkpoint)
	}
	plain := cfg
	plain.WorldModel.Refresh = runconfig.Refresh{}
	if _, p := run(plain); p.Checkpoint == res.Checkpoint {
		t.Errorf("the multi-turn run without refresh ends on the same checkpoint %+v", p.Checkpoint)
	}
}
