package main

import (
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wmrl/wmrl/activities"
	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/serve/gradeserve"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// restartable is the services of wmrl serve (the built-in pieces over the
// Tinker API, chat completions and /grade) on a fixed address, which a test
// can stop and start again, as a crashed and restarted server.
type restartable struct {
	t    *testing.T
	addr string
	mux  http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func (r *restartable) start() {
	r.t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment after a stop
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	srv := &http.Server{Handler: r.mux}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// kill stops the server at once, dropping the requests in flight.
func (r *restartable) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.srv.Close()
}

// TestHTTPBackends runs the tiny preset with all three remote backends over
// HTTP against the built-in pieces served as wmrl serve serves them:
// policy.backend tinker (the Tinker API), world_model.backend openai (chat
// completions) and sandbox.kind grade-http (/grade). The run completes; a
// second run of the same seed ends with the same checkpoint hash; a third,
// whose server is killed and restarted in the middle of a step, too, and
// no optimiser step is applied twice.
func TestHTTPBackends(t *testing.T) {
	const key = "http-backends-KEY-7"
	t.Setenv(tinker.EnvAPIKey, key)
	t.Setenv(openaiwm.EnvAPIKey, key)
	t.Setenv(gradehttp.TokenEnv, key)
	srv := &restartable{t: t, addr: "127.0.0.1:0"}
	e := stack(t, testNamespace+"-http", func(a *activities.Activities) {
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
		url := "http://" + srv.addr
		tcfg, err := tinker.Config{BaseURL: url, BaseModel: tinker.BuiltinBaseModel, PollMax: 200 * time.Millisecond}.FromEnv(func(k string) string {
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
		ocfg := openaiwm.DefaultConfig()
		ocfg.BaseURL, ocfg.Model = url+"/v1", openAIModelName
		okey, err := openaiwm.LoadKey(ocfg, func(k string) string {
			if k == openaiwm.EnvAPIKey {
				return key
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		owm, err := openaiwm.New(ocfg, okey, openaiwm.StoreCache{Store: a.Store})
		if err != nil {
			t.Fatal(err)
		}
		gr, err := gradehttp.New(gradehttp.Config{URL: url, Token: gradehttp.Token(key)})
		if err != nil {
			t.Fatal(err)
		}
		a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol},
			backend.Entry{Kind: backend.KindWorldModel, Name: backend.OpenAI, Adapter: owm},
			backend.Entry{Kind: backend.KindGrader, Name: backend.GradeHTTP, Adapter: gr})
	})
	cfg := writeFile(t, "http.yaml", "policy:\n  backend: tinker\nworld_model:\n  backend: openai\nsandbox:\n  kind: grade-http\n")

	final := func(name string) string {
		t.Helper()
		s := e.status(t, name)
		if s.State != "completed" || s.Checkpoint.Version != 3 {
			t.Fatalf("run %s: state %s, checkpoint %+v", name, s.State, s.Checkpoint)
		}
		var steps int
		if err := e.st.Pool().QueryRow(t.Context(), `SELECT optim_steps FROM tinker_models WHERE user_metadata->>'wmrl_run' = $1`,
			name).Scan(&steps); err != nil || steps != 3 {
			t.Errorf("run %s: %d optimiser steps on the Tinker server, want 3 (%v)", name, steps, err)
		}
		// Each step's summary holds the update's importance ratio, from
		// the server's loss_fn_outputs: 1, the server being on-policy.
		rows, err := e.st.Steps(t.Context(), name)
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

	first := e.runName(t, "http")
	out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", first, "--poll", "100ms")
	if err != nil {
		t.Fatalf("run over HTTP: %v\n%s", err, out)
	}
	t.Logf("wmrl run --preset tiny (tinker, openai, grade-http over HTTP):\n%s", out)
	hash := final(first)

	second := e.runName(t, "http")
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", second, "--poll", "100ms"); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if h := final(second); h != hash {
		t.Errorf("same seed over HTTP: final checkpoint %s, then %s", hash, h)
	}

	// The server killed in step 1 and back 2 s later.
	third := e.runName(t, "http")
	done := make(chan error, 1)
	go func() {
		_, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", third, "--poll", "100ms")
		done <- err
	}()
	waitFor(t, "step 1 of "+third, func() bool {
		st, err := e.st.Steps(t.Context(), third)
		return err == nil && len(st) >= 2
	})
	srv.kill()
	time.Sleep(2 * time.Second)
	srv.start()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run with a server restart: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end within 3 minutes of the restart")
	}
	if h := final(third); h != hash {
		t.Errorf("with a server restart in step 1: final checkpoint %s, want %s", h, hash)
	}
	if strings.Contains(out, key) {
		t.Error("the run's output shows the key")
	}
}
