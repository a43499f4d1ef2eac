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

// serveBuiltin serves on srv the built-in pieces (the small suite, the
// stored world model, the in-process sandbox) as wmrl serve serves them:
// /grade, chat completions and the Tinker API (strict seq_id order), each
// behind key. srv is killed when the test ends. It returns the Tinker
// policy of a's store against srv, with key as $TINKER_API_KEY, for the
// workers' activities (stack's configure).
func serveBuiltin(t *testing.T, a *activities.Activities, srv *restartable, key string) *tinker.Policy {
	t.Helper()
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	b := builtin.New(smallSuites{}, wm, &testenv.InProcess{MaxCPUs: 2})
	mux, _, err := serveMux(serveDeps{tasks: b.Tasks, grader: b.Grader,
		graderOptions: gradeserve.Options{Capacity: 4, Token: gradehttp.Token(key)}, openAI: b.WorldModel, openAIKey: key,
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
	return pol
}

// completed returns the status of run, which must have completed at
// checkpoint version 3 (the tiny preset's steps).
func (e *itEnv) completed(t *testing.T, run string) statusReport {
	t.Helper()
	s := e.status(t, run)
	if s.State != "completed" || s.Checkpoint.Version != 3 {
		t.Fatalf("run %s: state %s, checkpoint %+v", run, s.State, s.Checkpoint)
	}
	return s
}

// checkOnPolicy checks that each step's summary of run holds the update's
// importance ratio, from the Tinker server's loss_fn_outputs: 1, the
// server being on-policy.
func (e *itEnv) checkOnPolicy(t *testing.T, run string) {
	t.Helper()
	rows, err := e.st.Steps(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if m := r.Metrics; math.Abs(m.ImportanceRatioMean-1) > 1e-9 || math.Abs(m.ImportanceRatioMax-1) > 1e-9 {
			t.Errorf("run %s step %d: importance ratio mean %v, max %v; want 1, 1", run, r.Step, m.ImportanceRatioMean, m.ImportanceRatioMax)
		}
	}
}

// runTwice runs `wmrl run --preset tiny --config cfg` twice, under fresh
// names of prefix, and logs the first run's output under what (its
// backends). final checks a run that ended and returns its final
// checkpoint's hash, which must be the same for both runs (the same
// seed). It returns the first run's output and hash.
func (e *itEnv) runTwice(t *testing.T, prefix, cfg, what string, final func(run string) string) (string, string) {
	t.Helper()
	first := e.runName(t, prefix)
	out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", first, "--poll", "100ms")
	if err != nil {
		t.Fatalf("run (%s): %v\n%s", what, err, out)
	}
	t.Logf("wmrl run --preset tiny (%s):\n%s", what, out)
	hash := final(first)
	second := e.runName(t, prefix)
	if out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", second, "--poll", "100ms"); err != nil {
		t.Fatalf("second run (%s): %v\n%s", what, err, out)
	}
	if h := final(second); h != hash {
		t.Errorf("same seed (%s): final checkpoint %s, then %s", what, hash, h)
	}
	return out, hash
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
		pol := serveBuiltin(t, a, srv, key)
		url := "http://" + srv.addr
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
		s := e.completed(t, name)
		var steps int
		if err := e.st.Pool().QueryRow(t.Context(), `SELECT optim_steps FROM tinker_models WHERE user_metadata->>'wmrl_run' = $1`,
			name).Scan(&steps); err != nil || steps != 3 {
			t.Errorf("run %s: %d optimiser steps on the Tinker server, want 3 (%v)", name, steps, err)
		}
		e.checkOnPolicy(t, name)
		return s.Checkpoint.Hash
	}
	out, hash := e.runTwice(t, "http", cfg, "tinker, openai, grade-http over HTTP", final)

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
