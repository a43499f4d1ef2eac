package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

// TestRealRunTurns runs the tiny preset with trajectory.turns: 3 in the test
// environment with the real activities, in every kind of mode: every group
// with an environment has K turns per trajectory, each answered once, by
// its one source; the sandbox runs K times per executed trajectory; every
// executed trajectory has an r_env and, in modes with a world model, an
// r_wm reduced from its turns; the run ends at a checkpoint other than the
// single-shot run's.
func TestRealRunTurns(t *testing.T) {
	const K = 3
	for _, m := range []mode.Mode{mode.GRPO, mode.WMRL, mode.WM, mode.Anchor} {
		t.Run(string(m), func(t *testing.T) {
			st := testenv.FreshStore(t)
			sb := &testenv.InProcess{}
			cfg := tiny(t, m)
			cfg.SuiteSeed = testenv.SuiteSeed
			cfg.Trajectory.Turns = K
			res, _ := runToEnd(t, realActivities(t, st, sb, t.TempDir()), RunInput{RunID: "turns-" + string(m), Config: cfg})
			if res.Steps != cfg.Steps {
				t.Fatalf("result %+v", res)
			}
			ctx := t.Context()
			G, n := cfg.Groups, cfg.Samples
			real := map[mode.Mode]int{mode.GRPO: G, mode.WMRL: 1, mode.WM: 0, mode.Anchor: 1}[m]
			withEnv := map[mode.Mode]int{mode.GRPO: G, mode.WMRL: G, mode.WM: G, mode.Anchor: 1}[m]
			c, err := st.Count(ctx, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if c.Trajectories != cfg.Steps*G*n || c.Executed != cfg.Steps*real*n {
				t.Fatalf("counts %+v: want %d trajectories, %d executed", c, cfg.Steps*G*n, cfg.Steps*real*n)
			}
			if want := K*cfg.Steps*real*n + K*cfg.Eval.Tasks*cfg.Eval.Samples; sb.Runs() != want {
				t.Errorf("sandbox ran %d times, want %d (K per executed trajectory, plus K per held-out sample)", sb.Runs(), want)
			}
			evs, err := st.Evaluations(ctx, res.RunID, res.Checkpoint.Version)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != cfg.Eval.Tasks*cfg.Eval.Samples {
				t.Errorf("%d held-out rows, want %d", len(evs), cfg.Eval.Tasks*cfg.Eval.Samples)
			}
			for _, e := range evs {
				if e.Executions != K || !strings.HasPrefix(e.Result.Detail, "max over 3 turns: turn ") {
					t.Errorf("held-out %s/%d: %d executions, detail %q; want %d turns, max", e.TaskID, e.Sample, e.Executions,
						e.Result.Detail, K)
				}
			}
			rows, err := st.Steps(ctx, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				// The turn loop is one stage (changeStageTimes).
				if sg := r.Metrics.Stages; sg.Turns.IsZero() || !sg.Generate.IsZero() || sg.Update.IsZero() {
					t.Errorf("step %d: stages %+v, want the turn loop and the update, no single-shot generate", r.Step, sg)
				}
			}
			for step := range cfg.Steps {
				ts, err := st.StepTurns(ctx, res.RunID, step)
				if err != nil {
					t.Fatal(err)
				}
				if len(ts) != K*withEnv*n {
					t.Fatalf("step %d: %d turns, want %d", step, len(ts), K*withEnv*n)
				}
				src := map[int]store.Source{}
				for _, tr := range ts {
					if tr.Answer == nil || tr.Answer.Status == "" {
						t.Errorf("%s unanswered", tr.TurnKey)
					}
					if s, ok := src[tr.Group]; ok && s != tr.Source {
						t.Errorf("group %d answered by %s and %s", tr.Group, s, tr.Source)
					}
					src[tr.Group] = tr.Source
					if pc := m.Pieces(); tr.Source == store.SourceReal && pc.WorldModel && tr.WMReward == nil {
						t.Errorf("%s: real turn not graded by the world model", tr.TurnKey)
					}
				}
				trajs, err := st.StepTrajectories(ctx, res.RunID, step)
				if err != nil {
					t.Fatal(err)
				}
				for _, tr := range trajs {
					if src[tr.Group] == store.SourceReal && tr.Exec == nil {
						t.Errorf("%s: real trajectory without r_env", tr.Key)
					}
					if m.Pieces().WorldModel && tr.WMScore == nil {
						t.Errorf("%s: no r_wm", tr.Key)
					}
				}
			}
			single := tiny(t, m)
			single.SuiteSeed = testenv.SuiteSeed
			r1, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "single-" + string(m), Config: single})
			if r1.Checkpoint.Hash == res.Checkpoint.Hash {
				t.Errorf("3 turns and 1 turn ended at the same checkpoint %s", res.Checkpoint.Hash)
			}
		})
	}
}

// TestRealRunEvalTurns: the tiny preset with trajectory.turns: 3 in grpo
// has its held-out score measured over 3 real turns per sample, the max
// (changeEvalAttempts); the same run with the change's GetVersion answering
// DefaultVersion (a run recorded before it) trains to the same checkpoint
// and is evaluated on turn 1 only, as before, with a third of the held-out
// executions; every sample's 3-turn score is at least its turn-1 score, and
// the mean is above it.
func TestRealRunEvalTurns(t *testing.T) {
	const K = 3
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.GRPO)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Trajectory.Turns = K
	cfg.Eval.Samples = 4
	sb := &testenv.InProcess{}
	res, _ := runToEnd(t, realActivities(t, st, sb, t.TempDir()), RunInput{RunID: "evalturns-3", Config: cfg})
	ran3 := sb.Runs()
	sb1 := &testenv.InProcess{}
	res1, _ := runToEndWith(t, realActivities(t, st, sb1, t.TempDir()), RunInput{RunID: "evalturns-1", Config: cfg},
		func(env *testsuite.TestWorkflowEnvironment) {
			env.OnGetVersion(changeEvalAttempts, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		})
	if res.Checkpoint.Hash != res1.Checkpoint.Hash {
		t.Fatalf("the evaluation changed the training: checkpoints %s and %s", res.Checkpoint.Hash, res1.Checkpoint.Hash)
	}
	held := cfg.Eval.Tasks * cfg.Eval.Samples
	if ran3-sb1.Runs() != (K-1)*held {
		t.Errorf("sandbox ran %d and %d times: want %d more held-out executions over 3 turns", ran3, sb1.Runs(), (K-1)*held)
	}
	if res.HeldOut == nil || res1.HeldOut == nil {
		t.Fatalf("held-out %+v and %+v", res.HeldOut, res1.HeldOut)
	}
	ctx := t.Context()
	e3, err := st.Evaluations(ctx, res.RunID, res.Checkpoint.Version)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := st.Evaluations(ctx, res1.RunID, res1.Checkpoint.Version)
	if err != nil {
		t.Fatal(err)
	}
	if len(e3) != held || len(e1) != held {
		t.Fatalf("%d and %d held-out rows, want %d", len(e3), len(e1), held)
	}
	score := func(e store.Evaluation) float64 {
		if e.Result.Status == "ok" {
			return e.Result.Position
		}
		return 0
	}
	for i := range e3 {
		if e1[i].Executions != 0 || e3[i].Executions != K || score(e3[i]) < score(e1[i]) {
			t.Errorf("%s/%d: 3 turns %v (%d executions, %q), turn 1 %v (%d)", e3[i].TaskID, e3[i].Sample, score(e3[i]),
				e3[i].Executions, e3[i].Result.Detail, score(e1[i]), e1[i].Executions)
		}
	}
	if !(res.HeldOut.Score > res1.HeldOut.Score) {
		t.Errorf("held-out over 3 turns %.4f, turn 1 only %.4f: want above", res.HeldOut.Score, res1.HeldOut.Score)
	}
	t.Logf("grpo, 3 turns, checkpoint %s: held-out turn 1 only %.4f, max over 3 turns %.4f", res.Checkpoint.Hash[:12],
		res1.HeldOut.Score, res.HeldOut.Score)
}

// TestRealRunTurnsDeterministic: the same 3-turn run twice, the second with
// a sandbox that fails now and then (retried), ends at the same checkpoint.
func TestRealRunTurnsDeterministic(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Trajectory.Turns = 3
	r1, _ := runToEnd(t, realActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "tdet-1", Config: cfg})
	flaky := &testenv.InProcess{}
	flaky.FailNext(2)
	r2, _ := runToEnd(t, realActivities(t, st, flaky, t.TempDir()), RunInput{RunID: "tdet-2", Config: cfg})
	if r1.Checkpoint != r2.Checkpoint {
		t.Fatalf("same seed, different final checkpoints: %+v and %+v", r1.Checkpoint, r2.Checkpoint)
	}
}

// TestIntegrationTurns runs the tiny preset with trajectory.turns: 3 through
// the Temporal server in grpo and wmrl, twice each: both runs of a mode end
// at the same checkpoint, every trajectory has its three answered turns.
// With WMRL_RECORD_HISTORIES=1 it writes the first run's histories (its
// first segment and its step 0) to testdata/ for TestReplay, named
// testdata/<WMRL_RECORD_PREFIX>turns_*.json (v8_: with unexecuted-turns).
func TestIntegrationTurns(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	for _, m := range []mode.Mode{mode.GRPO, mode.WMRL} {
		cfg := tiny(t, m)
		cfg.SuiteSeed = testenv.SuiteSeed
		cfg.Trajectory.Turns = 3
		cfg.Steps, cfg.ContinueAsNewEvery, cfg.Eval.Every, cfg.Eval.Tasks = 3, 2, 0, 1
		var hashes []string
		for k := range 2 {
			id := fmt.Sprintf("turns-%s-%d-%d", m, stamp, k)
			we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
				TrainingRun, RunInput{RunID: id, Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			var res RunResult
			if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			if res.Steps != cfg.Steps {
				t.Fatalf("%s: result %+v", m, res)
			}
			hashes = append(hashes, res.Checkpoint.Hash)
			for s := range cfg.Steps {
				ts, err := st.StepTurns(ctx, id, s)
				if err != nil {
					t.Fatal(err)
				}
				if len(ts) != 3*cfg.Groups*cfg.Samples {
					t.Fatalf("%s step %d: %d turns, want %d", m, s, len(ts), 3*cfg.Groups*cfg.Samples)
				}
			}
			if k == 0 && os.Getenv("WMRL_RECORD_HISTORIES") == "1" {
				prefix := os.Getenv("WMRL_RECORD_PREFIX")
				record(t, c, id, we.GetRunID(), fmt.Sprintf("testdata/%sturns_run_%s.json", prefix, m))
				record(t, c, StepWorkflowID(id, 0), "", fmt.Sprintf("testdata/%sturns_step_%s.json", prefix, m))
			}
		}
		if hashes[0] != hashes[1] {
			t.Errorf("%s: the same 3-turn run twice ended at %s and %s", m, hashes[0], hashes[1])
		}
		t.Logf("%s, 3 turns: checkpoint %s (both runs)", m, hashes[0])
	}
}

// TestIntegrationEvalAttempts runs through the Temporal server a 3-turn
// grpo run of the tiny preset and a single-shot one under eval.best_of: 3,
// one segment each with its final held-out evaluation: every held-out row
// counts its 3 executions and names its reduction. With
// WMRL_RECORD_HISTORIES=1 it writes both run histories to testdata/ for
// TestReplay (the change eval-attempts in a recorded history).
func TestIntegrationEvalAttempts(t *testing.T) {
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	for _, tt := range []struct {
		name, detail string
		set          func(*runconfig.Config)
	}{
		{"turns", "max over 3 turns: turn ", func(c *runconfig.Config) { c.Trajectory.Turns = 3 }},
		{"bestof", "best of 3: attempt ", func(c *runconfig.Config) { c.Eval.BestOf = 3 }},
	} {
		cfg := tiny(t, mode.GRPO)
		cfg.SuiteSeed = testenv.SuiteSeed
		cfg.Steps, cfg.ContinueAsNewEvery, cfg.Eval.Every, cfg.Eval.Tasks, cfg.Eval.Samples = 2, 10, 0, 1, 2
		tt.set(&cfg)
		id := fmt.Sprintf("evalattempts-%s-%d", tt.name, stamp)
		we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
			TrainingRun, RunInput{RunID: id, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		var res RunResult
		if err := we.Get(ctx, &res); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.Steps != cfg.Steps || res.HeldOut == nil || res.HeldOut.Samples != 2 {
			t.Fatalf("%s: result %+v, held-out %+v", tt.name, res, res.HeldOut)
		}
		evs, err := st.Evaluations(ctx, id, res.Checkpoint.Version)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Executions != 3 || !strings.HasPrefix(e.Result.Detail, tt.detail) {
				t.Errorf("%s: held-out %s/%d: %d executions, detail %q", tt.name, e.TaskID, e.Sample, e.Executions, e.Result.Detail)
			}
		}
		t.Logf("%s: checkpoint %s, held-out %.4f", tt.name, res.Checkpoint.Hash[:12], res.HeldOut.Score)
		if os.Getenv("WMRL_RECORD_HISTORIES") == "1" {
			record(t, c, id, we.GetRunID(), fmt.Sprintf("testdata/evalattempts_run_%s.json", tt.name))
		}
	}
}

// TestTurnsHistorySize measures the history of one grpo step at 64 groups ×
// 8 samples × 5 turns (every trajectory executed: the largest step history
// of the modes) through the Temporal server: its events and its JSON bytes,
// against Temporal's limits (51,200 events, 50 MB). It runs only with
// WMRL_TURNS_HISTORY=1 (2,560 executions).
func TestTurnsHistorySize(t *testing.T) {
	if os.Getenv("WMRL_TURNS_HISTORY") != "1" {
		t.Skip("set WMRL_TURNS_HISTORY=1 to measure a 64 x 8 x 5 step's history")
	}
	c := dialTemporal(t)
	st := testenv.FreshStore(t)
	a := realActivities(t, st, &testenv.InProcess{}, t.TempDir())
	startWorkers(t, c, a)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	cfg := tiny(t, mode.GRPO)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Steps, cfg.Groups, cfg.Samples, cfg.Trajectory.Turns, cfg.Eval.Tasks = 1, 64, 8, 5, 1
	cfg.Parallelism = 64
	id := fmt.Sprintf("turns-history-%d", time.Now().UnixNano())
	started := time.Now()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: id, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "step.json")
	record(t, c, StepWorkflowID(id, 0), "", path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Events []json.RawMessage `json:"events"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	t.Logf("64 groups x 8 samples x 5 turns, grpo: step history %d events, %d bytes of JSON; run took %v",
		len(h.Events), fi.Size(), time.Since(started).Round(time.Second))
	if len(h.Events) > 51200/2 || fi.Size() > 25<<20 {
		t.Errorf("step history of %d events, %d bytes: not well under Temporal's 51,200 events and 50 MB", len(h.Events), fi.Size())
	}
}

// TestFaultWorkerKilledInTurn is TestFaultWorkerKilled with 3 turns: the
// worker process is killed with SIGKILL once step 1 has reached its third
// turn, and restarted; the run ends at the checkpoint of an uninterrupted
// run with the same seed, and no turn row is duplicated or missing. It runs
// only with WMRL_FAULT_TEST=1 (and a Temporal server).
func TestFaultWorkerKilledInTurn(t *testing.T) {
	c, bin := faultSetup(t)
	st, dsn := testenv.FreshDB(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = suite.DefaultSeed
	cfg.Steps, cfg.ContinueAsNewEvery, cfg.Trajectory.Turns = 3, 2, 3
	cfg.Eval = runconfig.Eval{Every: 0, Samples: 2, Tasks: 1}
	stamp := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	w := startWorker(t, bin, dsn)
	ref := fmt.Sprintf("turns-fault-ref-%d", stamp)
	refRes := runAndWait(ctx, t, c, ref, RunInput{RunID: ref, Config: cfg})
	stopWorker(t, w, syscall.SIGTERM)

	w = startWorker(t, bin, dsn)
	run := fmt.Sprintf("turns-fault-kill-%d", stamp)
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: run, TaskQueue: QueueControl},
		TrainingRun, RunInput{RunID: run, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "step 1's third turn", func() bool {
		ts, err := st.StepTurns(ctx, run, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ts {
			if tr.Turn == 3 {
				return true
			}
		}
		return false
	})
	stopWorker(t, w, syscall.SIGKILL)
	t.Logf("worker killed in step 1's third turn")
	startWorker(t, bin, dsn)
	var res RunResult
	if err := c.GetWorkflow(ctx, run, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Checkpoint != refRes.Checkpoint {
		t.Fatalf("final checkpoint after a crash %+v, uninterrupted %+v", res.Checkpoint, refRes.Checkpoint)
	}
	for step := range cfg.Steps {
		a, err := st.StepTurns(ctx, ref, step)
		if err != nil {
			t.Fatal(err)
		}
		b, err := st.StepTurns(ctx, run, step)
		if err != nil {
			t.Fatal(err)
		}
		want := 3 * cfg.Groups * cfg.Samples
		if len(a) != want || len(b) != want {
			t.Fatalf("step %d: %d and %d turns, want %d", step, len(a), len(b), want)
		}
		for i := range a {
			if a[i].TurnKey.Turn != b[i].TurnKey.Turn || a[i].Action != b[i].Action || a[i].Answer.Status != b[i].Answer.Status {
				t.Fatalf("step %d turn row %d differs: %+v and %+v", step, i, a[i], b[i])
			}
		}
	}
	t.Logf("killed and uninterrupted runs both end at %s", res.Checkpoint.Hash)
}
