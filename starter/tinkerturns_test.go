package main

import (
	"math"
	"testing"
	"time"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/serve/gradeserve"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// TestTinkerTurns runs the tiny preset with trajectory.turns: 3 and
// policy.backend tinker through wmrl run on the Temporal server, against
// the built-in policy served over the Tinker API as wmrl serve serves it
// (strict seq_id order), twice: both runs complete at the same checkpoint,
// every turn row holds its action's tokens and sampling logprobs, and every
// update is on-policy (importance ratio 1).
func TestTinkerTurns(t *testing.T) {
	const key = "tinker-turns-KEY-3"
	t.Setenv(tinker.EnvAPIKey, key)
	srv := &restartable{t: t, addr: "127.0.0.1:0"}
	e := stack(t, testNamespace+"-tinker-turns", func(a *activities.Activities) {
		wm, err := worldmodel.Default()
		if err != nil {
			t.Fatal(err)
		}
		b := builtin.New(smallSuites{}, wm, &testenv.InProcess{MaxCPUs: 2})
		mux, _, err := serveMux(serveDeps{tasks: b.Tasks, grader: b.Grader,
			graderOptions: gradeserve.Options{Capacity: 4, Token: key}, openAI: b.WorldModel, openAIKey: key,
			tinker: tinkerserve.New(a.Store.Pool(), b.Tasks, tinkerserve.Options{APIKey: key, StrictSeq: true})})
		if err != nil {
			t.Fatal(err)
		}
		srv.mux = mux
		srv.start()
		t.Cleanup(srv.kill)
		tcfg, err := tinker.Config{BaseURL: "http://" + srv.addr, BaseModel: tinker.BuiltinBaseModel, PollMax: 200 * time.Millisecond}.FromEnv(func(k string) string {
			if k == tinker.EnvAPIKey {
				return key
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		pol, err := tinker.New(tcfg, tinker.BuiltinTokenizer{}, tinker.PostgresJournal{Store: a.Store}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol})
	})
	cfg := writeFile(t, "tinker-turns.yaml", "policy:\n  backend: tinker\ntrajectory:\n  turns: 3\n")
	final := func(name string) string {
		t.Helper()
		ctx := t.Context()
		s := e.status(t, name)
		if s.State != "completed" || s.Checkpoint.Version != 3 {
			t.Fatalf("run %s: state %s, checkpoint %+v", name, s.State, s.Checkpoint)
		}
		for step := range 3 {
			ts, err := e.st.StepTurns(ctx, name, step)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != 3*4*4 {
				t.Fatalf("run %s step %d: %d turn rows, want 48", name, step, len(ts))
			}
			for _, tr := range ts {
				if c := tr.Completion; c == nil || len(c.Tokens) == 0 || len(c.LogProbs) != len(c.Tokens) {
					t.Fatalf("%s: completion %+v, want the action's tokens and logprobs", tr.TurnKey, c)
				}
			}
		}
		rows, err := e.st.Steps(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if m := r.Metrics; math.Abs(m.ImportanceRatioMean-1) > 1e-9 || math.Abs(m.ImportanceRatioMax-1) > 1e-9 {
				t.Errorf("run %s step %d: importance ratio mean %v, max %v; want 1, 1", name, r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
			}
		}
		return s.Checkpoint.Hash
	}
	first := e.runName(t, "tinker-turns")
	out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", first, "--poll", "100ms")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	t.Logf("wmrl run --preset tiny (tinker, 3 turns):\n%s", out)
	hash := final(first)
	second := e.runName(t, "tinker-turns")
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", second, "--poll", "100ms"); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if h := final(second); h != hash {
		t.Errorf("same seed: final checkpoint %s, then %s", hash, h)
	}
	t.Logf("both runs end at %s", hash)
}
