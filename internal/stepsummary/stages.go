package stepsummary

import (
	"sort"
	"time"
)

// Span is the wall-clock interval of one stage of a step: from the
// moment its first activity was scheduled to the moment its last one was
// done, as the step workflow saw them (workflow.Now, so a replay sees the
// same values). The zero Span is a stage the step did not run.
type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Seconds is the span's length (0 for a stage not run).
func (s Span) Seconds() float64 {
	if s.IsZero() || s.End.Before(s.Start) {
		return 0
	}
	return s.End.Sub(s.Start).Seconds()
}

// IsZero reports a stage the step did not run.
func (s Span) IsZero() bool { return s.Start.IsZero() && s.End.IsZero() }

// Stages are a step's stage intervals (docs/design.md, "Where the time
// goes"): Generate, Score (ScoreWorldModel) and Execute of a single-shot
// rollout, each from its first activity to its last (they overlap within
// the step, since a group's scoring and executions start when its
// Generate is done); Turns, the whole turn loop of a multi-turn rollout
// in their place; CalibrateFuse and Update; Step, from the step's start
// to the end of its update. They are timings, never inputs of the
// training: no checkpoint depends on them. Zero in steps recorded before
// they were (workflow change stage-times).
type Stages struct {
	Step          Span `json:"step,omitzero"`
	Generate      Span `json:"generate,omitzero"`
	Score         Span `json:"score,omitzero"`
	Execute       Span `json:"execute,omitzero"`
	Turns         Span `json:"turns,omitzero"`
	CalibrateFuse Span `json:"calibrate_fuse,omitzero"`
	Update        Span `json:"update,omitzero"`
}

// IsZero reports a step without recorded stages.
func (s Stages) IsZero() bool { return s.Step.IsZero() }

// StageNames are the stages in display order, the names of their JSON.
var StageNames = []string{"generate", "score", "execute", "turns", "calibrate_fuse", "update"}

// Named returns the stage of the name (StageNames, or "step").
func (s Stages) Named(name string) Span {
	switch name {
	case "step":
		return s.Step
	case "generate":
		return s.Generate
	case "score":
		return s.Score
	case "execute":
		return s.Execute
	case "turns":
		return s.Turns
	case "calibrate_fuse":
		return s.CalibrateFuse
	case "update":
		return s.Update
	}
	return Span{}
}

// spans are the step's non-empty stage spans.
func (s Stages) spans() []Span {
	var out []Span
	for _, n := range StageNames {
		if sp := s.Named(n); !sp.IsZero() && sp.End.After(sp.Start) {
			out = append(out, sp)
		}
	}
	return out
}

// StageTime is one stage of a step: its wall seconds and how many of them
// overlapped a stage of another step.
type StageTime struct {
	Stage      string  `json:"stage"`
	Seconds    float64 `json:"seconds"`
	Overlapped float64 `json:"overlapped_seconds"`
}

// Overlap returns, for each stage step i ran (StageNames order, then
// "step" for the whole step), its wall seconds and the seconds of it
// during which some stage of another step in all was running: the length
// of its span's intersection with the union of the other steps' stage
// spans. With steps strictly one after another (pipeline.max_off_policy
// 0) every overlap is 0. Nil when step i has no stages.
func Overlap(all []Stages, i int) []StageTime {
	if i < 0 || i >= len(all) || all[i].IsZero() {
		return nil
	}
	var others []Span
	for j, s := range all {
		if j != i {
			others = append(others, s.spans()...)
		}
	}
	union := merge(others)
	var out []StageTime
	for _, n := range append(append([]string{}, StageNames...), "step") {
		sp := all[i].Named(n)
		if sp.IsZero() {
			continue
		}
		out = append(out, StageTime{Stage: n, Seconds: sp.Seconds(), Overlapped: intersect(sp, union)})
	}
	return out
}

// merge returns the union of spans as disjoint spans in time order.
func merge(spans []Span) []Span {
	sort.Slice(spans, func(a, b int) bool { return spans[a].Start.Before(spans[b].Start) })
	var out []Span
	for _, s := range spans {
		if n := len(out); n > 0 && !s.Start.After(out[n-1].End) {
			if s.End.After(out[n-1].End) {
				out[n-1].End = s.End
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// intersect is the seconds of s inside the disjoint spans u.
func intersect(s Span, u []Span) float64 {
	var d time.Duration
	for _, x := range u {
		lo, hi := s.Start, s.End
		if x.Start.After(lo) {
			lo = x.Start
		}
		if x.End.Before(hi) {
			hi = x.End
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d.Seconds()
}
