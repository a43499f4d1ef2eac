package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Status is the outcome class of one execution.
type Status string

const (
	// StatusOK: the pipeline ran and its predictions were scored.
	StatusOK Status = "ok"
	// StatusInvalidProgram: the program text does not parse.
	StatusInvalidProgram Status = "invalid_program"
	// StatusRuntimeError: the program parsed but failed while running
	// (wrong model for the task, numerical failure, crash of the executor).
	StatusRuntimeError Status = "runtime_error"
	// StatusTimeout: the execution exceeded its deadline or CPU budget.
	StatusTimeout Status = "timeout"
	// StatusMemory: the execution exceeded its memory limit.
	StatusMemory Status = "memory"
	// StatusInvalidOutput: the execution ran but produced no valid output
	// (wrong number of predictions, NaN/Inf, unparseable executor output).
	StatusInvalidOutput Status = "invalid_output"
)

// Statuses lists every status, in ladder order.
func Statuses() []Status {
	return []Status{StatusInvalidProgram, StatusRuntimeError, StatusTimeout, StatusMemory, StatusInvalidOutput, StatusOK}
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, t := range Statuses() {
		if s == t {
			return true
		}
	}
	return false
}

// Reward is the reward ladder: the score of an execution with status s and,
// for StatusOK, leaderboard position in [0, 1] (clamped). It is the only
// place where a score is made from a status; everybody calls it.
func Reward(s Status, position float64) float64 {
	switch s {
	case StatusOK:
		if math.IsNaN(position) {
			return 0.2 // not a valid output after all
		}
		return 0.5 + 0.5*math.Min(1, math.Max(0, position))
	case StatusInvalidOutput:
		return 0.2
	case StatusRuntimeError, StatusTimeout, StatusMemory:
		return 0.1
	default: // StatusInvalidProgram and anything unknown
		return 0
	}
}

// Result is the outcome of one execution. Score is always Reward(Status,
// Position). CPUSeconds and WallSeconds are what the executor measured on
// itself (WallSeconds from when it had read its job, the time its deadline
// is measured on); a sandbox replaces CPUSeconds with what it measured from
// outside, and both when the executor could not report.
type Result struct {
	Status   Status  `json:"status"`
	Score    float64 `json:"score"`
	Metric   float64 `json:"metric"`   // the task's metric on the test split (StatusOK only)
	Position float64 `json:"position"` // leaderboard position in [0, 1] (StatusOK only)
	Detail   string  `json:"detail,omitempty"`

	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
}

// NewResult returns the result with status s and its ladder score; metric
// and position are kept only for StatusOK.
func NewResult(s Status, metric, position float64, detail string) Result {
	r := Result{Status: s, Detail: detail}
	if s == StatusOK {
		r.Metric, r.Position = metric, position
	}
	r.Score = Reward(s, r.Position)
	return r
}

// Failed returns the result of a failed execution with status s.
func Failed(s Status, detail string) Result {
	return NewResult(s, 0, 0, detail)
}

// MaxDetail bounds the length of Result.Detail.
const MaxDetail = 512

// Line encodes r as one JSON line (with the trailing newline).
func (r Result) Line() []byte {
	if len(r.Detail) > MaxDetail {
		r.Detail = r.Detail[:MaxDetail]
	}
	b, err := json.Marshal(r)
	if err != nil {
		// Only non-finite floats can fail; ParseLine would reject them too.
		b, _ = json.Marshal(Failed(StatusInvalidOutput, "unencodable result: "+err.Error()))
	}
	return append(b, '\n')
}

// ParseLine decodes and validates the output of an executor: exactly one
// JSON object line with a known status, a finite metric, a position in
// [0, 1] and non-negative timings. The score is recomputed by Reward, so an
// executor cannot claim a score its status does not earn.
func ParseLine(out []byte) (Result, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return Result{}, fmt.Errorf("empty output")
	}
	if bytes.IndexByte(out, '\n') >= 0 {
		return Result{}, fmt.Errorf("more than one output line")
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("decode result: %w", err)
	}
	if dec.More() {
		return Result{}, fmt.Errorf("trailing data after result")
	}
	if !r.Status.Valid() {
		return Result{}, fmt.Errorf("unknown status %q", r.Status)
	}
	if math.IsNaN(r.Metric) || math.IsInf(r.Metric, 0) {
		return Result{}, fmt.Errorf("metric %v is not finite", r.Metric)
	}
	if !(r.Position >= 0 && r.Position <= 1) {
		return Result{}, fmt.Errorf("position %v outside [0, 1]", r.Position)
	}
	if !(r.CPUSeconds >= 0) || !(r.WallSeconds >= 0) {
		return Result{}, fmt.Errorf("negative timings")
	}
	r.Score = Reward(r.Status, r.Position)
	return r, nil
}
