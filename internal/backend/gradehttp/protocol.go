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

// ActionExecute is the action of every item wmrl sends (the reference's
// "execute_code").
const ActionExecute = "execute_code"

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
	Suite     uint64 `json:"suite"`
	Code      string `json:"code"`
	Seed      uint64 `json:"seed"`
	// Overview is the task's prompt, when it has one.
	Overview string  `json:"overview,omitempty"`
	Budget   float64 `json:"budget,omitempty"`
	Limits   *Limits `json:"limits,omitempty"`
}

// Limits are backend.Limits on the wire, the deadline in seconds.
type Limits struct {
	MemoryBytes     int64   `json:"memory_bytes"`
	CPUs            float64 `json:"cpus"`
	Pids            int64   `json:"pids"`
	DeadlineSeconds float64 `json:"deadline_seconds"`
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
	ID       string   `json:"id,omitempty"`
	Status   string   `json:"status"`
	Reward   *float64 `json:"reward"`
	Pos      *float64 `json:"pos"`
	Feedback string   `json:"feedback,omitempty"`
	Metric   *float64 `json:"metric,omitempty"`
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
func (r Result) grade() (backend.Grade, error) {
	g := backend.Grade{Detail: r.Feedback, WallSeconds: r.ExecTime, CPUSeconds: r.CPUSeconds}
	if !(r.ExecTime >= 0) || !(r.CPUSeconds >= 0) {
		return backend.Grade{}, fmt.Errorf("negative exec_time %v or cpu_s %v", r.ExecTime, r.CPUSeconds)
	}
	status, ok := LadderStatus(r.Status)
	if !ok {
		g.Status = backend.StatusUngraded
		if r.Status != backend.StatusUngraded {
			g.Detail = fmt.Sprintf("no verdict (status %q)", clip(r.Status))
			if r.Feedback != "" {
				g.Detail += ": " + r.Feedback
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
// ungraded Grade has status "ungraded" and no reward).
func ResultOf(id string, g backend.Grade) Result {
	r := Result{ID: id, Status: g.Status, Feedback: g.Detail, ExecTime: g.WallSeconds, CPUSeconds: g.CPUSeconds}
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
