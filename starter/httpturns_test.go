package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/serve/gradeserve"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/tokenizer"
	"github.com/wmrl/wmrl/internal/turns"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// wireLog records what the HTTP backends sent wmrl serve: the actions of
// /grade items and the chat-completion prompts.
type wireLog struct {
	mu      sync.Mutex
	actions map[string]int
	turns   int // prompts with "Action: execute_code"
	prompts int
}

func (l *wireLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		l.mu.Lock()
		switch r.URL.Path {
		case gradehttp.PathGrade:
			var req gradehttp.Request
			if json.Unmarshal(body, &req) == nil {
				for _, it := range req.Items {
					l.actions[it.Action]++
				}
			}
		case "/v1/chat/completions":
			l.prompts++
			if bytes.Contains(body, []byte(`\nAction: execute_code\n`)) {
				l.turns++
			}
		}
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// TestHTTPTurns runs the tiny preset with trajectory.turns: 3 in wmrl mode
// with the built-in policy, world_model.backend openai (chat completions)
// and sandbox.kind grade-http (/grade) against the built-in pieces served
// as wmrl serve serves them. Both runs of the seed complete with the same
// final checkpoint; every turn is asked as a turn (its action on the
// wire); the world model's turns are answered in the reference's format,
// so their rewards are rungs of the ladder and buckets of the reference's
// four, and their observations are the remote answer's status and
// env_feedback in turns.Render's format; the real turns' observations are
// /grade's feedback, the in-process grader's text; the cached answers keep
// their outcome.
func TestHTTPTurns(t *testing.T) {
	log := &wireLog{actions: map[string]int{}}
	e := stack(t, testNamespace+"-httpturns", func(a *activities.Activities) {
		wm, err := worldmodel.Default()
		if err != nil {
			t.Fatal(err)
		}
		b := builtin.New(smallSuites{}, wm, &testenv.InProcess{MaxCPUs: 2})
		mux, _, err := serveMux(serveDeps{tasks: b.Tasks, grader: b.Grader,
			graderOptions: gradeserve.Options{Capacity: 4}, openAI: b.WorldModel})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(log.wrap(mux))
		t.Cleanup(srv.Close)
		ocfg := openaiwm.DefaultConfig()
		ocfg.BaseURL, ocfg.Model = srv.URL+"/v1", openAIModelName
		owm, err := openaiwm.New(ocfg, openaiwm.Key{}, openaiwm.StoreCache{Store: a.Store})
		if err != nil {
			t.Fatal(err)
		}
		gr, err := gradehttp.New(gradehttp.Config{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		// The policy is the activities' built-in one.
		a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindWorldModel, Name: backend.OpenAI, Adapter: owm},
			backend.Entry{Kind: backend.KindGrader, Name: backend.GradeHTTP, Adapter: gr})
	})
	cfg := writeFile(t, "httpturns.yaml",
		"mode: wmrl\ntrajectory:\n  turns: 3\nworld_model:\n  backend: openai\nsandbox:\n  kind: grade-http\n")

	ladder := map[float64]bool{0: true, 0.1: true, 0.2: true}
	for _, p := range openaiwm.BucketPosition {
		ladder[round9(openaiwm.ValidBase+openaiwm.ValidSpan*p)] = true
	}
	var hash string
	for run := range 2 {
		name := e.runName(t, "httpturns")
		out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", name, "--poll", "100ms")
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		if run == 0 {
			t.Logf("wmrl run --preset tiny (3 turns; openai, grade-http over HTTP):\n%s", out)
		}
		s := e.status(t, name)
		if s.State != "completed" || s.Checkpoint.Version != 3 {
			t.Fatalf("run %s: state %s, checkpoint %+v", name, s.State, s.Checkpoint)
		}
		if run == 0 {
			hash = s.Checkpoint.Hash
		} else if s.Checkpoint.Hash != hash {
			t.Errorf("same seed, 3 turns over HTTP: final checkpoint %s, then %s", hash, s.Checkpoint.Hash)
		}

		var in inspectReport
		e.wmrlJSON(t, &in, "inspect", name, "--step", "1")
		real, wm := 0, 0
		for _, tr := range in.Trajectories {
			if len(tr.Turns) != 3 {
				t.Fatalf("g%d/s%d: %d turns, want 3", tr.Group, tr.Sample, len(tr.Turns))
			}
			for _, x := range tr.Turns {
				if x.Reward == nil {
					t.Errorf("g%d/s%d turn %d: ungraded (%+v)", tr.Group, tr.Sample, x.Turn, x)
					continue
				}
				// Both environments' feedback is the ladder's description
				// of the status (the in-process grader's words, which the
				// remote world model was served to answer with), framed by
				// the one renderer.
				want, err := turns.Render(turns.Answer{Graded: true, Status: x.Status, Score: *x.Reward,
					Feedback: turns.Describe(x.Status)}, 1200, tokenizer.Bytes{})
				if err != nil {
					t.Fatal(err)
				}
				if x.Observation != want {
					t.Errorf("g%d/s%d turn %d (%s): observation %q, want %q", tr.Group, tr.Sample, x.Turn, x.Source,
						x.Observation, want)
				}
				switch x.Source {
				case store.SourceReal:
					real++
					if x.WM == nil || !ladder[round9(*x.WM)] {
						t.Errorf("g%d/s%d turn %d: the world model's grade of a real turn %v, want a rung of the reference's ladder",
							tr.Group, tr.Sample, x.Turn, x.WM)
					}
				case store.SourceWorldModel:
					wm++
					if !ladder[round9(*x.Reward)] {
						t.Errorf("g%d/s%d turn %d: world-model reward %v, want a rung of the reference's ladder",
							tr.Group, tr.Sample, x.Turn, *x.Reward)
					}
				}
			}
		}
		if real == 0 || wm == 0 {
			t.Errorf("run %s step 1: %d real turns, %d world-model turns", name, real, wm)
		}
	}

	log.mu.Lock()
	actions, prompts, turnPrompts := log.actions, log.prompts, log.turns
	log.mu.Unlock()
	t.Logf("over HTTP: /grade items by action %v; %d chat completions, %d of them turn prompts", actions, prompts, turnPrompts)
	if len(actions) != 1 || actions[gradehttp.ActionExecute] == 0 {
		t.Errorf("/grade items by action %v, want every one execute_code", actions)
	}
	if prompts == 0 || turnPrompts != prompts {
		t.Errorf("%d chat completions, %d asked as turns; want all", prompts, turnPrompts)
	}
	// Every cached answer (the second run's are all hits) kept its outcome.
	var n, withOutcome int
	if err := e.st.Pool().QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE status <> '' AND feedback <> '')
		FROM world_model_cache WHERE model = $1`, openAIModelName).Scan(&n, &withOutcome); err != nil {
		t.Fatal(err)
	}
	t.Logf("world_model_cache: %d answers, %d with a status and feedback", n, withOutcome)
	if n == 0 || withOutcome != n || n > prompts {
		t.Errorf("world_model_cache: %d answers, %d with their outcome, %d calls; want every call's answer with its outcome",
			n, withOutcome, prompts)
	}
}

// round keeps a reward's representation error out of a set lookup.
func round9(v float64) float64 { return math.Round(v*1e9) / 1e9 }
