package main

import (
	"slices"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var t0 = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestUnion(t *testing.T) {
	iv := func(a, b int) Interval { return Interval{at(a), at(b)} }
	tests := []struct {
		name string
		give []Interval
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", []Interval{iv(10, 30)}, 20 * time.Millisecond},
		{"disjoint", []Interval{iv(0, 10), iv(20, 25)}, 15 * time.Millisecond},
		{"overlapping", []Interval{iv(0, 10), iv(5, 20)}, 20 * time.Millisecond},
		{"nested", []Interval{iv(0, 100), iv(10, 20), iv(30, 40)}, 100 * time.Millisecond},
		{"touching", []Interval{iv(0, 10), iv(10, 20)}, 20 * time.Millisecond},
		{"unsorted chain", []Interval{iv(50, 70), iv(0, 10), iv(8, 30), iv(25, 40)}, 60 * time.Millisecond},
		{"empty and inverted ignored", []Interval{iv(5, 5), iv(9, 3), iv(0, 2)}, 2 * time.Millisecond},
		{"identical", []Interval{iv(0, 10), iv(0, 10), iv(0, 10)}, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Union(tt.give); got != tt.want {
				t.Fatalf("Union = %v, want %v", got, tt.want)
			}
		})
	}
}

// hist builds a synthetic history; event ids are 1-based positions.
type hist struct{ events []*historypb.HistoryEvent }

func (h *hist) add(ms int, typ enums.EventType, set func(e *historypb.HistoryEvent)) int64 {
	e := &historypb.HistoryEvent{EventId: int64(len(h.events) + 1), EventTime: timestamppb.New(at(ms)), EventType: typ}
	if set != nil {
		set(e)
	}
	h.events = append(h.events, e)
	return e.EventId
}

func (h *hist) wft(sched, start, done int) {
	id := h.add(sched, enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil)
	h.add(start, enums.EVENT_TYPE_WORKFLOW_TASK_STARTED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{
			WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: id}}
	})
	h.add(done, enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
			WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{ScheduledEventId: id}}
	})
}

func (h *hist) schedule(ms int, name string) int64 {
	return h.add(ms, enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: name}}}
	})
}

// run appends an activity's started and completed events (as Temporal
// writes them: both when the activity closes).
func (h *hist) run(id int64, start, done int) {
	h.add(start, enums.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: id}}
	})
	h.add(done, enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{
			ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: id}}
	})
}

func (h *hist) fail(id int64, start, done int) {
	h.add(start, enums.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: id}}
	})
	h.add(done, enums.EVENT_TYPE_ACTIVITY_TASK_FAILED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{ScheduledEventId: id}}
	})
}

func dur(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestAnalyzeStep(t *testing.T) {
	type want struct {
		wall, in, queue, wft, wftQueued, other, schedToStart, maxSched time.Duration
		activities, events                                             int
	}
	type phase struct {
		name  string
		count int
		span  time.Duration
	}
	tests := []struct {
		name   string
		build  func(h *hist)
		local  []LocalSpan
		want   want
		phases []phase
	}{
		{
			// Start 0; WFT 5-15 schedules A; A queued 15-20, runs 20-60;
			// WFT 60-70 completes the execution at 75.
			name: "one activity",
			build: func(h *hist) {
				h.add(0, enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
				h.wft(5, 8, 15)
				a := h.schedule(15, "A")
				h.run(a, 20, 60)
				h.wft(60, 62, 70)
				h.add(75, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)
			},
			want: want{wall: dur(75), in: dur(40), queue: dur(5), wft: dur(20), wftQueued: dur(5), other: dur(10),
				schedToStart: dur(5), maxSched: dur(5), activities: 1, events: 11},
		},
		{
			// Three parallel activities 10-50, 20-80 and 70-90 cover 10-90
			// once (80 ms, not their sum 110); B waits 10-20 in the queue
			// but A runs then, so that wait is hidden. Then C' runs
			// 100-110 after a 90-100 workflow task, and the execution
			// completes at 120 after a workflow task 110-118.
			name: "overlapping fan-out",
			build: func(h *hist) {
				h.add(0, enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
				h.wft(0, 2, 5)
				a := h.schedule(5, "A")
				b := h.schedule(10, "A")
				c := h.schedule(12, "A")
				h.run(a, 10, 50)
				h.run(b, 20, 80)
				h.run(c, 70, 90)
				h.wft(90, 92, 100)
				d := h.schedule(100, "B")
				h.run(d, 100, 110)
				h.wft(110, 111, 118)
				h.add(120, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)
			},
			// Uncovered: 0-5 wft, 5-10 queue (A scheduled), 90-100 wft,
			// 110-118 wft, 118-120 other.
			want: want{wall: dur(120), in: dur(90), queue: dur(5), wft: dur(23), wftQueued: dur(5), other: dur(2),
				schedToStart: dur(5 + 10 + 58), maxSched: dur(58), activities: 4, events: 23},
			phases: []phase{{"A", 3, dur(80)}, {"B", 1, dur(10)}},
		},
		{
			// The "one activity" history, with a local activity running
			// 62-68 inside the last workflow task (60-70): those 6 ms are
			// activity time, not workflow-task overhead.
			name: "local activity",
			build: func(h *hist) {
				h.add(0, enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
				h.wft(5, 8, 15)
				a := h.schedule(15, "A")
				h.run(a, 20, 60)
				h.wft(60, 62, 70)
				h.add(75, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)
			},
			local: []LocalSpan{{Name: "L", Interval: Interval{t0.Add(dur(62)), t0.Add(dur(68))}}},
			want: want{wall: dur(75), in: dur(46), queue: dur(5), wft: dur(14), wftQueued: dur(5), other: dur(10),
				schedToStart: dur(5), maxSched: dur(5), activities: 1, events: 11},
			phases: []phase{{"A", 1, dur(40)}, {"L (local)", 1, dur(6)}},
		},
		{
			// A failed activity counts as time inside an activity; the
			// workflow schedules another one 20 ms after it failed, a gap
			// with nothing pending (other).
			name: "failure and retry",
			build: func(h *hist) {
				h.add(0, enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
				a := h.schedule(0, "A")
				h.fail(a, 10, 40)
				b := h.schedule(60, "A")
				h.run(b, 60, 100)
				h.add(100, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)
			},
			want: want{wall: dur(100), in: dur(70), queue: dur(10), other: dur(20),
				schedToStart: dur(10), maxSched: dur(10), activities: 2, events: 8},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h hist
			tt.build(&h)
			got, err := AnalyzeStep(h.events, tt.local...)
			if err != nil {
				t.Fatal(err)
			}
			g := want{wall: got.Wall, in: got.InActivities, queue: got.QueueWait, wft: got.WorkflowTask,
				wftQueued: got.WorkflowTaskQueued, other: got.Other,
				schedToStart: got.SchedToStart, maxSched: got.MaxSchedToStart, activities: got.Activities, events: got.Events}
			if g != tt.want {
				t.Fatalf("got  %+v\nwant %+v", g, tt.want)
			}
			if got.Overhead != got.Wall-got.InActivities || got.Overhead != got.QueueWait+got.WorkflowTask+got.Other {
				t.Fatalf("overhead %v does not add up: %+v", got.Overhead, got)
			}
			if tt.phases != nil {
				var ph []phase
				for _, p := range got.Phases {
					ph = append(ph, phase{p.Name, p.Count, p.Span})
				}
				if !slices.Equal(ph, tt.phases) {
					t.Fatalf("phases %+v, want %+v", ph, tt.phases)
				}
			}
			if got.Bytes <= 0 {
				t.Fatalf("bytes %d", got.Bytes)
			}
		})
	}
}

func TestAnalyzeStepRejects(t *testing.T) {
	var open hist
	open.add(0, enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	open.wft(0, 1, 2)
	var orphan hist
	orphan.add(0, enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	orphan.run(7, 1, 2)
	orphan.add(3, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)
	tests := []struct {
		name string
		give []*historypb.HistoryEvent
	}{
		{"empty", nil},
		{"not closed", open.events},
		{"no start", open.events[1:]},
		{"unscheduled activity", orphan.events},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := AnalyzeStep(tt.give); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestAnalyzeSegment(t *testing.T) {
	var h hist
	h.add(0, enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	h.wft(0, 1, 2)
	step := func(ms int) {
		h.add(ms, enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, nil)
		h.add(ms+1, enums.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED, nil)
		h.add(ms+2, enums.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED, nil)
		h.wft(ms+2, ms+3, ms+4)
		h.add(ms+4, enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, nil) // 7 events per step
	}
	step(10)
	step(20)
	step(30)
	tasks := h.schedule(40, "HeldOutTasks")
	h.run(tasks, 41, 42)
	h.wft(42, 43, 44)
	e1, e2 := h.schedule(44, "Evaluate"), h.schedule(44, "Evaluate")
	h.run(e1, 45, 46)
	h.run(e2, 45, 47)
	h.wft(47, 48, 49)
	score := h.schedule(49, "HeldOutScore")
	h.run(score, 50, 51)
	h.wft(51, 52, 53)
	h.add(53, enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, nil)
	h.add(60, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, nil)

	s := AnalyzeSegment(h.events)
	if s.Events != 4+21+22+1 || s.Steps != 3 || s.StepEvents != 14 || s.EvalEvents != 22 || s.EvalTasks != 2 || !s.ContinuedAsNew {
		t.Fatalf("segment %+v", s)
	}
	// Steps at 10, 20, 30: each child starts 1 ms after its initiation
	// and completes at +2, so 2 gaps of 9 ms.
	if s.Gaps != 2 || s.Between != dur(18) || !s.FirstChildStarted.Equal(at(11)) || !s.LastChildCompleted.Equal(at(32)) {
		t.Fatalf("between steps: %d gaps, %v, first start %v, last completion %v", s.Gaps, s.Between,
			s.FirstChildStarted, s.LastChildCompleted)
	}
	pe, pb, ok := s.PerStep()
	if !ok || pe != 7 || pb <= 0 {
		t.Fatalf("per step %v events %v bytes %v", ok, pe, pb)
	}
	if _, _, ok := (SegmentStats{Steps: 1}).PerStep(); ok {
		t.Fatal("per step from one step")
	}
}

func TestProject(t *testing.T) {
	tests := []struct {
		name                   string
		steps, k, every, tasks int
		wantExec               int
		wantEvents, wantBytes  float64
	}{
		// 20 executions of 50 steps; evaluations at most ceil(50/20)=3 in
		// 50 steps plus the final one: 4 × 16 tasks × 6 events.
		{"default", 1000, 50, 20, 16, 20, 30 + 50*10 + 4*16*6, 1000 + 50*3000 + 4*16*600},
		{"final evaluation only", 1000, 100, 0, 2, 10, 30 + 100*10 + 2*6, 1000 + 100*3000 + 2*600},
		{"one short execution", 7, 50, 0, 1, 1, 30 + 7*10 + 6, 1000 + 7*3000 + 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Project(tt.steps, tt.k, tt.every, tt.tasks, 30, 1000, 10, 3000, 6, 600)
			if p.Executions != tt.wantExec || p.Events != tt.wantEvents || p.Bytes != tt.wantBytes {
				t.Fatalf("got %+v, want %d executions, %v events, %v bytes", p, tt.wantExec, tt.wantEvents, tt.wantBytes)
			}
		})
	}
}

// TestParseSizes: GROUPSxSAMPLES and GROUPSxSAMPLESxTURNS, their names,
// and malformed sizes refused.
func TestParseSizes(t *testing.T) {
	got, err := parseSizes("8x8, 8x8x3,32x8x1")
	if err != nil {
		t.Fatal(err)
	}
	want := []size{{8, 8, 1}, {8, 8, 3}, {32, 8, 1}}
	if len(got) != len(want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("size %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if got[0].String() != "8x8" || got[1].String() != "8x8x3" || got[2].String() != "32x8" {
		t.Errorf("names %s %s %s", got[0], got[1], got[2])
	}
	if c := benchConfig(options{steps: 3, k: 2, evalTasks: 1}, got[1]); c.Trajectory.TurnCount() != 3 || c.Validate() != nil {
		t.Errorf("8x8x3: %d turns, validate %v", c.Trajectory.TurnCount(), c.Validate())
	}
	for _, bad := range []string{"8", "8x1", "8x8x0", "8x8x3x2", "axb"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
