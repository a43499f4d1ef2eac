package stepsummary

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func span(a, b float64) Span { return Span{Start: at(a), End: at(b)} }

// sequential is a step of 10 s from start: generate 0-4, score 1-5,
// execute 1-6, calibrate+fuse 6-7, update 7-10.
func sequential(start float64) Stages {
	return Stages{Step: span(start, start+10), Generate: span(start, start+4), Score: span(start+1, start+5),
		Execute: span(start+1, start+6), CalibrateFuse: span(start+6, start+7), Update: span(start+7, start+10)}
}

func find(ts []StageTime, stage string) StageTime {
	for _, x := range ts {
		if x.Stage == stage {
			return x
		}
	}
	return StageTime{Stage: "missing"}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestOverlapSequentialIsZero(t *testing.T) {
	all := []Stages{sequential(0), sequential(10), sequential(20)}
	for i := range all {
		for _, x := range Overlap(all, i) {
			if x.Overlapped != 0 {
				t.Errorf("step %d %s: overlapped %v s, want 0 when steps follow one another", i, x.Stage, x.Overlapped)
			}
		}
	}
	if got := find(Overlap(all, 1), "update"); !near(got.Seconds, 3) {
		t.Errorf("update %+v, want 3 s", got)
	}
	if got := find(Overlap(all, 1), "step"); !near(got.Seconds, 10) {
		t.Errorf("step %+v, want 10 s", got)
	}
}

// With one step off policy, step 1's rollout (starting at 7) runs during
// step 0's update (7-10).
func TestOverlapPipelined(t *testing.T) {
	all := []Stages{sequential(0), sequential(7)}
	o1 := Overlap(all, 1)
	for _, c := range []struct {
		stage string
		want  float64
	}{{"generate", 3}, {"score", 2}, {"execute", 2}, {"calibrate_fuse", 0}, {"update", 0}, {"step", 3}} {
		if got := find(o1, c.stage); !near(got.Overlapped, c.want) {
			t.Errorf("step 1 %s: overlapped %v, want %v", c.stage, got.Overlapped, c.want)
		}
	}
	if got := find(Overlap(all, 0), "update"); !near(got.Overlapped, 3) {
		t.Errorf("step 0 update: overlapped %v, want 3", got.Overlapped)
	}
	if got := find(Overlap(all, 0), "generate"); got.Overlapped != 0 {
		t.Errorf("step 0 generate: overlapped %v, want 0", got.Overlapped)
	}
	if Overlap([]Stages{{}}, 0) != nil {
		t.Error("a step without stages has an overlap")
	}
}

// A step without stages encodes as before (no key), and stages round-trip.
func TestStagesJSON(t *testing.T) {
	b, err := json.Marshal(Step{Groups: 1})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["stages"]; ok {
		t.Errorf("stages in %s", b)
	}
	want := Step{Groups: 1, Stages: Stages{Step: span(0, 5), Turns: span(0, 3), Update: span(3, 5)}}
	if b, err = json.Marshal(want); err != nil {
		t.Fatal(err)
	}
	var got Step
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("round trip %+v, want %+v (%s)", got, want, b)
	}
}
