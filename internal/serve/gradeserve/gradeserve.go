// Package gradeserve serves the /grade protocol (package gradehttp) for
// wmrl's own grader and world model: GET /health answers the capacity and
// POST /grade grades a batch of items, one result per item in order, as
// the reference implementation's sandbox and world-model servers do. wmrl
// serve mounts both; the gradehttp client is tested against them.
//
// Each item is graded on its own, at most Capacity items at once across
// all requests (the capacity /health advertises). A request is checked
// whole before anything runs: bad JSON, a missing field, an unknown task or
// a limit out of bounds is a 400 naming the field and the item's index,
// and nothing is graded. A failure of the grader itself (a sandbox that
// does not answer) is a 500, which clients retry. With a token, /grade
// requires "Authorization: Bearer TOKEN" (401 otherwise); /health is open.
//
// Items in the reference's shape are served too (docs/design.md, "The
// remote adapters"): an item without a suite is graded against
// Options.Suite, and refused naming items[i].suite when there is none;
// the reference's limit keys lower wmrl's limits (Limits.Resolve);
// "action": "request_info" is answered with the task's data structure
// (Describer) without grading anything.
//
// The grader answers wmrl's status words (ok, invalid_program,
// runtime_error, timeout, memory, invalid_output) with the executor's
// reward, position, metric and timings; its feedback is the observation a
// policy's next turn shows, the one the in-process grader gives
// (turns.GraderAnswer: the grader's own feedback, else the ladder's
// description of the status), and the executor's detail is feedback_raw.
// The world model answers the rung its predicted reward falls on
// (turns.LadderStatus; ok with pos = 2·reward − 1 from 0.5 up), the reward
// being the prediction itself, the feedback the ladder's description of
// that rung, as the in-process world model's observation has them;
// a program it cannot read is "ungraded", with the reason as feedback.
package gradeserve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/backend/gradehttp"
	"github.com/wmrl/wmrl/internal/serve/servicetime"
	"github.com/wmrl/wmrl/internal/turns"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 32 << 20
	DefaultMaxItems     = 4096
)

// Options configure a handler.
type Options struct {
	// Capacity is how many items are graded at once, at least 1.
	Capacity int
	// Token, when set, is the bearer token POST /grade requires.
	Token gradehttp.Token
	// MaxBodyBytes bounds a request's body and MaxItems its items (0:
	// the defaults).
	MaxBodyBytes int64
	MaxItems     int
	// Logger receives the grader's failures (nil: none). It never sees a
	// token.
	Logger *zap.Logger
	// Suite is the suite of an item that names none (the reference's
	// clients never do); nil: such an item is refused, naming its suite.
	Suite *uint64
	// ItemTime is a service time spent on each graded item (not on a
	// request_info item) while it holds its capacity slot, before it is
	// graded: it emulates a sandbox's time on a machine whose executions
	// are quicker (wmrl serve --grade-time), so a batch of N items at
	// capacity C takes at least ceil(N/C)·ItemTime. 0 spends none.
	ItemTime time.Duration
}

// Describer is a task source that describes a task's data: the answer to
// a request_info item (builtin.Tasks is one). A source that is not gets
// the task's id, split and prompt.
type Describer interface {
	DescribeData(ctx context.Context, suite uint64, id string) (string, error)
}

// gradeFunc grades one checked item of a known task.
type gradeFunc func(ctx context.Context, task backend.Task, it gradehttp.Item, limits backend.Limits) (gradehttp.Result, error)

// server is one service: a grader or a world model behind /health and
// /grade.
type server struct {
	name   string // "grader" or "world model", for messages
	tasks  backend.TaskSource
	grade  gradeFunc
	o      Options
	slots  chan struct{} // one per item being graded
	active atomic.Int64
	mux    *http.ServeMux
}

// NewGrader returns the handler of GET /health and POST /grade for g; each
// item's task is looked up in tasks by (suite, task).
func NewGrader(g backend.Grader, tasks backend.TaskSource, o Options) (http.Handler, error) {
	if g == nil || tasks == nil {
		return nil, errors.New("gradeserve: a grader and a task source are required")
	}
	grade := func(ctx context.Context, task backend.Task, it gradehttp.Item, limits backend.Limits) (gradehttp.Result, error) {
		gs, err := g.Grade(ctx, backend.GradeRequest{
			Items:  []backend.GradeItem{{Task: task, Solution: it.Code, Seed: it.Seed, Key: it.ID}},
			Limits: limits, Budget: it.Budget})
		if err != nil {
			return gradehttp.Result{}, err
		}
		if len(gs) != 1 {
			return gradehttp.Result{}, fmt.Errorf("grader returned %d grades for 1 item", len(gs))
		}
		res := gradehttp.ResultOf(it.ID, gs[0])
		// The feedback is the observation the policy's next turn shows,
		// as in process: the grader's own text, else the ladder's
		// description of the status; the executor's detail stays in
		// feedback_raw.
		res.Feedback = turns.GraderAnswer(gs[0]).Feedback
		return res, nil
	}
	return newServer("grader", tasks, grade, o)
}

// NewWorldModel returns the handler of GET /health and POST /grade for a
// world model: the reward of each result is its prediction.
func NewWorldModel(wm backend.WorldModel, tasks backend.TaskSource, o Options) (http.Handler, error) {
	if wm == nil || tasks == nil {
		return nil, errors.New("gradeserve: a world model and a task source are required")
	}
	grade := func(ctx context.Context, task backend.Task, it gradehttp.Item, _ backend.Limits) (gradehttp.Result, error) {
		ps, err := wm.Score(ctx, []backend.ScoreItem{{Task: task, Solution: it.Code, Key: it.ID}})
		if backend.IsPermanent(err) {
			// The model cannot read this program: no prediction for it.
			return gradehttp.Result{ID: it.ID, Status: backend.StatusUngraded, Feedback: err.Error()}, nil
		}
		if err != nil {
			return gradehttp.Result{}, err
		}
		if len(ps) != 1 {
			return gradehttp.Result{}, fmt.Errorf("world model returned %d predictions for 1 item", len(ps))
		}
		return predictionResult(it.ID, ps[0]), nil
	}
	return newServer("world model", tasks, grade, o)
}

// predictionResult puts a prediction on the rung its score falls on, as
// the in-process world model's answer does (turns.WorldModelAnswer: its
// own status, else turns.LadderStatus), with pos = 2·reward − 1 for ok,
// and the answer's feedback: the predicted observation, in the grader's
// words.
func predictionResult(id string, p backend.Prediction) gradehttp.Result {
	if !p.Graded {
		return gradehttp.Result{ID: id, Status: backend.StatusUngraded}
	}
	a := turns.WorldModelAnswer(p)
	v := a.Score
	r := gradehttp.Result{ID: id, Status: a.Status, Reward: &v, Feedback: a.Feedback}
	if a.Status == "ok" {
		pos := min(1, max(0, 2*v-1))
		r.Pos = &pos
	}
	return r
}

func newServer(name string, tasks backend.TaskSource, grade gradeFunc, o Options) (*server, error) {
	if o.Capacity < 1 {
		return nil, fmt.Errorf("gradeserve: capacity %d, want at least 1", o.Capacity)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxItems <= 0 {
		o.MaxItems = DefaultMaxItems
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	s := &server{name: name, tasks: tasks, grade: grade, o: o, slots: make(chan struct{}, o.Capacity), mux: http.NewServeMux()}
	s.mux.HandleFunc("GET "+gradehttp.PathHealth, s.health)
	s.mux.HandleFunc("POST "+gradehttp.PathGrade, s.gradeBatch)
	return s, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// healthBody is the answer of /health: the capacity, and what is running.
type healthBody struct {
	Capacity int    `json:"capacity"`
	Active   int64  `json:"active"`
	Service  string `json:"service"`
}

func (s *server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, healthBody{Capacity: s.o.Capacity, Active: s.active.Load(), Service: s.name})
}

// requestError is an answer other than 200: its status and message.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func (s *server) gradeBatch(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wmrl"`)
		writeJSON(w, http.StatusUnauthorized, gradehttp.ErrorBody{Error: "missing or wrong bearer token"})
		return
	}
	results, err := s.run(r)
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) {
			re = &requestError{status: http.StatusInternalServerError, msg: s.name + ": " + err.Error()}
			s.o.Logger.Warn("grading failed", zap.String("service", s.name), zap.Error(err))
		}
		writeJSON(w, re.status, gradehttp.ErrorBody{Error: re.msg})
		return
	}
	writeJSON(w, http.StatusOK, results)
}

// authorized reports whether r carries the token, if one is required.
func (s *server) authorized(r *http.Request) bool {
	if s.o.Token == "" {
		return true
	}
	want := []byte("Bearer " + string(s.o.Token))
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) == 1
}

// checked is an item ready to grade.
type checked struct {
	item   gradehttp.Item
	task   backend.Task
	limits backend.Limits
	// info is the data structure of a request_info item, which is
	// answered without grading.
	info string
}

// run reads, checks and grades a request.
func (s *server) run(r *http.Request) ([]gradehttp.Result, error) {
	items, err := s.read(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	todo := make([]checked, len(items))
	for i, it := range items {
		if todo[i], err = s.check(ctx, i, it); err != nil {
			return nil, err
		}
	}
	results := make([]gradehttp.Result, len(todo))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range todo {
		if c.item.Action == gradehttp.ActionRequestInfo {
			results[i] = infoResult(c.item.ID, c.info)
			continue
		}
		g.Go(func() error {
			select {
			case s.slots <- struct{}{}:
			case <-gctx.Done():
				return gctx.Err()
			}
			s.active.Add(1)
			defer func() {
				s.active.Add(-1)
				<-s.slots
			}()
			if err := servicetime.Wait(gctx, "grade time", s.o.ItemTime); err != nil {
				return err
			}
			res, err := s.grade(gctx, c.task, c.item, c.limits)
			if backend.IsPermanent(err) {
				return badRequest("items[%d]: %v", i, err)
			}
			if err != nil {
				return fmt.Errorf("items[%d]: %w", i, err)
			}
			res.Action = gradehttp.ActionExecute
			results[i] = res
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return results, nil
}

// read decodes the body's items.
func (s *server) read(r *http.Request) ([]gradehttp.Item, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.o.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &requestError{status: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("body: larger than %d bytes", s.o.MaxBodyBytes)}
	case err != nil:
		return nil, badRequest("body: %v", err)
	}
	var req struct {
		Items *[]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badRequest("body: not a JSON object with items: %v", err)
	}
	switch {
	case req.Items == nil:
		return nil, badRequest("items: missing")
	case len(*req.Items) > s.o.MaxItems:
		return nil, badRequest("items: %d items, at most %d", len(*req.Items), s.o.MaxItems)
	}
	items := make([]gradehttp.Item, len(*req.Items))
	for i, raw := range *req.Items {
		if err := json.Unmarshal(raw, &items[i]); err != nil {
			return nil, badRequest("items[%d]: %v", i, err)
		}
	}
	return items, nil
}

// check checks one item and looks up its task.
func (s *server) check(ctx context.Context, i int, it gradehttp.Item) (checked, error) {
	if it.ID == "" {
		it.ID = it.RequestID
	}
	if it.Action == "" {
		it.Action = gradehttp.ActionExecute
	}
	switch {
	case it.Action != gradehttp.ActionExecute && it.Action != gradehttp.ActionRequestInfo:
		return checked{}, badRequest("items[%d].action: %q, want %q or %q", i, clip(it.Action),
			gradehttp.ActionExecute, gradehttp.ActionRequestInfo)
	case it.Task == "":
		return checked{}, badRequest("items[%d].task: missing", i)
	case it.Suite == nil && s.o.Suite == nil:
		return checked{}, badRequest("items[%d].suite: missing, and this server has no default suite", i)
	case math.IsNaN(it.Budget) || math.IsInf(it.Budget, 0) || it.Budget < 0:
		return checked{}, badRequest("items[%d].budget: %v, want a number >= 0", i, it.Budget)
	}
	suite := s.o.Suite
	if it.Suite != nil {
		suite = it.Suite
	}
	c := checked{item: it, limits: backend.DefaultLimits()}
	if it.Limits != nil {
		l, err := it.Limits.Resolve(backend.DefaultLimits())
		if err != nil {
			return checked{}, badRequest("items[%d].limits.%v", i, err)
		}
		if err := l.Check(); err != nil {
			return checked{}, badRequest("items[%d].limits: %v", i, err)
		}
		c.limits = l
	}
	task, err := s.tasks.Task(ctx, *suite, it.Task)
	if backend.IsPermanent(err) {
		return checked{}, badRequest("items[%d].task: %v", i, err)
	}
	if err != nil {
		return checked{}, fmt.Errorf("items[%d]: task %s of suite %d: %w", i, clip(it.Task), *suite, err)
	}
	c.task = task
	if it.Action == gradehttp.ActionRequestInfo {
		if c.info, err = s.describe(ctx, task); err != nil {
			return checked{}, fmt.Errorf("items[%d]: describe task %s of suite %d: %w", i, clip(it.Task), *suite, err)
		}
	}
	return c, nil
}

// describe is a task's data structure, for request_info.
func (s *server) describe(ctx context.Context, task backend.Task) (string, error) {
	if d, ok := s.tasks.(Describer); ok {
		return d.DescribeData(ctx, task.Suite, task.ID)
	}
	info := fmt.Sprintf("DATA STRUCTURE (read-only info):\nTask %s of suite %d (%s split).", task.ID, task.Suite, task.Split)
	if task.Prompt != "" {
		info += "\n" + task.Prompt
	}
	return info, nil
}

// infoResult is the answer to a request_info item, in the reference's
// shape: status "info", reward 0, no position, the data structure as the
// feedback.
func infoResult(id, info string) gradehttp.Result {
	zero, compiles := 0.0, true
	return gradehttp.Result{ID: id, Action: gradehttp.ActionRequestInfo, Status: gradehttp.StatusInfo, Reward: &zero,
		Feedback: info, FeedbackRaw: &info, Compiles: &compiles}
}

// writeJSON answers v; a value JSON cannot hold (a NaN score of a broken
// grader) is a 500 saying so, never a truncated 200.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(gradehttp.ErrorBody{Error: "encode answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// clip shortens a value quoted in an answer.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
