package workflows

import (
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

// tinkerRealActivities are realActivities with the Tinker policy over the
// built-in Tinker server (strict seq_id order) on st's database.
func tinkerRealActivities(t *testing.T, st *store.Store, sb *testenv.InProcess, dataDir string) *activities.Activities {
	t.Helper()
	a := realActivities(t, st, sb, dataDir)
	srv := httptest.NewServer(tinkerserve.New(st.Pool(), a.Tasks, tinkerserve.Options{StrictSeq: true}))
	t.Cleanup(srv.Close)
	pol, err := tinker.New(tinker.Config{BaseURL: srv.URL, BaseModel: tinker.BuiltinBaseModel, PollMax: 20 * time.Millisecond},
		tinker.BuiltinTokenizer{}, tinker.PostgresJournal{Store: st}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol})
	return a
}

// TestRealRunTurnsTinker runs the tiny preset with trajectory.turns: 3 and
// policy.backend tinker against the built-in Tinker server, in the test
// environment with the real activities, twice: both runs end at the same
// checkpoint; every turn row holds its action's tokens and sampling
// logprobs, turn t > 1 sampled from the sequence so far; every update is
// on-policy (importance ratio 1: the server scores each action of the
// one-datum trajectory under the input it sampled it from); the run ends
// elsewhere than the single-shot Tinker run of the same seed.
func TestRealRunTurnsTinker(t *testing.T) {
	const K = 3
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Policy.Backend = backend.Tinker
	cfg.Trajectory.Turns = K
	r1, _ := runToEnd(t, tinkerRealActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "tinker-turns-1", Config: cfg})
	r2, _ := runToEnd(t, tinkerRealActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "tinker-turns-2", Config: cfg})
	if r1.Steps != cfg.Steps || r1.Checkpoint != r2.Checkpoint {
		t.Fatalf("runs ended at %+v and %+v (%d steps), want the same checkpoint after %d steps", r1.Checkpoint, r2.Checkpoint, r1.Steps, cfg.Steps)
	}
	t.Logf("3-turn Tinker runs: both at checkpoint %d %s", r1.Checkpoint.Version, r1.Checkpoint.Hash)
	ctx := t.Context()
	G, n := cfg.Groups, cfg.Samples
	for step := range cfg.Steps {
		ts, err := st.StepTurns(ctx, r1.RunID, step)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != K*G*n {
			t.Fatalf("step %d: %d turns, want %d", step, len(ts), K*G*n)
		}
		for _, tr := range ts {
			c := tr.Completion
			if c == nil || len(c.Tokens) == 0 || len(c.LogProbs) != len(c.Tokens) {
				t.Fatalf("%s: completion %+v, want its tokens and logprobs", tr.TurnKey, c)
			}
			for _, id := range c.Tokens {
				if id < tinker.ProgramTokenOffset {
					t.Fatalf("%s: token %d is not a program token", tr.TurnKey, id)
				}
			}
			if tr.Answer == nil || tr.Answer.Observation == "" {
				t.Errorf("%s unanswered", tr.TurnKey)
			}
		}
	}
	steps, err := st.Steps(ctx, r1.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		m := s.Metrics
		if math.Abs(m.ImportanceRatioMean-1) > 1e-9 || math.Abs(m.ImportanceRatioMax-1) > 1e-9 || !(m.GradNorm > 0) {
			t.Errorf("step %d: importance ratio mean %v max %v, grad norm %v; want 1, 1 and a gradient", s.Step, m.ImportanceRatioMean, m.ImportanceRatioMax, m.GradNorm)
		}
	}
	var turnsMeta string
	if err := st.Pool().QueryRow(ctx, `SELECT user_metadata->>'wmrl_turns' FROM tinker_models WHERE user_metadata->>'wmrl_run' = $1`, r1.RunID).Scan(&turnsMeta); err != nil || turnsMeta != "3" {
		t.Errorf("the run's Tinker model has wmrl_turns %q (%v), want 3", turnsMeta, err)
	}
	single := cfg
	single.Trajectory.Turns = 0
	r0, _ := runToEnd(t, tinkerRealActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "tinker-single", Config: single})
	if r0.Checkpoint.Hash == r1.Checkpoint.Hash {
		t.Errorf("3 turns and 1 turn ended at the same checkpoint %s", r0.Checkpoint.Hash)
	}
}

// TestRealRunPipelineTurnsTinker: the 3-turn Tinker run of the tiny preset
// with pipeline.max_off_policy 1, twice, ends at the same checkpoint (not
// the sequential one's): the turns of step t are sampled from checkpoint
// max(0, t−1), so their stored sampling logprobs, which the datums carry
// to the importance_sampling loss, are that checkpoint's: step 0's update
// has ratio 1 (sampled from its own checkpoint), the later ones another.
func TestRealRunPipelineTurnsTinker(t *testing.T) {
	st := testenv.FreshStore(t)
	cfg := tiny(t, mode.WMRL)
	cfg.SuiteSeed = testenv.SuiteSeed
	cfg.Policy.Backend = backend.Tinker
	cfg.Trajectory.Turns = 3
	cfg.Pipeline.MaxOffPolicy = 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r1, _ := runToEnd(t, tinkerRealActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "tinker-pipe-turns-1", Config: cfg})
	r2, _ := runToEnd(t, tinkerRealActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "tinker-pipe-turns-2", Config: cfg})
	if r1.Steps != cfg.Steps || r1.Checkpoint != r2.Checkpoint {
		t.Fatalf("runs ended at %+v and %+v (%d steps), want the same checkpoint after %d steps", r1.Checkpoint, r2.Checkpoint, r1.Steps, cfg.Steps)
	}
	t.Logf("3-turn Tinker runs with d = 1: both at checkpoint %d %s", r1.Checkpoint.Version, r1.Checkpoint.Hash)
	steps, err := st.Steps(t.Context(), r1.RunID)
	if err != nil || len(steps) != cfg.Steps {
		t.Fatalf("%d steps (%v)", len(steps), err)
	}
	for _, s := range steps {
		m := s.Metrics
		t.Logf("step %d: importance ratio mean %.4f max %.4f", s.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
		on := math.Abs(m.ImportanceRatioMean-1) < 1e-9 && math.Abs(m.ImportanceRatioMax-1) < 1e-9
		if (s.Step == 0) != on || !(m.ImportanceRatioMean > 0) {
			t.Errorf("step %d: importance ratio mean %v max %v; want 1 at step 0 only", s.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
		}
	}
	seq := cfg
	seq.Pipeline.MaxOffPolicy = 0
	r0, _ := runToEnd(t, tinkerRealActivities(t, st, &testenv.InProcess{}, t.TempDir()), RunInput{RunID: "tinker-seq-turns", Config: seq})
	if r0.Checkpoint.Hash == r1.Checkpoint.Hash {
		t.Errorf("d = 1 and d = 0 ended at the same checkpoint %s", r0.Checkpoint.Hash)
	}
}
