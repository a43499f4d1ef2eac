package gradehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/wmrl/wmrl/internal/backend"
)

// fakeService answers /health and /grade with the functions given, and
// records the /grade requests it got.
type fakeService struct {
	t        *testing.T
	health   func(w http.ResponseWriter)
	grade    func(w http.ResponseWriter, req Request, n int) // n: 1 for the first /grade request
	requests atomic.Int64
	got      []Request
}

func newFake(t *testing.T, f *fakeService) (*httptest.Server, *fakeService) {
	f.t = t
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case PathHealth:
			f.health(w)
		case PathGrade:
			if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("grade request %s with content type %q", r.Method, r.Header.Get("Content-Type"))
			}
			var req Request
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				t.Errorf("decode request: %v", err)
			}
			f.got = append(f.got, req)
			f.grade(w, req, int(f.requests.Add(1)))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, f
}

func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.RetryWaitMin == 0 {
		cfg.RetryWaitMin, cfg.RetryWaitMax = time.Millisecond, 5*time.Millisecond
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gradeItems(n int) []backend.GradeItem {
	items := make([]backend.GradeItem, n)
	for i := range items {
		items[i] = backend.GradeItem{
			Task:     backend.Task{Suite: 7, ID: fmt.Sprintf("train-%02d", i), Prompt: "predict y"},
			Solution: fmt.Sprintf("ridge alpha=%d", i+1), Seed: uint64(100 + i),
			Key: backend.SampleKey("run", 3, 1, i),
		}
	}
	return items
}

func TestGradeStatuses(t *testing.T) {
	tests := []struct {
		give       string // one result
		wantGraded bool
		wantStatus string
		wantScore  float64
		wantPos    float64
	}{
		{`{"status":"valid","reward":0.8,"pos":0.6,"feedback":"fine"}`, true, "ok", 0.8, 0.6},
		{`{"status":"ok","reward":0.75,"pos":0.5,"metric":0.9}`, true, "ok", 0.75, 0.5},
		{`{"status":"malformed","reward":0,"pos":null}`, true, "invalid_program", 0, 0},
		{`{"status":"syntax_err","reward":0.0}`, true, "invalid_program", 0, 0},
		{`{"status":"runtime_err","reward":0.1,"pos":null}`, true, "runtime_error", 0.1, 0},
		{`{"status":"timeout","reward":0.1}`, true, "timeout", 0.1, 0},
		{`{"status":"memory","reward":0.1}`, true, "memory", 0.1, 0},
		{`{"status":"ran_no_sub","reward":0.2,"pos":0.9}`, true, "invalid_output", 0.2, 0},
		// A service may use other rungs: the reward is kept as is.
		{`{"status":"runtime_err","reward":0.15}`, true, "runtime_error", 0.15, 0},
		{`{"status":"ungraded","reward":null}`, false, backend.StatusUngraded, 0, 0},
		{`{"status":"grade_error","reward":0,"feedback":"[grade unavailable]"}`, false, backend.StatusUngraded, 0, 0},
		{`{"status":"banana","reward":0.9,"pos":1}`, false, backend.StatusUngraded, 0, 0},
		{`{"status":"","reward":0.5}`, false, backend.StatusUngraded, 0, 0},
	}
	for _, tt := range tests {
		srv, _ := newFake(t, &fakeService{grade: func(w http.ResponseWriter, req Request, _ int) {
			answer(w, 200, "["+tt.give+"]")
		}})
		c := newClient(t, Config{URL: srv.URL})
		gs, err := c.Grade(t.Context(), backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()})
		if err != nil {
			t.Errorf("%s: %v", tt.give, err)
			continue
		}
		g := gs[0]
		if g.Graded != tt.wantGraded || g.Status != tt.wantStatus || g.Score != tt.wantScore || g.Position != tt.wantPos {
			t.Errorf("%s: got graded %v status %q score %v pos %v, want %v %q %v %v", tt.give,
				g.Graded, g.Status, g.Score, g.Position, tt.wantGraded, tt.wantStatus, tt.wantScore, tt.wantPos)
		}
		if !g.Graded && !strings.Contains(tt.give, `"ungraded"`) && !strings.Contains(g.Detail, "no verdict") {
			t.Errorf("%s: detail %q does not say there is no verdict", tt.give, g.Detail)
		}
	}
}

func TestGradeRequestAndResult(t *testing.T) {
	srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, req Request, _ int) {
		answer(w, 200, `{"results":[
			{"id":"run/step-3/group-1/sample-0","status":"valid","reward":0.9,"pos":0.8,"metric":0.93,"feedback":"ok","feedback_raw":"ok, in full","exec_time":2.5,"cpu_s":1.25},
			{"status":"runtime_err","reward":0.1,"pos":null,"feedback":"Traceback: ZeroDivisionError"}]}`)
	}})
	c := newClient(t, Config{URL: srv.URL + "/"})
	lim := backend.Limits{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 32, Deadline: 1500 * time.Millisecond}
	items := gradeItems(2)
	gs, err := c.Grade(t.Context(), backend.GradeRequest{Items: items, Limits: lim, Budget: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Grade{
		{Graded: true, Status: "ok", Score: 0.9, Position: 0.8, Metric: 0.93, Detail: "ok, in full", Feedback: "ok",
			WallSeconds: 2.5, CPUSeconds: 1.25},
		{Graded: true, Status: "runtime_error", Score: 0.1, Detail: "Traceback: ZeroDivisionError",
			Feedback: "Traceback: ZeroDivisionError"},
	}
	for i := range want {
		if gs[i] != want[i] {
			t.Errorf("grade %d: %+v, want %+v", i, gs[i], want[i])
		}
	}
	if len(f.got) != 1 || len(f.got[0].Items) != 2 {
		t.Fatalf("requests %+v", f.got)
	}
	for i, it := range f.got[0].Items {
		in := items[i]
		wantItem := Item{ID: in.Key, RequestID: in.Key, Action: "execute_code", Task: in.Task.ID, Suite: u64(7),
			Code: in.Solution, Seed: in.Seed, Overview: "predict y", Budget: 2.5,
			Limits: &Limits{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 32, DeadlineSeconds: 1.5}}
		if it.Limits == nil || it.Limits.Backend() != wantItem.Limits.Backend() {
			t.Errorf("item %d limits %+v, want %+v", i, it.Limits, wantItem.Limits)
		}
		it.Limits, wantItem.Limits = nil, nil
		if !reflect.DeepEqual(it, wantItem) {
			t.Errorf("item %d on the wire: %+v, want %+v", i, it, wantItem)
		}
		if got := f.got[0].Items[i].Limits.Backend(); got != lim {
			t.Errorf("limits round trip: %+v, want %+v", got, lim)
		}
	}
}

func TestGradeBadAnswers(t *testing.T) {
	tests := []struct {
		name      string
		give      string
		wantError string
	}{
		{"wrong count", `[{"status":"valid","reward":0.9,"pos":0.8}]`, "answered 1 result for 2 items"},
		{"too many", `[{"status":"valid","reward":1},{"status":"valid","reward":1},{"status":"valid","reward":1}]`, "answered 3 results for 2 items"},
		{"out of order", `[{"id":"run/step-3/group-1/sample-1","status":"valid","reward":0.9},{"status":"valid","reward":0.9}]`,
			`item 0 (run/step-3/group-1/sample-0): answer for id "run/step-3/group-1/sample-1": results out of order`},
		{"reward out of range", `[{"status":"valid","reward":0.9},{"status":"valid","reward":1.5}]`, "item 1 (run/step-3/group-1/sample-1): reward 1.5 out of [0,1]"},
		{"no reward", `[{"status":"valid","reward":0.9},{"status":"ran_no_sub","reward":null}]`, `item 1 (run/step-3/group-1/sample-1): status "ran_no_sub" without a reward`},
		{"pos out of range", `[{"status":"valid","reward":0.9,"pos":-0.1},{"status":"valid","reward":0.9}]`, "item 0 (run/step-3/group-1/sample-0): pos -0.1 out of [0,1]"},
		{"negative time", `[{"status":"valid","reward":0.9,"exec_time":-1},{"status":"valid","reward":0.9}]`, "negative exec_time"},
		{"service error", `{"error":"CUDA out of memory"}`, "service error: CUDA out of memory"},
		{"not results", `{"answers":[]}`, `neither a list of results nor an object with "results"`},
		{"not JSON", `<html>oops</html>`, "answer is not a list of results"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newFake(t, &fakeService{grade: func(w http.ResponseWriter, _ Request, _ int) { answer(w, 200, tt.give) }})
			c := newClient(t, Config{URL: srv.URL})
			_, err := c.Grade(t.Context(), backend.GradeRequest{Items: gradeItems(2), Limits: backend.DefaultLimits()})
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantError)
			}
			if !strings.HasPrefix(err.Error(), "grade-http "+srv.URL+"/grade: ") {
				t.Errorf("error %q does not name the backend and the endpoint", err)
			}
			if backend.IsPermanent(err) {
				t.Errorf("a bad answer is permanent: %v", err)
			}
		})
	}
}

func TestGradeRetries(t *testing.T) {
	t.Run("503 then 200", func(t *testing.T) {
		srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, req Request, n int) {
			if n == 1 {
				w.Header().Set("Retry-After", "0")
				answer(w, http.StatusServiceUnavailable, `{"error":"all slots busy"}`)
				return
			}
			answer(w, 200, `[{"status":"valid","reward":0.7,"pos":0.4}]`)
		}})
		c := newClient(t, Config{URL: srv.URL})
		gs, err := c.Grade(t.Context(), backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()})
		if err != nil {
			t.Fatal(err)
		}
		if gs[0].Score != 0.7 || f.requests.Load() != 2 {
			t.Errorf("grade %+v after %d requests, want 0.7 after 2", gs[0], f.requests.Load())
		}
		if f.got[0].Items[0].ID != f.got[1].Items[0].ID || f.got[1].Items[0].ID == "" {
			t.Errorf("the retry carries another key: %q then %q", f.got[0].Items[0].ID, f.got[1].Items[0].ID)
		}
	})
	for _, tt := range []struct {
		status    int
		permanent bool
		requests  int64
	}{
		{http.StatusServiceUnavailable, false, 3},
		{http.StatusInternalServerError, false, 3},
		{http.StatusBadGateway, false, 3},
		{http.StatusTooManyRequests, false, 3},
		{http.StatusBadRequest, true, 1},
		{http.StatusUnprocessableEntity, true, 1},
		{http.StatusNotFound, true, 1},
		{http.StatusNotImplemented, false, 1},
	} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, _ Request, _ int) {
				answer(w, tt.status, `{"error":"items[0].task: no task \"x\"\nin suite 7"}`)
			}})
			c := newClient(t, Config{URL: srv.URL})
			_, err := c.Grade(t.Context(), backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()})
			if err == nil {
				t.Fatal("no error")
			}
			if backend.IsPermanent(err) != tt.permanent || f.requests.Load() != tt.requests {
				t.Errorf("%v: permanent %v after %d requests, want %v after %d", err, backend.IsPermanent(err),
					f.requests.Load(), tt.permanent, tt.requests)
			}
			want := fmt.Sprintf("grade-http POST %s/grade: %d %s (%s): items[0].task: no task \"x\" in suite 7",
				srv.URL, tt.status, http.StatusText(tt.status), plural(int(tt.requests), "attempt"))
			if err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
	t.Run("no retries", func(t *testing.T) {
		srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, _ Request, _ int) { answer(w, 503, `{}`) }})
		c := newClient(t, Config{URL: srv.URL, Retries: -1})
		if _, err := c.Grade(t.Context(), backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()}); err == nil || f.requests.Load() != 1 {
			t.Errorf("error %v after %d requests, want an error after 1", err, f.requests.Load())
		}
	})
	t.Run("timeout is not retried", func(t *testing.T) {
		release := make(chan struct{})
		srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, _ Request, _ int) {
			<-release
			answer(w, 200, `[{"status":"valid","reward":1}]`)
		}})
		defer close(release)
		c := newClient(t, Config{URL: srv.URL, Timeout: 100 * time.Millisecond})
		_, err := c.Grade(t.Context(), backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()})
		if err == nil || backend.IsPermanent(err) || f.requests.Load() != 1 {
			t.Errorf("error %v after %d requests, want a plain error after 1", err, f.requests.Load())
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		c := newClient(t, Config{URL: url})
		_, err := c.Grade(t.Context(), backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()})
		if err == nil || backend.IsPermanent(err) || !strings.Contains(err.Error(), "grade-http POST "+url+"/grade (3 attempts)") {
			t.Errorf("error %v, want a plain error naming the URL after 3 attempts", err)
		}
	})
	t.Run("context cancelled while waiting", func(t *testing.T) {
		srv, _ := newFake(t, &fakeService{grade: func(w http.ResponseWriter, _ Request, _ int) {
			w.Header().Set("Retry-After", "60")
			answer(w, 503, `{}`)
		}})
		c := newClient(t, Config{URL: srv.URL, RetryWaitMin: time.Minute, RetryWaitMax: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Grade(ctx, backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
			t.Errorf("error %v after %v, want the context's deadline", err, time.Since(start))
		}
	})
}

func TestGradeRefusesItemWithoutKey(t *testing.T) {
	srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, _ Request, _ int) { answer(w, 200, `[]`) }})
	c := newClient(t, Config{URL: srv.URL})
	items := gradeItems(2)
	items[1].Key = ""
	_, err := c.Grade(t.Context(), backend.GradeRequest{Items: items, Limits: backend.DefaultLimits()})
	if !backend.IsPermanent(err) || !strings.Contains(err.Error(), "item 1 (task train-01): no idempotency key") || f.requests.Load() != 0 {
		t.Errorf("error %v after %d requests", err, f.requests.Load())
	}
	if gs, err := c.Grade(t.Context(), backend.GradeRequest{}); err != nil || len(gs) != 0 || f.requests.Load() != 0 {
		t.Errorf("empty batch: %v, %v after %d requests", gs, err, f.requests.Load())
	}
}

func TestScore(t *testing.T) {
	srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, req Request, _ int) {
		answer(w, 200, `[{"status":"valid","reward":0.62,"pos":0.24},{"status":"syntax_err","reward":0},
			{"status":"runtime_err","reward":0.1},{"status":"grade_error","reward":0}]`)
	}})
	c := newClient(t, Config{URL: srv.URL})
	items := make([]backend.ScoreItem, 4)
	for i := range items {
		items[i] = backend.ScoreItem{Task: backend.Task{Suite: 9, ID: "t", Prompt: "p"}, Solution: "s", Key: fmt.Sprint("k", i)}
	}
	ps, err := c.Score(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Prediction{{Graded: true, Score: 0.62, Status: "ok"}, {Graded: true, Score: 0, Status: "invalid_program"},
		{Graded: true, Score: 0.1, Status: "runtime_error"}, {}}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("prediction %d: %+v, want %+v", i, ps[i], want[i])
		}
	}
	it := f.got[0].Items[3]
	if !reflect.DeepEqual(it, Item{ID: "k3", RequestID: "k3", Action: "execute_code", Task: "t", Suite: u64(9), Code: "s", Overview: "p"}) {
		t.Errorf("world-model item on the wire: %+v", it)
	}
}

func TestCapacityAndPreflight(t *testing.T) {
	for _, tt := range []struct {
		health    string
		want      int
		wantError string // of Capacity, else of Preflight
	}{
		{`{"capacity": 8, "model": "x"}`, 8, ""},
		{`{"capacity": 0}`, 0, "capacity 0: the service grades nothing now"},
		{`{"inflight": 3}`, 0, "no capacity in the answer"},
		{`{"capacity": -2}`, 0, "capacity -2"},
		{`{"capacity": "lots"}`, 0, "cannot unmarshal"},
	} {
		srv, _ := newFake(t, &fakeService{health: func(w http.ResponseWriter) { answer(w, 200, tt.health) }})
		c := newClient(t, Config{URL: srv.URL})
		n, err := c.Capacity(t.Context())
		if err == nil {
			err = c.Preflight(t.Context(), backend.DefaultLimits())
		}
		if tt.wantError == "" {
			if err != nil || n != tt.want {
				t.Errorf("%s: capacity %d, %v; want %d", tt.health, n, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantError) || !strings.Contains(err.Error(), srv.URL+"/health") {
			t.Errorf("%s: error %v, want one naming %s/health and containing %q", tt.health, err, srv.URL, tt.wantError)
		}
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	c := newClient(t, Config{URL: srv.URL})
	if err := c.Preflight(t.Context(), backend.DefaultLimits()); err == nil || !strings.Contains(err.Error(), "GET "+srv.URL+"/health") {
		t.Errorf("unreachable service: %v", err)
	}
	bad := backend.DefaultLimits()
	bad.CPUs = 0
	var le *backend.LimitError
	if err := c.Preflight(t.Context(), bad); !errors.As(err, &le) || le.Field != backend.FieldCPUs {
		t.Errorf("bad limits: %v, want a *LimitError on %s", err, backend.FieldCPUs)
	}
}

func TestNewChecksURL(t *testing.T) {
	for _, tt := range []struct{ give, want string }{
		{"", "url: empty"},
		{"ftp://host/x", `scheme "ftp", want http or https`},
		{"http://", "no host"},
		{"http://host:1/?a=b", "no query or fragment"},
		{"http://user:hunter2@host:1/", "credentials in the URL are refused; set $WMRL_GRADER_TOKEN"},
		{"http://host:1/%zz", "url: not a URL"},
	} {
		_, err := New(Config{URL: tt.give})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v, want an error containing %q (and no password)", tt.give, err, tt.want)
		}
	}
	c, err := New(Config{URL: "https://grader.example:8443/wm/"})
	if err != nil || c.URL() != "https://grader.example:8443/wm" || c.String() != "grade-http https://grader.example:8443/wm" {
		t.Errorf("client %v, %v", c, err)
	}
	if _, err := New(Config{URL: "http://h", Token: "a\nb"}); err == nil || strings.Contains(err.Error(), "a\nb") {
		t.Errorf("token with a line break: %v", err)
	}
}

const secret = "s3cr3t-T0KEN-value"

// TestTokenRedaction checks that the token is sent, and is in no error
// message, no printed or marshalled Config and no log line, even when the
// service echoes it back.
func TestTokenRedaction(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request, status int) {
		if status == http.StatusInternalServerError { // a text answer
			w.WriteHeader(status)
			fmt.Fprintf(w, "bad header %s\n", r.Header.Get("Authorization"))
			return
		}
		b, _ := json.Marshal(ErrorBody{Error: "bad header " + r.Header.Get("Authorization")})
		answer(w, status, string(b))
	}
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			echo(w, r, http.StatusUnauthorized)
			return
		}
		switch mode.Load() {
		case "500":
			echo(w, r, http.StatusInternalServerError)
		case "service error":
			answer(w, 200, fmt.Sprintf(`{"error":"token %s rejected by upstream"}`, secret))
		case "health":
			answer(w, 200, fmt.Sprintf(`{"capacity": "%s"}`, secret))
		default:
			answer(w, 200, `[{"status":"valid","reward":0.9}]`)
		}
	}))
	defer srv.Close()

	cfg := DefaultConfig(srv.URL)
	if cfg.Token != "" {
		t.Fatalf("$%s is set in the test environment", TokenEnv)
	}
	t.Setenv(TokenEnv, secret)
	cfg = DefaultConfig(srv.URL)
	cfg.RetryWaitMin, cfg.RetryWaitMax = time.Millisecond, time.Millisecond
	c := newClient(t, cfg)
	req := backend.GradeRequest{Items: gradeItems(1), Limits: backend.DefaultLimits()}
	if _, err := c.Grade(t.Context(), req); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	var msgs []string
	for _, m := range []string{"500", "service error", "health"} {
		mode.Store(m)
		var err error
		if m == "health" {
			err = c.Preflight(t.Context(), backend.DefaultLimits())
		} else {
			_, err = c.Grade(t.Context(), req)
		}
		if err == nil {
			t.Fatalf("%s: no error", m)
		}
		msgs = append(msgs, err.Error())
	}
	mode.Store("")
	wrong := newClient(t, Config{URL: srv.URL, Token: "not-" + secret})
	_, err := wrong.Grade(t.Context(), req)
	if !backend.IsPermanent(err) || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("wrong token: %v, want a permanent 401", err)
	}
	msgs = append(msgs, err.Error())

	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logged), zap.DebugLevel))
	logger.Info("grader", zap.Any("config", cfg), zap.Stringer("client", c), zap.Any("token", cfg.Token))
	msgs = append(msgs, string(js), logged.String(), fmt.Sprintf("%v %+v %#v %s %q", cfg, cfg, cfg, cfg.Token, cfg.Token), c.String())
	for _, m := range msgs {
		if strings.Contains(m, secret) {
			t.Errorf("the token leaks: %s", m)
		}
	}
	if !strings.Contains(string(js), `"Token":"[redacted]"`) {
		t.Errorf("config JSON %s", js)
	}
	t.Log(strings.Join(msgs[:4], "\n"))
}

func u64(v uint64) *uint64 { return &v }

// A turn's action goes on its item (request_info or execute_code, "" being
// execute_code), and the reply's feedback is the grade's Feedback, the
// observation; an unknown action is refused before anything is sent.
func TestActionAndFeedback(t *testing.T) {
	srv, f := newFake(t, &fakeService{grade: func(w http.ResponseWriter, req Request, _ int) {
		answer(w, 200, `[{"action":"execute_code","status":"runtime_err","reward":0.1,"pos":null,
			"feedback":"Traceback: KeyError: 'y' [cut]","feedback_raw":"Traceback (most recent call last): ... KeyError: 'y'"},
			{"action":"request_info","status":"info","reward":0,"pos":null,"feedback":"DATA STRUCTURE: train.csv (91 rows)"},
			{"action":"execute_code","status":"valid","reward":0.7,"pos":0.4,"feedback":"scored"}]`)
	}})
	c := newClient(t, Config{URL: srv.URL})
	items := gradeItems(3)
	items[0].Action, items[1].Action, items[2].Action = backend.ActionExecuteCode, backend.ActionRequestInfo, ""
	gs, err := c.Grade(t.Context(), backend.GradeRequest{Items: items, Limits: backend.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{f.got[0].Items[0].Action, f.got[0].Items[1].Action, f.got[0].Items[2].Action}; !reflect.DeepEqual(got,
		[]string{ActionExecute, ActionRequestInfo, ActionExecute}) {
		t.Errorf("actions sent %v", got)
	}
	if g := gs[0]; g.Feedback != "Traceback: KeyError: 'y' [cut]" || g.Detail != "Traceback (most recent call last): ... KeyError: 'y'" {
		t.Errorf("grade 0: %+v", g)
	}
	if g := gs[1]; g.Graded || g.Feedback != "DATA STRUCTURE: train.csv (91 rows)" {
		t.Errorf("request_info: %+v, want ungraded with the data structure as its feedback", g)
	}
	if g := gs[2]; !g.Graded || g.Feedback != "scored" || g.Status != "ok" {
		t.Errorf("grade 2: %+v", g)
	}
	items[0].Action = "run_tests"
	if _, err := c.Grade(t.Context(), backend.GradeRequest{Items: items, Limits: backend.DefaultLimits()}); !backend.IsPermanent(err) ||
		!strings.Contains(err.Error(), `action "run_tests"`) || len(f.got) != 1 {
		t.Errorf("unknown action: %v after %d requests", err, len(f.got))
	}
}
