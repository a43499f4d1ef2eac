package main

import (
	"strings"
	"testing"

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
}
