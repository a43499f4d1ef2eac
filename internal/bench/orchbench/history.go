package main

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"
)

// Interval is a closed time span.
type Interval struct {
	Start, End time.Time
}

// Union returns the total length covered by the intervals: overlapping
// parts count once. Empty or inverted intervals cover nothing.
func Union(ivs []Interval) time.Duration {
	s := make([]Interval, 0, len(ivs))
	for _, iv := range ivs {
		if iv.End.After(iv.Start) {
			s = append(s, iv)
		}
	}
	slices.SortFunc(s, func(a, b Interval) int { return a.Start.Compare(b.Start) })
	var total time.Duration
	for i := 0; i < len(s); {
		start, end := s[i].Start, s[i].End
		j := i + 1
		for ; j < len(s) && !s[j].Start.After(end); j++ {
			if s[j].End.After(end) {
				end = s[j].End
			}
		}
		total += end.Sub(start)
		i = j
	}
	return total
}

// StepStats is the timing and size of one workflow execution's history.
type StepStats struct {
	// Start is the time of WorkflowExecutionStarted; Wall the time from it
	// to the closing event.
	Start time.Time
	Wall  time.Duration
	// InActivities is the union of the [ActivityTaskStarted, closed]
	// intervals (activities run in parallel, so not their sum).
	InActivities time.Duration
	// Overhead is Wall - InActivities: the time in which no activity ran.
	// It is split into QueueWait (some activity was scheduled and not yet
	// started: waiting in its task queue, or between retry attempts),
	// WorkflowTask (no activity queued, a workflow task scheduled or
	// running) and Other (neither: e.g. the child's start before its first
	// workflow task is scheduled).
	// WorkflowTaskQueued is the part of WorkflowTask in which the task
	// waited for a worker (scheduled, not started), the rest the worker's
	// processing and its round trip to the server.
	Overhead           time.Duration
	QueueWait          time.Duration
	WorkflowTask       time.Duration
	WorkflowTaskQueued time.Duration
	Other              time.Duration
	// Activities is the number of activities; SchedToStart the sum of their
	// ActivityTaskScheduled -> ActivityTaskStarted latencies, MaxSchedToStart
	// the largest.
	Activities      int
	SchedToStart    time.Duration
	MaxSchedToStart time.Duration
	// WorkflowTasks is the number of workflow tasks scheduled.
	WorkflowTasks int
	// Events and Bytes count the history's events and their encoded size.
	Events int
	Bytes  int
	// Phases are the activity types in the order of their first
	// scheduling.
	Phases []Phase
}

// Phase is the activities of one type in an execution.
type Phase struct {
	Name  string
	Count int
	// Span is the union of the activities' running intervals; First and
	// Last bound them (first start, last close).
	Span        time.Duration
	First, Last time.Time
	intervals   []Interval
}

// Interval classes of the sweep in AnalyzeStep.
const (
	classActivity = iota
	classQueued
	classWorkflowTask
	classWorkflowTaskQueued
	classes
)

type edge struct {
	at    time.Time
	class int
	delta int
}

// AnalyzeStep measures a closed workflow execution's history: wall time,
// time inside activities and the overhead around them. local are the
// execution's local activities' spans (measured by the worker, since the
// history holds only their markers): time inside them counts as activity
// time, each a phase "<name> (local)".
func AnalyzeStep(events []*historypb.HistoryEvent, local ...LocalSpan) (StepStats, error) {
	var st StepStats
	if len(events) == 0 {
		return st, fmt.Errorf("empty history")
	}
	first, last := events[0], events[len(events)-1]
	if first.GetEventType() != enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
		return st, fmt.Errorf("history starts with %s, not WorkflowExecutionStarted", first.GetEventType())
	}
	if !closing(last.GetEventType()) {
		return st, fmt.Errorf("history ends with %s: the execution is not closed", last.GetEventType())
	}
	begin, end := first.GetEventTime().AsTime(), last.GetEventTime().AsTime()
	st.Start, st.Wall = begin, end.Sub(begin)
	st.Events = len(events)

	scheduled := map[int64]time.Time{}    // activity scheduled event id -> time
	phaseOf := map[int64]int{}            // activity scheduled event id -> index in st.Phases
	started := map[int64]time.Time{}      // activity scheduled event id -> start time
	wftScheduled := map[int64]time.Time{} // workflow task scheduled event id -> time
	var edges []edge
	var running []Interval
	addSpan := func(class int, from, to time.Time) {
		edges = append(edges, edge{from, class, +1}, edge{to, class, -1})
	}
	closeActivity := func(sched int64, at time.Time) error {
		t, ok := started[sched]
		if !ok {
			// Closed without a start: timed out or cancelled in the queue.
			s, ok := scheduled[sched]
			if !ok {
				return fmt.Errorf("activity %d closed but never scheduled", sched)
			}
			addSpan(classQueued, s, at)
			return nil
		}
		addSpan(classActivity, t, at)
		running = append(running, Interval{t, at})
		ph := &st.Phases[phaseOf[sched]]
		ph.intervals = append(ph.intervals, Interval{t, at})
		if ph.First.IsZero() || t.Before(ph.First) {
			ph.First = t
		}
		if at.After(ph.Last) {
			ph.Last = at
		}
		return nil
	}
	for _, e := range events {
		st.Bytes += proto.Size(e)
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[e.GetEventId()] = at
			st.Activities++
			name := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			i := slices.IndexFunc(st.Phases, func(p Phase) bool { return p.Name == name })
			if i < 0 {
				i = len(st.Phases)
				st.Phases = append(st.Phases, Phase{Name: name})
			}
			st.Phases[i].Count++
			phaseOf[e.GetEventId()] = i
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			id := e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
			s, ok := scheduled[id]
			if !ok {
				return st, fmt.Errorf("activity %d started but never scheduled", id)
			}
			started[id] = at
			addSpan(classQueued, s, at)
			d := at.Sub(s)
			st.SchedToStart += d
			st.MaxSchedToStart = max(st.MaxSchedToStart, d)
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if err := closeActivity(e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), at); err != nil {
				return st, err
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			if err := closeActivity(e.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), at); err != nil {
				return st, err
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			if err := closeActivity(e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), at); err != nil {
				return st, err
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			if err := closeActivity(e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), at); err != nil {
				return st, err
			}
		case enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			wftScheduled[e.GetEventId()] = at
			st.WorkflowTasks++
		case enums.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			id := e.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()
			if s, ok := wftScheduled[id]; ok {
				addSpan(classWorkflowTaskQueued, s, at)
			}
		case enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			id := e.GetWorkflowTaskCompletedEventAttributes().GetScheduledEventId()
			if s, ok := wftScheduled[id]; ok {
				addSpan(classWorkflowTask, s, at)
			}
		case enums.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			id := e.GetWorkflowTaskFailedEventAttributes().GetScheduledEventId()
			if s, ok := wftScheduled[id]; ok {
				addSpan(classWorkflowTask, s, at)
			}
		case enums.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			id := e.GetWorkflowTaskTimedOutEventAttributes().GetScheduledEventId()
			if s, ok := wftScheduled[id]; ok {
				addSpan(classWorkflowTask, s, at)
			}
		}
	}
	for _, l := range local {
		addSpan(classActivity, l.Start, l.End)
		running = append(running, l.Interval)
		name := l.Name + " (local)"
		i := slices.IndexFunc(st.Phases, func(p Phase) bool { return p.Name == name })
		if i < 0 {
			i = len(st.Phases)
			st.Phases = append(st.Phases, Phase{Name: name})
		}
		ph := &st.Phases[i]
		ph.Count++
		ph.intervals = append(ph.intervals, l.Interval)
		if ph.First.IsZero() || l.Start.Before(ph.First) {
			ph.First = l.Start
		}
		if l.End.After(ph.Last) {
			ph.Last = l.End
		}
	}
	st.InActivities = Union(clip(running, begin, end))
	for i := range st.Phases {
		st.Phases[i].Span = Union(st.Phases[i].intervals)
		st.Phases[i].intervals = nil
	}
	st.Overhead = st.Wall - st.InActivities

	// Sweep the elementary segments of [begin, end] and attribute each one
	// not covered by a running activity to the first class that covers it.
	slices.SortStableFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	var count [classes]int
	prev := begin
	attribute := func(to time.Time) {
		if to.After(end) {
			to = end
		}
		if !to.After(prev) {
			return
		}
		d := to.Sub(prev)
		switch {
		case count[classActivity] > 0:
		case count[classQueued] > 0:
			st.QueueWait += d
		case count[classWorkflowTaskQueued] > 0:
			st.WorkflowTask += d
			st.WorkflowTaskQueued += d
		case count[classWorkflowTask] > 0:
			st.WorkflowTask += d
		default:
			st.Other += d
		}
		prev = to
	}
	for _, e := range edges {
		attribute(e.at)
		count[e.class] += e.delta
	}
	attribute(end)
	return st, nil
}

// clip cuts intervals to [lo, hi].
func clip(ivs []Interval, lo, hi time.Time) []Interval {
	out := make([]Interval, 0, len(ivs))
	for _, iv := range ivs {
		if iv.Start.Before(lo) {
			iv.Start = lo
		}
		if iv.End.After(hi) {
			iv.End = hi
		}
		out = append(out, iv)
	}
	return out
}

func closing(t enums.EventType) bool {
	switch t {
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enums.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		enums.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return true
	}
	return false
}

// SegmentStats is the size of one execution (segment) of the run workflow.
type SegmentStats struct {
	Events int
	Bytes  int
	// Steps is the number of step children started in the segment.
	Steps int
	// StepEvents and StepBytes are the events (and bytes) from one step's
	// StartChildWorkflowExecutionInitiated to the next one's, summed over
	// the Steps-1 full step cycles of the segment.
	StepEvents, StepBytes int
	// EvalEvents and EvalBytes are the events of the held-out evaluations:
	// from a HeldOutTasks activity's scheduling to the search-attribute
	// upsert after its HeldOutScore; EvalTasks the Evaluate activities in
	// them.
	EvalEvents, EvalBytes, EvalTasks int
	ContinuedAsNew                   bool
	// Between is the sum of the gaps from a step child's completion to the
	// next step child's start (the run workflow's work between steps), over
	// Gaps gaps. FirstChildStarted and LastChildCompleted bound the
	// segment's children, for the gaps across continue-as-new.
	Between                               time.Duration
	Gaps                                  int
	FirstChildStarted, LastChildCompleted time.Time
}

// PerStep returns the events and bytes of one step cycle, ok false when the
// segment has fewer than two steps.
func (s SegmentStats) PerStep() (events, bytes float64, ok bool) {
	if s.Steps < 2 {
		return 0, 0, false
	}
	return float64(s.StepEvents) / float64(s.Steps-1), float64(s.StepBytes) / float64(s.Steps-1), true
}

// AnalyzeSegment counts a run segment's events by what they belong to.
func AnalyzeSegment(events []*historypb.HistoryEvent) SegmentStats {
	var s SegmentStats
	s.Events = len(events)
	sizes := make([]int, len(events))
	for i, e := range events {
		sizes[i] = proto.Size(e)
		s.Bytes += sizes[i]
	}
	sum := func(from, to int) int { // bytes of events [from, to)
		b := 0
		for _, x := range sizes[from:to] {
			b += x
		}
		return b
	}
	activityType := map[int64]string{}
	firstInit, lastInit := -1, -1
	evalStart, inEval, scoreDone := -1, false, false
	for i, e := range events {
		switch e.GetEventType() {
		case enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			s.Steps++
			if firstInit < 0 {
				firstInit = i
			}
			lastInit = i
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			name := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			activityType[e.GetEventId()] = name
			switch name {
			case "HeldOutTasks":
				if !inEval {
					evalStart, inEval, scoreDone = i, true, false
				}
			case "Evaluate":
				s.EvalTasks++
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			id := e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			if inEval && activityType[id] == "HeldOutScore" {
				scoreDone = true
			}
		case enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if inEval && scoreDone {
				s.EvalEvents += i + 1 - evalStart
				s.EvalBytes += sum(evalStart, i+1)
				inEval = false
			}
		case enums.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
			t := e.GetEventTime().AsTime()
			if s.FirstChildStarted.IsZero() {
				s.FirstChildStarted = t
			}
			if !s.LastChildCompleted.IsZero() {
				s.Between += t.Sub(s.LastChildCompleted)
				s.Gaps++
			}
		case enums.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
			s.LastChildCompleted = e.GetEventTime().AsTime()
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			s.ContinuedAsNew = true
		}
	}
	if s.Steps >= 2 {
		s.StepEvents = lastInit - firstInit
		s.StepBytes = sum(firstInit, lastInit)
	}
	return s
}

// Projection is the size of each run execution of a long run.
type Projection struct {
	Steps, K, EvalEvery, EvalTasks int
	// Executions is the number of run executions (segments).
	Executions int
	// Events and Bytes are the largest execution's history: fixed part, K
	// step cycles and the held-out evaluations falling in K steps.
	Events, Bytes float64
}

// Project extrapolates a run of steps steps that continues as new every k
// steps, with a held-out evaluation of evalTasks tasks every evalEvery
// steps (0: none but the final one), from measured per-step, fixed and
// per-evaluated-task sizes. An evaluation's size is taken as
// evalTasks times the measured size per task, which overstates it (its
// fixed part is counted per task).
func Project(steps, k, evalEvery, evalTasks int, fixedEvents, fixedBytes, stepEvents, stepBytes,
	evalEventsPerTask, evalBytesPerTask float64) Projection {
	p := Projection{Steps: steps, K: k, EvalEvery: evalEvery, EvalTasks: evalTasks}
	p.Executions = (steps + k - 1) / k
	per := min(k, steps) // steps in the largest execution
	evals := 1           // the final evaluation, in the last execution
	if evalEvery > 0 {
		evals = (per + evalEvery - 1) / evalEvery // at most this many in per steps
		evals++                                   // and possibly the final one
	}
	p.Events = fixedEvents + float64(per)*stepEvents + float64(evals*evalTasks)*evalEventsPerTask
	p.Bytes = fixedBytes + float64(per)*stepBytes + float64(evals*evalTasks)*evalBytesPerTask
	return p
}
