package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/runreport"
	"github.com/wmrl/wmrl/internal/store"
)

// TestIntegrationTurns runs the tiny preset with trajectory.turns: 3
// through wmrl run on the Temporal server (its own namespace) and reads it
// back: inspect --json gives every trajectory its three turns from
// Postgres, the text form shows them one line per trajectory.
func TestIntegrationTurns(t *testing.T) {
	e := stack(t, "wmrl-starter-turns-test")
	e.flags = append(e.flags, "--ui-url", "http://ui.test:8233")
	name := e.runName(t, "turns")
	cfg := writeFile(t, "turns.yaml", "trajectory:\n  turns: 3\n")
	out, err := e.wmrl(t, "run", "--preset", "tiny", "--config", cfg, "--name", name, "--poll", "100ms")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	t.Logf("wmrl run --preset tiny (3 turns):\n%s", out)
	// The step line: 3 turns; 4 anchor trajectories executed 3 times; the
	// world model answers 12 trajectories' 3 turns and grades the 12 real
	// turns.
	for step := range 3 {
		if w := fmt.Sprintf("step %d: rho ", step); !strings.Contains(out, w) {
			t.Errorf("run output lacks %q", w)
		}
	}
	// Per turn: 4 executions, their CPU seconds (0.000 with this stack's
	// sandbox, as the cost line's; TestTurnSummaries sums nonzero ones),
	// 16 world-model calls.
	line := regexp.MustCompile(`anchors 1 groups, 3 turns, 12 executed \(4/4/4\), [0-9.]+ CPU-s \([0-9.]+/[0-9.]+/[0-9.]+\), ` +
		`48 world-model calls \(16/16/16\), reward `)
	if n := len(line.FindAllString(out, -1)); n != 3+1 {
		t.Errorf("run output: %d step lines matching %s; want 3 and the status's last step", n, line)
	}
	var sr statusReport
	e.wmrlJSON(t, &sr, "status", name)
	if c := sr.LastTurns; c == nil || c.Turns != 3 || c.WMCalls != 48 || c.Executions != 12 || len(c.ByTurn) != 3 {
		t.Errorf("status last_turns %+v, want 3 turns, 48 world-model calls, 12 executions", sr.LastTurns)
	} else {
		var cpu float64
		for i, b := range c.ByTurn {
			if b.Turn != i+1 || b.Executions != 4 || b.WMCalls != 16 || b.CPUSeconds < 0 {
				t.Errorf("status last_turns turn %d: %+v, want 4 executions with their CPU seconds, 16 world-model calls", i+1, b)
			}
			cpu += b.CPUSeconds
		}
		if math.Abs(cpu-c.CPUSeconds) > 1e-9 {
			t.Errorf("status last_turns: CPU seconds %v, the turns' sum %v", c.CPUSeconds, cpu)
		}
	}

	var in inspectReport
	e.wmrlJSON(t, &in, "inspect", name, "--step", "1")
	if len(in.Trajectories) != 16 {
		t.Fatalf("inspect: %d trajectories, want 16", len(in.Trajectories))
	}
	real, wm := 0, 0
	for _, tr := range in.Trajectories {
		if len(tr.Turns) != 3 {
			t.Fatalf("trajectory g%d/s%d: %d turns, want 3", tr.Group, tr.Sample, len(tr.Turns))
		}
		if tr.Turns[0].Action != tr.Program {
			t.Errorf("g%d/s%d: turn 1's action %q, the trajectory's program %q", tr.Group, tr.Sample, tr.Turns[0].Action, tr.Program)
		}
		for i, x := range tr.Turns {
			if x.Turn != i+1 || x.Source != tr.Turns[0].Source || x.Action == "" || x.Status == "" ||
				!strings.HasPrefix(x.Observation, "=== Execution result ===\nstatus: "+x.Status+"\n") {
				t.Errorf("g%d/s%d turn %d: %+v", tr.Group, tr.Sample, i+1, x)
			}
			if x.Source == store.SourceReal && x.WM == nil {
				t.Errorf("g%d/s%d turn %d: a real turn without the world model's grade", tr.Group, tr.Sample, x.Turn)
			}
		}
		switch tr.Turns[0].Source {
		case store.SourceReal:
			real++
			if tr.Real == nil {
				t.Errorf("g%d/s%d: real turns, no r_env", tr.Group, tr.Sample)
			}
		case store.SourceWorldModel:
			wm++
		}
	}
	if real == 0 || wm == 0 || real+wm != 16 {
		t.Errorf("%d trajectories answered for real, %d by the world model", real, wm)
	}
	text, err := e.wmrl(t, "inspect", name, "--step", "1", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wmrl inspect --step 1 --limit 2:\n%s", text)
	for _, w := range []string{"turns (16 trajectories", " | 2: ", " | 3: ", "... 14 more (--json"} {
		if !strings.Contains(text, w) {
			t.Errorf("inspect text lacks %q", w)
		}
	}

	// The report: reward by turn index and the share that improved, for
	// each source, over the 3 completed steps (4 anchor trajectories and
	// 12 world-model ones each).
	var d runreport.Data
	e.wmrlJSON(t, &d, "report", name)
	if d.Turns == nil || d.Turns.K != 3 || len(d.Turns.ByIndex) != 6 {
		t.Fatalf("report turns %+v, want 3 turns of 2 sources", d.Turns)
	}
	want := map[store.Source]int{store.SourceReal: 3 * 4, store.SourceWorldModel: 3 * 12}
	for i, x := range d.Turns.ByIndex {
		if x.Turn != 1+i/2 || x.Turns != want[x.Source] || x.Answered != x.Turns || x.Rewarded != x.Turns ||
			(x.Source == store.SourceReal) != (x.WMGraded == x.Turns) || x.MeanReward <= 0 || x.MeanReward > 1 {
			t.Errorf("report turn row %d: %+v", i, x)
		}
	}
	turns, err := e.st.StepTurns(t.Context(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	improved := map[store.Source]int{}
	for i := 0; i < len(turns); i += 3 {
		if r := turns[i : i+3]; max(*r[1].Answer.Reward, *r[2].Answer.Reward) > *r[0].Answer.Reward {
			improved[r[0].Source]++
		}
	}
	for _, x := range d.Turns.Improved {
		if x.Compared != want[x.Source] || x.Improved > x.Compared {
			t.Errorf("improved %+v, want %d compared", x, want[x.Source])
		}
	}
	step0, err := e.st.TurnImprovements(t.Context(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range step0 {
		if x.Improved != improved[x.Source] {
			t.Errorf("step 0, %s: %d improved, counted %d from its turns", x.Source, x.Improved, improved[x.Source])
		}
	}
	page := filepath.Join(t.TempDir(), "turns.html")
	out, err = e.wmrl(t, "report", name, "--out", page)
	if err != nil || !strings.Contains(out, "turns: 3 per trajectory; mean reward by turn: real ") ||
		!strings.Contains(out, "improved after turn 1: real ") {
		t.Errorf("report: %v\n%s", err, out)
	}
	t.Logf("wmrl report:\n%s", out)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	// worldmodel anchors: the trajectory-level pairs (4 anchor trajectories
	// a step) and, per turn index, the per-turn pairs of the same turns.
	var an anchorsReport
	e.wmrlJSON(t, &an, "worldmodel", "anchors", name)
	if len(an.Ranges) != 1 || an.Ranges[0].Pairs != 12 || len(an.Turns) != 3 {
		t.Fatalf("anchors: ranges %+v, turns %+v; want 12 pairs and 3 turn indices", an.Ranges, an.Turns)
	}
	for i, tr := range an.Turns {
		if tr.Turn != i+1 || len(tr.Ranges) != 1 || tr.Ranges[0].Pairs != 12 || tr.Ranges[0].Groups != 3 {
			t.Errorf("anchors, turn %d: %+v; want 12 pairs in 3 groups", i+1, tr)
		}
	}
	text, err = e.wmrl(t, "worldmodel", "anchors", name)
	if err != nil || !strings.Contains(text, "per turn index (every real turn") {
		t.Errorf("worldmodel anchors: %v\n%s", err, text)
	}
	t.Logf("wmrl worldmodel anchors:\n%s", text)
	for _, w := range []string{`<section id="turns">`, `<figure id="fig-turns">`, "Improved after their first turn", " 36 real turns executed: ", "<td class=\"l\">world_model</td>"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("report page lacks %q", w)
		}
	}
}
