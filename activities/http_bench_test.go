package activities

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/backend/openaiwm"
	"github.com/wmrl/wmrl/internal/backend/tinker"
	"github.com/wmrl/wmrl/internal/serve/gradeserve"
	"github.com/wmrl/wmrl/internal/serve/openaiserve"
	"github.com/wmrl/wmrl/internal/serve/tinkerserve"
	"github.com/wmrl/wmrl/internal/testenv"
)

// httpBackends gives a the three remote backends over HTTP (policy: the
// Tinker API, world model: chat completions, grader: /grade), served by
// the built-in pieces on a local server, as wmrl serve serves them.
func httpBackends(tb testing.TB, a *Activities) {
	tb.Helper()
	g := a.Grader.(*builtin.Grader)
	b := builtin.New(g.Tasks.Suites, a.WorldModel.(*builtin.WorldModel).Model, g.Sandbox)
	gh, err := gradeserve.NewGrader(b.Grader, b.Tasks, gradeserve.Options{Capacity: 8})
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/health", gh)
	mux.Handle("/grade", gh)
	mux.Handle("/v1/", openaiserve.New(b.WorldModel, b.Tasks, "wmrl-builtin"))
	mux.Handle("/api/v1/", tinkerserve.New(a.Store.Pool(), b.Tasks, tinkerserve.Options{}))
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	pol, err := tinker.New(tinker.Config{BaseURL: srv.URL, BaseModel: tinker.BuiltinBaseModel}, tinker.BuiltinTokenizer{},
		tinker.PostgresJournal{Store: a.Store}, srv.Client())
	if err != nil {
		tb.Fatal(err)
	}
	ocfg := openaiwm.DefaultConfig()
	ocfg.BaseURL, ocfg.Model = srv.URL+"/v1", "wmrl-builtin"
	owm, err := openaiwm.New(ocfg, openaiwm.Key{}, openaiwm.StoreCache{Store: a.Store})
	if err != nil {
		tb.Fatal(err)
	}
	gr, err := gradehttp.New(gradehttp.Config{URL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		tb.Fatal(err)
	}
	a.Backends = backend.MustRegistry(backend.Entry{Kind: backend.KindPolicy, Name: backend.Tinker, Adapter: pol},
		backend.Entry{Kind: backend.KindWorldModel, Name: backend.OpenAI, Adapter: owm},
		backend.Entry{Kind: backend.KindGrader, Name: backend.GradeHTTP, Adapter: gr})
}

// BenchmarkStepBackends is one training step of the tiny preset (4 groups
// of 4, one anchor group), driven activity by activity, with the built-in
// backends in process and with all three over HTTP: the cost of the wire
// (JSON, HTTP, the Tinker server's Postgres state) per step. Temporal is
// not involved (see internal/bench/orchbench for that).
func BenchmarkStepBackends(b *testing.B) {
	for _, remote := range []bool{false, true} {
		name := "builtin"
		if remote {
			name = "http"
		}
		b.Run(name, func(b *testing.B) {
			a, _ := newTestActivities(b)
			cfg := tinyConfig(b)
			cfg.Steps = 1
			if remote {
				httpBackends(b, a)
				cfg.Policy.Backend, cfg.WorldModel.Backend, cfg.Sandbox.Kind = backend.Tinker, backend.OpenAI, backend.GradeHTTP
			}
			if _, err := testenv.SmallSuite(); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				driveRun(b, a, fmt.Sprintf("bench-%s-%d", name, i), cfg)
			}
		})
	}
}
