package gradehttp

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/wmrl/wmrl/internal/backend"
)

// Endpoint paths, under a service's base URL.
const (
	PathHealth = "/health"
	PathGrade  = "/grade"
)

// The actions of an item: ActionExecute (the reference's "execute_code",
// the action of a single-shot item and of a turn that runs its program)
// grades the code; ActionRequestInfo
// (the reference's "request_info") asks for the task's data structure and
// runs nothing.
const (
	ActionExecute     = "execute_code"
	ActionRequestInfo = "request_info"
)

// StatusInfo is the status of the answer to a request_info item (no
// verdict: its reward is 0 and its feedback is the data structure).
const StatusInfo = "info"

// Request is the body of POST /grade.
type Request struct {
	Items []Item `json:"items"`
}

// Item is one solution to grade (see the package doc).
type Item struct {
	// ID and RequestID both hold the idempotency key.
	ID        string `json:"id"`
	RequestID string `json:"request_id,omitempty"`
	Action    string `json:"action"`
	Task      string `json:"task"`
	// Suite names the task's suite; nil (absent) is the server's own
	// suite, and refused by a server that has none.
	Suite *uint64 `json:"suite"`
	// DataDir is the reference's path of the task's data on its grading
	// node; wmrl's services own their data and do not read it.
	DataDir string `json:"data_dir,omitempty"`
	Code    string `json:"code"`
	Seed    uint64 `json:"seed"`
	// Overview is the task as the agent saw it (Overview), sent on every
	// item: the reference's world-model server requires it.
	Overview string  `json:"overview"`
	Budget   float64 `json:"budget,omitempty"`
	Limits   *Limits `json:"limits,omitempty"`
}

// Overview is a task's overview on the wire: its prompt, or, for a task
// without one (the built-in suite's), a sentence naming it.
func Overview(t backend.Task) string {
	if t.Prompt != "" {
		return t.Prompt
	}
	return fmt.Sprintf("Task %s of the built-in suite %d (%s split).", t.ID, t.Suite, t.Split)
}

// actionOf is an item's action on the wire: backend's action words are
// the reference's; "" is ActionExecute. Another is an error.
func actionOf(a string) (string, error) {
	switch a {
	case "", backend.ActionExecuteCode:
		return ActionExecute, nil
	case backend.ActionRequestInfo:
		return ActionRequestInfo, nil
	}
	return "", fmt.Errorf("action %q, want %q or %q", clip(a), backend.ActionExecuteCode, backend.ActionRequestInfo)
}

// Limits are backend.Limits on the wire, the deadline in seconds, and the
// reference's own limit keys (agentic_grader's DEFAULT_LIMITS), which a
// reference client sends instead.
type Limits struct {
	MemoryBytes     int64   `json:"memory_bytes"`
	CPUs            float64 `json:"cpus"`
	Pids            int64   `json:"pids"`
	DeadlineSeconds float64 `json:"deadline_seconds"`

	// ExecutionTimeout is the reference's wall-clock limit in seconds and
	// MemoryLimitGB its memory limit in GB (10⁹ bytes).
	ExecutionTimeout *float64 `json:"execution_timeout,omitempty"`
	MemoryLimitGB    *float64 `json:"memory_limit,omitempty"`
	// CPUTimeLimit (CPU seconds) and GPUMemoryLimitGB have no counterpart
	// in wmrl's sandbox (it bounds CPUs and wall time, and has no GPU):
	// they are read, checked and not enforced.
	CPUTimeLimit     *float64 `json:"cpu_time_limit,omitempty"`
	GPUMemoryLimitGB *float64 `json:"gpu_memory_limit,omitempty"`

	// native reports whether the body held any of wmrl's own keys.
	native bool
}

// nativeKeys are wmrl's limit keys.
var nativeKeys = []string{"memory_bytes", "cpus", "pids", "deadline_seconds"}

// UnmarshalJSON reads the limits and which of wmrl's keys they hold. Keys
// neither wmrl nor the reference knows are ignored, as the reference's
// grader ignores keys it does not read.
func (l *Limits) UnmarshalJSON(b []byte) error {
	type plain Limits
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	*l = Limits(p)
	for _, k := range nativeKeys {
		if _, ok := keys[k]; ok {
			l.native = true
		}
	}
	return nil
}

// Resolve returns the limits an item asks for: wmrl's keys when it has
// any (all four, as LimitsOf writes them), else defaults; then each
// reference key present lowers its counterpart (the stricter of the two
// wins). A reference value that is not a positive number is an error
// naming its key.
func (l *Limits) Resolve(defaults backend.Limits) (backend.Limits, error) {
	out := defaults
	if l.native {
		out = l.Backend()
	}
	for _, k := range []struct {
		name string
		v    *float64
	}{{"execution_timeout", l.ExecutionTimeout}, {"memory_limit", l.MemoryLimitGB},
		{"cpu_time_limit", l.CPUTimeLimit}, {"gpu_memory_limit", l.GPUMemoryLimitGB}} {
		if k.v != nil && !(*k.v > 0 && !math.IsInf(*k.v, 0)) {
			return backend.Limits{}, fmt.Errorf("%s: %v, want a number > 0", k.name, *k.v)
		}
	}
	if l.ExecutionTimeout != nil && *l.ExecutionTimeout*float64(time.Second) < float64(out.Deadline) {
		out.Deadline = time.Duration(math.Round(*l.ExecutionTimeout * float64(time.Second)))
	}
	if l.MemoryLimitGB != nil && *l.MemoryLimitGB*1e9 < float64(out.MemoryBytes) {
		out.MemoryBytes = int64(*l.MemoryLimitGB * 1e9)
	}
	return out, nil
}

// LimitsOf is l on the wire.
func LimitsOf(l backend.Limits) *Limits {
	return &Limits{MemoryBytes: l.MemoryBytes, CPUs: l.CPUs, Pids: l.Pids, DeadlineSeconds: l.Deadline.Seconds()}
}

// Backend is l as backend.Limits (the deadline rounded to the nanosecond).
func (l *Limits) Backend() backend.Limits {
	d := l.DeadlineSeconds * float64(time.Second)
	if math.IsNaN(d) || d > math.MaxInt64 || d < math.MinInt64 {
		d = -1 // refused by Limits.Check
	}
	return backend.Limits{MemoryBytes: l.MemoryBytes, CPUs: l.CPUs, Pids: l.Pids, Deadline: time.Duration(math.Round(d))}
}

// Result is one item's verdict (see the package doc). Reward and Pos are
// pointers because the reference sends null for "none".
type Result struct {
	ID string `json:"id,omitempty"`
	// Action echoes the item's action, as the reference's servers do.
	Action string   `json:"action,omitempty"`
	Status string   `json:"status"`
	Reward *float64 `json:"reward"`
	Pos    *float64 `json:"pos"`
	// Feedback is always present: the reference's agent loop reads it.
	Feedback string `json:"feedback"`
	// FeedbackRaw is the feedback before any cut (the reference's
	// feedback_raw; nil when absent, which an empty one is not); Compiles says whether the code parsed, when known.
	FeedbackRaw *string  `json:"feedback_raw,omitempty"`
	Compiles    *bool    `json:"compiles,omitempty"`
	Metric      *float64 `json:"metric,omitempty"`
	// ExecTime is the wall seconds and CPUSeconds the CPU seconds of the
	// execution.
	ExecTime   float64 `json:"exec_time,omitempty"`
	CPUSeconds float64 `json:"cpu_s,omitempty"`
}

// Health is the answer of GET /health.
type Health struct {
	// Capacity is how many items the service grades at once; a pointer,
	// so that a missing capacity is told from 0.
	Capacity *int `json:"capacity"`
}

// ErrorBody is the body of an error answer (any status), as gradeserve
// sends it and as the reference's {"error": ...} reads.
type ErrorBody struct {
	Error string `json:"error"`
}

// The statuses of the reference implementation.
const (
	RefMalformed  = "malformed"
	RefSyntaxErr  = "syntax_err"
	RefRuntimeErr = "runtime_err"
	RefRanNoSub   = "ran_no_sub"
	RefValid      = "valid"
)

// ladder maps every status that is a verdict to the ladder's status
// (executor.Status's values, which package backend does not import).
var ladder = map[string]string{
	"ok":              "ok",
	"invalid_program": "invalid_program",
	"runtime_error":   "runtime_error",
	"timeout":         "timeout",
	"memory":          "memory",
	"invalid_output":  "invalid_output",
	RefMalformed:      "invalid_program",
	RefSyntaxErr:      "invalid_program",
	RefRuntimeErr:     "runtime_error",
	RefRanNoSub:       "invalid_output",
	RefValid:          "ok",
}

// LadderStatus returns the ladder's status for a result status, and false
// when the status is no verdict (ungraded, or unknown).
func LadderStatus(status string) (string, bool) {
	s, ok := ladder[status]
	return s, ok
}

// unit reports whether v is a number in [0,1].
func unit(v float64) bool { return v >= 0 && v <= 1 } // false for NaN

// grade is a result as a backend.Grade; an error names what is wrong with
// it.
//
// The result's feedback is the grade's Feedback, the observation a policy
// sees next (the reference's agent loop shows it); its feedback_raw, the
// feedback before any cut, is the Detail kept for audit, the feedback when
// there is none.
func (r Result) grade() (backend.Grade, error) {
	detail := r.Feedback
	if r.FeedbackRaw != nil {
		detail = *r.FeedbackRaw
	}
	g := backend.Grade{Detail: detail, Feedback: r.Feedback, WallSeconds: r.ExecTime, CPUSeconds: r.CPUSeconds}
	if !(r.ExecTime >= 0) || !(r.CPUSeconds >= 0) {
		return backend.Grade{}, fmt.Errorf("negative exec_time %v or cpu_s %v", r.ExecTime, r.CPUSeconds)
	}
	status, ok := LadderStatus(r.Status)
	if !ok {
		g.Status = backend.StatusUngraded
		if r.Status != backend.StatusUngraded {
			g.Detail = fmt.Sprintf("no verdict (status %q)", clip(r.Status))
			if detail != "" {
				g.Detail += ": " + detail
			}
		}
		return g, nil
	}
	if r.Reward == nil {
		return backend.Grade{}, fmt.Errorf("status %q without a reward", r.Status)
	}
	if !unit(*r.Reward) {
		return backend.Grade{}, fmt.Errorf("reward %v out of [0,1]", *r.Reward)
	}
	g.Graded, g.Status, g.Score = true, status, *r.Reward
	if status == "ok" {
		if r.Pos != nil {
			if !unit(*r.Pos) {
				return backend.Grade{}, fmt.Errorf("pos %v out of [0,1]", *r.Pos)
			}
			g.Position = *r.Pos
		}
		if r.Metric != nil {
			g.Metric = *r.Metric
		}
	}
	return g, nil
}

// ResultOf is a backend.Grade on the wire, with wmrl's status words (an
// ungraded Grade has status "ungraded" and no reward): its Feedback as the
// feedback (its Detail when it has none) and its Detail as feedback_raw.
func ResultOf(id string, g backend.Grade) Result {
	fb := g.Feedback
	if fb == "" {
		fb = g.Detail
	}
	r := Result{ID: id, Status: g.Status, Feedback: fb, FeedbackRaw: &g.Detail, ExecTime: g.WallSeconds,
		CPUSeconds: g.CPUSeconds}
	if !g.Graded {
		r.Status = backend.StatusUngraded
		return r
	}
	r.Reward = ptr(g.Score)
	if g.Status == "ok" {
		r.Pos, r.Metric = ptr(g.Position), ptr(g.Metric)
	}
	return r
}

func ptr(v float64) *float64 { return &v }

// decodeResults reads a /grade answer: a JSON array of results, or an
// object holding them in "results", or an object {"error": ...}.
func decodeResults(body []byte) ([]Result, error) {
	var list []Result
	if err := json.Unmarshal(body, &list); err == nil {
		return list, nil
	}
	var obj struct {
		Results *[]Result `json:"results"`
		Error   *string   `json:"error"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("answer is not a list of results: %w", err)
	}
	switch {
	case obj.Error != nil:
		return nil, fmt.Errorf("service error: %s", *obj.Error)
	case obj.Results == nil:
		return nil, fmt.Errorf("answer is neither a list of results nor an object with \"results\"")
	}
	return *obj.Results, nil
}
