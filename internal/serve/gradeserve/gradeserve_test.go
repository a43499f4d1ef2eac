package gradeserve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/testenv"
	"github.com/wmrl/wmrl/internal/turns"
	"github.com/wmrl/wmrl/internal/worldmodel"
)

// executorBin is the real wmrl-executor, built once for the process
// sandbox.
var executorBin string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wmrl-gradeserve-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The process sandbox runs its child as an unprivileged user when the
	// tests run as root: it must reach the binary.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	executorBin = filepath.Join(dir, "wmrl-executor")
	cmd := exec.Command("go", "build", "-o", executorBin, "../../executor/wmrl-executor")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build executor: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// builtinBackend is the built-in backend over the small test suite, the
// embedded world model and sb.
func builtinBackend(t *testing.T, sb sandbox.Sandbox) builtin.Backend {
	t.Helper()
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	return builtin.New(testenv.Suites{}, wm, sb)
}

// serve serves a handler, as serve(t)(NewGrader(...)).
func serve(t *testing.T) func(http.Handler, error) *httptest.Server {
	return func(h http.Handler, err error) *httptest.Server {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
}

func newClient(t *testing.T, url string, token gradehttp.Token) *gradehttp.Client {
	t.Helper()
	c, err := gradehttp.New(gradehttp.Config{URL: url, Token: token, RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// items are the programs given on every task of the small suite, with keys.
func items(t *testing.T, programs ...string) []backend.GradeItem {
	t.Helper()
	tasks := &builtin.Tasks{Suites: testenv.Suites{}}
	var out []backend.GradeItem
	for _, split := range []backend.Split{backend.Train, backend.HeldOut} {
		ts, err := tasks.Tasks(t.Context(), testenv.SuiteSeed, split)
		if err != nil {
			t.Fatal(err)
		}
		s, err := testenv.SmallSuite()
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range ts {
			x, err := s.Task(task.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range append([]string{x.ExampleProgram}, programs...) {
				n := len(out)
				out = append(out, backend.GradeItem{Task: task, Solution: p, Seed: uint64(n), Key: backend.SampleKey("run", 1, n/4, n%4)})
			}
		}
	}
	return out
}

// sameVerdict reports whether two grades agree on everything but the
// timings.
// sameVerdict reports whether a grade over HTTP, a, is the in-process b
// with the observation's feedback the in-process grader's
// (turns.GraderAnswer), its timings aside.
func sameVerdict(a, b backend.Grade) bool {
	a.CPUSeconds, a.WallSeconds, b.CPUSeconds, b.WallSeconds = 0, 0, 0, 0
	b.Feedback = turns.GraderAnswer(b).Feedback
	return a == b && a.Feedback != ""
}

// TestGraderOverHTTP grades the same items with the built-in grader over
// the process sandbox in process, and through the handler with the
// gradehttp client: the verdicts are the same.
func TestGraderOverHTTP(t *testing.T) {
	sb, err := sandbox.NewProcess(executorBin)
	if err != nil {
		t.Fatal(err)
	}
	b := builtinBackend(t, sb)
	srv := serve(t)(NewGrader(b.Grader, b.Tasks, Options{Capacity: 2}))
	c := newClient(t, srv.URL, "")
	if err := c.Preflight(t.Context(), backend.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	lim := backend.DefaultLimits()
	// The verdicts over HTTP and in process must agree: a deadline a
	// machine shared with other work meets, so that neither times out.
	lim.Deadline = 5 * time.Minute
	for _, req := range []backend.GradeRequest{
		{Items: items(t, "ridge alpha=", "", "standardize | ridge alpha=1"), Limits: lim},
		// Refused by the budget without running: a timeout verdict.
		{Items: items(t, "standardize | ridge alpha=1")[:4], Limits: lim, Budget: 1e-9},
	} {
		want, err := b.Grader.Grade(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Grade(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		statuses := map[string]int{}
		for i := range want {
			statuses[got[i].Status]++
			if !sameVerdict(got[i], want[i]) {
				t.Errorf("item %d (%s on %s): over HTTP %+v, in process %+v", i, req.Items[i].Solution, req.Items[i].Task.ID, got[i], want[i])
			}
			if got[i].Status == "ok" && got[i].WallSeconds <= 0 {
				t.Errorf("item %d: no wall time over HTTP: %+v", i, got[i])
			}
		}
		t.Logf("budget %g: %d items, statuses %v", req.Budget, len(got), statuses)
		if req.Budget == 0 && (statuses["ok"] == 0 || statuses["invalid_program"] == 0) {
			t.Errorf("statuses %v: want both ok and invalid_program verdicts", statuses)
		}
		if req.Budget > 0 && statuses["timeout"] != len(got) {
			t.Errorf("statuses %v: want every item refused by the budget", statuses)
		}
	}
}

// TestWorldModelOverHTTP scores the same items with the built-in world
// model in process and through the handler: the same scores; a program the
// model cannot read is ungraded over HTTP.
func TestWorldModelOverHTTP(t *testing.T) {
	b := builtinBackend(t, nil)
	srv := serve(t)(NewWorldModel(b.WorldModel, b.Tasks, Options{Capacity: 3}))
	c := newClient(t, srv.URL, "")
	var in []backend.ScoreItem
	for _, it := range items(t, "standardize | ridge alpha=1", "knn k=5") {
		in = append(in, backend.ScoreItem{Task: it.Task, Solution: it.Solution, Key: it.Key})
	}
	want, err := b.WorldModel.Score(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Score(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	// The same scores, and the outcome the in-process model's answer
	// names: the status of its rung, the ladder's description.
	for i := range want {
		ans := turns.WorldModelAnswer(want[i])
		w := backend.Prediction{Graded: true, Score: want[i].Score, Status: ans.Status, Feedback: ans.Feedback}
		if got[i] != w || turns.WorldModelAnswer(got[i]) != ans {
			t.Errorf("item %d (%s): over HTTP %+v, in process %+v", i, in[i].Solution, got[i], want[i])
		}
	}
	bad := []backend.ScoreItem{in[0], {Task: in[1].Task, Solution: "ridge alpha=", Key: "k"}}
	if _, err := b.WorldModel.Score(t.Context(), bad); !backend.IsPermanent(err) {
		t.Fatalf("in process, an unreadable program: %v", err)
	}
	got, err = c.Score(t.Context(), bad)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Score != want[0].Score || !got[0].Graded || got[1].Graded {
		t.Errorf("over HTTP: %+v, want %+v and an ungraded prediction", got, want[0])
	}
}

func TestPredictionRungs(t *testing.T) {
	for _, tt := range []struct {
		give       float64
		wantStatus string
		wantPos    float64
	}{
		// turns.LadderStatus: halfway between the rungs.
		{0, "invalid_program", -1}, {0.049, "invalid_program", -1}, {0.05, "runtime_error", -1},
		{0.149, "runtime_error", -1}, {0.15, "invalid_output", -1}, {0.49, "invalid_output", -1},
		{0.5, "ok", 0}, {0.75, "ok", 0.5}, {1, "ok", 1},
	} {
		r := predictionResult("k", backend.Prediction{Graded: true, Score: tt.give})
		if r.Status != tt.wantStatus || *r.Reward != tt.give || r.Feedback != turns.Describe(tt.wantStatus) || (tt.wantPos < 0) != (r.Pos == nil) || (r.Pos != nil && *r.Pos != tt.wantPos) {
			t.Errorf("%v: %+v", tt.give, r)
		}
	}
	if r := predictionResult("k", backend.Prediction{}); r.Status != backend.StatusUngraded || r.Reward != nil {
		t.Errorf("ungraded: %+v", r)
	}
}

// someUngraded gives no verdict on the items whose key ends in sample-1.
type someUngraded struct{ backend.Grader }

func (g someUngraded) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	gs, err := g.Grader.Grade(ctx, req)
	for i, it := range req.Items {
		if err == nil && strings.HasSuffix(it.Key, "sample-1") {
			gs[i] = backend.Grade{Status: backend.StatusUngraded, Detail: "no slot", WallSeconds: 0.5}
		}
	}
	return gs, err
}

func TestUngradedStaysUngraded(t *testing.T) {
	b := builtinBackend(t, &testenv.InProcess{})
	srv := serve(t)(NewGrader(someUngraded{b.Grader}, b.Tasks, Options{Capacity: 2}))
	req := backend.GradeRequest{Items: items(t, "ridge alpha=", "standardize | ridge alpha=1")[:6], Limits: backend.DefaultLimits()}
	gs, err := newClient(t, srv.URL, "").Grade(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gs {
		ungraded := strings.HasSuffix(req.Items[i].Key, "sample-1")
		if g.Graded == ungraded || (ungraded && (g.Status != backend.StatusUngraded || g.Score != 0 || g.WallSeconds != 0.5)) {
			t.Errorf("item %d (%s): %+v", i, req.Items[i].Key, g)
		}
	}
}

// TestGraderFailure: a sandbox that fails once makes the handler answer
// 500, which the client retries; without retries it is a plain error.
func TestGraderFailure(t *testing.T) {
	sb := &testenv.InProcess{}
	b := builtinBackend(t, sb)
	srv := serve(t)(NewGrader(b.Grader, b.Tasks, Options{Capacity: 1}))
	req := backend.GradeRequest{Items: items(t)[:1], Limits: backend.DefaultLimits()}
	want, err := b.Grader.Grade(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	sb.FailNext(1)
	got, err := newClient(t, srv.URL, "").Grade(t.Context(), req)
	if err != nil || !sameVerdict(got[0], want[0]) {
		t.Errorf("after one sandbox failure: %+v, %v; want %+v", got, err, want[0])
	}
	sb.FailNext(1)
	c, err := gradehttp.New(gradehttp.Config{URL: srv.URL, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Grade(t.Context(), req)
	if err == nil || backend.IsPermanent(err) || !strings.Contains(err.Error(), "500 Internal Server Error (1 attempt): grader: items[0]: ") ||
		!strings.Contains(err.Error(), "sandbox down") {
		t.Errorf("error %v, want a plain error with the 500 and the grader's failure", err)
	}
}

func TestBadRequests(t *testing.T) {
	sb := &testenv.InProcess{}
	b := builtinBackend(t, sb)
	h, err := NewGrader(b.Grader, b.Tasks, Options{Capacity: 2, MaxBodyBytes: 4096, MaxItems: 3})
	srv := serve(t)(h, err)
	task := items(t)[0].Task.ID
	good := fmt.Sprintf(`{"id":"k","task":%q,"suite":7,"code":"ridge alpha=1"}`, task)
	for _, tt := range []struct {
		method, path, body string
		wantStatus         int
		want               string
	}{
		{"POST", "/grade", `{"items": [`, 400, "body: not a JSON object with items"},
		{"POST", "/grade", `[]`, 400, "body: not a JSON object with items"},
		{"POST", "/grade", `{"item": []}`, 400, "items: missing"},
		{"POST", "/grade", `{"items": [` + good + `,` + good + `,` + good + `,` + good + `]}`, 400, "items: 4 items, at most 3"},
		{"POST", "/grade", `{"items": [` + good + `, 5]}`, 400, "items[1]: json: cannot unmarshal number"},
		{"POST", "/grade", `{"items": [` + good + `, {"id":"x","suite":7}]}`, 400, "items[1].task: missing"},
		{"POST", "/grade", `{"items": [` + good + `, {"id":"x","task":"nope","suite":7}]}`, 400, `items[1].task: `},
		{"POST", "/grade", `{"items": [{"id":"x","task":"` + task + `","suite":7,"action":"submit"}]}`, 400,
			`items[0].action: "submit", want "execute_code" or "request_info"`},
		{"POST", "/grade", `{"items": [` + good + `, {"id":"x","task":"` + task + `"}]}`, 400,
			"items[1].suite: missing, and this server has no default suite"},
		{"POST", "/grade", `{"items": [{"id":"x","task":"` + task + `","suite":7,"limits":{"execution_timeout":-5}}]}`, 400,
			"items[0].limits.execution_timeout: -5, want a number > 0"},
		{"POST", "/grade", `{"items": [{"id":"x","task":"` + task + `","suite":7,"limits":{"memory_limit":0.001}}]}`, 400,
			"items[0].limits: sandbox.memory"},
		{"POST", "/grade", `{"items": [{"id":"x","task":"` + task + `","suite":7,"budget":-1}]}`, 400, "items[0].budget: -1"},
		{"POST", "/grade", `{"items": [{"id":"x","task":"` + task + `","suite":7,"limits":{"memory_bytes":536870912,"cpus":0,"pids":64,"deadline_seconds":30}}]}`,
			400, "items[0].limits: sandbox.cpus: 0 is not a positive number"},
		{"POST", "/grade", `{"items": [{"id":"x","task":"` + task + `","suite":7,"code":"` + strings.Repeat("a", 5000) + `"}]}`, 413, "body: larger than 4096 bytes"},
		{"GET", "/grade", ``, 405, ""},
		{"POST", "/health", `{}`, 405, ""},
		{"GET", "/nothing", ``, 404, ""},
	} {
		req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e gradehttp.ErrorBody
		if json.Unmarshal(body, &e) == nil {
			body = []byte(e.Error)
		}
		if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s %s %.80s: %d %s, want %d with %q", tt.method, tt.path, tt.body, resp.StatusCode, body, tt.wantStatus, tt.want)
		}
	}
	if sb.Runs() != 0 {
		t.Errorf("%d executions for requests refused whole", sb.Runs())
	}
	// Through the client: an unknown task is permanent, naming the item.
	it := items(t)[:2]
	it[1].Task.ID = "train-99"
	_, err = newClient(t, srv.URL, "").Grade(t.Context(), backend.GradeRequest{Items: it, Limits: backend.DefaultLimits()})
	if !backend.IsPermanent(err) || !strings.Contains(err.Error(), "400 Bad Request (1 attempt): items[1].task: ") {
		t.Errorf("unknown task: %v", err)
	}
}

func TestToken(t *testing.T) {
	const token = "tok-3f9a-SECRET"
	b := builtinBackend(t, &testenv.InProcess{})
	srv := serve(t)(NewGrader(b.Grader, b.Tasks, Options{Capacity: 1, Token: token}))
	req := backend.GradeRequest{Items: items(t)[:1], Limits: backend.DefaultLimits()}
	if _, err := newClient(t, srv.URL, token).Grade(t.Context(), req); err != nil {
		t.Errorf("with the token: %v", err)
	}
	if n, err := newClient(t, srv.URL, "").Capacity(t.Context()); err != nil || n != 1 {
		t.Errorf("/health without the token: %d, %v", n, err)
	}
	for _, give := range []gradehttp.Token{"", "wrong-" + token, gradehttp.Token(token[:len(token)-1])} {
		_, err := newClient(t, srv.URL, give).Grade(t.Context(), req)
		if !backend.IsPermanent(err) || !strings.Contains(err.Error(), "401 Unauthorized (1 attempt): missing or wrong bearer token") ||
			strings.Contains(err.Error(), "SECRET") {
			t.Errorf("token %q: %v", give, err)
		}
	}
}

// gate is a grader that blocks each item until released, recording how
// many run at once.
type gate struct {
	mu          sync.Mutex
	now, most   int
	started     chan struct{}
	release     chan struct{}
	total       atomic.Int64
	gradeResult backend.Grade
}

func (g *gate) Grade(ctx context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	g.total.Add(1)
	return []backend.Grade{{Graded: true, Status: "ok", Score: 0.5}}, nil
}

func (g *gate) Preflight(context.Context, backend.Limits) error { return nil }

func TestCapacityBoundsConcurrency(t *testing.T) {
	const capacity = 3
	g := &gate{started: make(chan struct{}, 100), release: make(chan struct{})}
	srv := serve(t)(NewGrader(g, &builtin.Tasks{Suites: testenv.Suites{}}, Options{Capacity: capacity}))
	c := newClient(t, srv.URL, "")
	if n, err := c.Capacity(t.Context()); err != nil || n != capacity {
		t.Fatalf("capacity %d, %v", n, err)
	}
	all := items(t, "knn k=5")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for r := 0; r < 2; r++ {
		wg.Go(func() {
			_, err := c.Grade(t.Context(), backend.GradeRequest{Items: all[r*5 : r*5+5], Limits: backend.DefaultLimits()})
			errs <- err
		})
	}
	// Let the first capacity items start, check that no more do, then
	// release them all.
	for range capacity {
		<-g.started
	}
	select {
	case <-g.started:
		t.Errorf("more than %d items started at once", capacity)
	case <-time.After(200 * time.Millisecond):
	}
	close(g.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if g.most != capacity || g.total.Load() != 10 {
		t.Errorf("at most %d at once over %d items, want %d over 10", g.most, g.total.Load(), capacity)
	}
}

func TestOptions(t *testing.T) {
	b := builtinBackend(t, &testenv.InProcess{})
	if _, err := NewGrader(b.Grader, b.Tasks, Options{}); err == nil || !strings.Contains(err.Error(), "capacity 0") {
		t.Errorf("capacity 0: %v", err)
	}
	if _, err := NewWorldModel(nil, b.Tasks, Options{Capacity: 1}); err == nil {
		t.Error("no world model: no error")
	}
}

// nanModel is a broken world model that predicts NaN.
type nanModel struct{}

func (nanModel) Score(_ context.Context, items []backend.ScoreItem) ([]backend.Prediction, error) {
	out := make([]backend.Prediction, len(items))
	for i := range out {
		out[i] = backend.Prediction{Graded: true, Score: math.NaN()}
	}
	return out, nil
}

func TestUnencodableAnswer(t *testing.T) {
	b := builtinBackend(t, nil)
	srv := serve(t)(NewWorldModel(nanModel{}, b.Tasks, Options{Capacity: 1}))
	c, err := gradehttp.New(gradehttp.Config{URL: srv.URL, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	it := items(t)[0]
	_, err = c.Score(t.Context(), []backend.ScoreItem{{Task: it.Task, Solution: it.Solution, Key: it.Key}})
	if err == nil || backend.IsPermanent(err) || !strings.Contains(err.Error(), "500 Internal Server Error (1 attempt): encode answer: json: unsupported value: NaN") {
		t.Errorf("NaN prediction: %v", err)
	}
}

// TestNoSuiteIsNotSuiteZero: an item naming no suite is graded against
// the server's own suite when it has one, and refused naming the field
// when it has none; never against suite 0's task of the same id.
func TestNoSuiteIsNotSuiteZero(t *testing.T) {
	wm, err := worldmodel.Default()
	if err != nil {
		t.Fatal(err)
	}
	b := builtin.New(twoSuites{}, wm, &testenv.InProcess{})
	it := items(t)[0]
	body := fmt.Sprintf(`{"items": [{"id":"k","task":%q,"code":%q,"limits":{"execution_timeout":300}}]}`, it.Task.ID, it.Solution)
	post := func(srv *httptest.Server) (int, string) {
		resp, err := http.Post(srv.URL+"/grade", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The program is the panel's best on the task of suite 7: position 1.
	seven := uint64(testenv.SuiteSeed)
	code, got := post(serve(t)(NewGrader(b.Grader, b.Tasks, Options{Capacity: 1, Suite: &seven})))
	var res []gradehttp.Result
	if code != 200 || json.Unmarshal([]byte(got), &res) != nil || len(res) != 1 || res[0].Reward == nil || *res[0].Reward != 1 {
		t.Errorf("default suite %d: %d %s, want reward 1", seven, code, got)
	}
	code, got = post(serve(t)(NewGrader(b.Grader, b.Tasks, Options{Capacity: 1})))
	if code != 400 || !strings.Contains(got, "items[0].suite: missing") {
		t.Errorf("no default suite: %d %s, want a 400 naming items[0].suite", code, got)
	}
}

// TestReferenceItems replays the reference's item shapes
// (testdata/README.md) against the grader and the world model of a server
// whose suite is the test suite: its limit keys are read, request_info is
// answered with the data structure and runs nothing.
func TestReferenceItems(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "reference_items.json"))
	if err != nil {
		t.Fatal(err)
	}
	seven := uint64(testenv.SuiteSeed)
	sb := &testenv.InProcess{}
	b := builtinBackend(t, sb)
	post := func(srv *httptest.Server, body string) []map[string]any {
		t.Helper()
		resp, err := http.Post(srv.URL+"/grade", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var res []map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
		return res
	}
	grader := serve(t)(NewGrader(b.Grader, b.Tasks, Options{Capacity: 2, Suite: &seven}))
	wm := serve(t)(NewWorldModel(b.WorldModel, b.Tasks, Options{Capacity: 2, Suite: &seven}))
	checkInfo := func(name string, r map[string]any) {
		fb, _ := r["feedback"].(string)
		if r["action"] != "request_info" || r["status"] != "info" || r["reward"] != 0.0 || r["pos"] != nil ||
			r["compiles"] != true || r["feedback_raw"] != fb ||
			!strings.Contains(fb, "train (91 rows)") || !strings.Contains(fb, "test (60 rows)") || !strings.Contains(fb, "[x0 x1 x2 x3]") {
			t.Errorf("%s: request_info answered %v", name, r)
		}
	}
	res := post(grader, string(body))
	if len(res) != 3 || res[0]["status"] != "ok" || res[0]["reward"] != 1.0 || res[0]["action"] != "execute_code" ||
		res[2]["status"] != "invalid_program" || res[2]["reward"] != 0.0 {
		t.Errorf("grader: %v", res)
	}
	for _, r := range res {
		if _, ok := r["feedback"]; !ok {
			t.Errorf("grader: no feedback in %v (the reference's loop reads it)", r)
		}
	}
	checkInfo("grader", res[1])
	runs := sb.Runs()
	var req struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	checkInfo("grader alone", post(grader, `{"items": [`+string(req.Items[1])+`]}`)[0])
	if sb.Runs() != runs {
		t.Errorf("request_info ran %d executions", sb.Runs()-runs)
	}
	res = post(wm, string(body))
	if len(res) != 3 || res[0]["status"] != "ok" || res[2]["status"] != backend.StatusUngraded {
		t.Errorf("world model: %v", res)
	}
	checkInfo("world model", res[1])
}

// instant grades every item at once, counting them.
type instant struct{ total atomic.Int64 }

func (g *instant) Grade(_ context.Context, req backend.GradeRequest) ([]backend.Grade, error) {
	g.total.Add(int64(len(req.Items)))
	out := make([]backend.Grade, len(req.Items))
	for i := range out {
		out[i] = backend.Grade{Graded: true, Status: "ok", Score: 0.5}
	}
	return out, nil
}

func (g *instant) Preflight(context.Context, backend.Limits) error { return nil }

// TestItemTimeDelaysTheAnswer: with Options.ItemTime (wmrl serve
// --grade-time) a batch of 5 items at capacity 2 takes at least 3 item
// times, since each item holds its slot for one; the grader still grades
// every item. Only a lower bound: a loaded machine is slower, never faster.
func TestItemTimeDelaysTheAnswer(t *testing.T) {
	const item = 150 * time.Millisecond
	g := &instant{}
	srv := serve(t)(NewGrader(g, &builtin.Tasks{Suites: testenv.Suites{}}, Options{Capacity: 2, ItemTime: item}))
	c := newClient(t, srv.URL, "")
	all := items(t)[:5]
	start := time.Now()
	got, err := c.Grade(t.Context(), backend.GradeRequest{Items: all, Limits: backend.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 3*item {
		t.Fatalf("5 items at capacity 2 took %v, want at least 3 × the item time %v", took, item)
	}
	if len(got) != 5 || g.total.Load() != 5 {
		t.Fatalf("%d grades, %d graded; want 5, 5", len(got), g.total.Load())
	}
}
