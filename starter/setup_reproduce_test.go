package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/reproduce"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/internal/store"
)

// benchNamespace keeps the benchmark test's tasks away from the workers of
// any other test process on the same server.
const benchNamespace = "wmrl-bench-test"

func TestBenchPlan(t *testing.T) {
	plan, base, err := benchPlan("tiny", "b1", 1, 2, 5, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	nm := len(mode.All())
	if len(plan) != 2*nm || base.Steps != 5 {
		t.Fatalf("%d runs, %d steps", len(plan), base.Steps)
	}
	if r := plan[2]; r.ID != "b1-wmrl-s1" || r.Mode != mode.WMRL || r.Seed != 1 || r.Cfg.Name != r.ID || r.Cfg.Seed != 1 || r.Cfg.Steps != 5 {
		t.Errorf("run 2: %+v", r)
	}
	if r := plan[nm-1]; r.ID != "b1-anchor-s1" || r.Cfg.Mode != mode.Anchor || r.Cfg.Anchors != plan[2].Cfg.Anchors {
		t.Errorf("run %d: %+v, want anchor with wmrl's anchors", nm-1, r)
	}
	if r := plan[nm]; r.ID != "b1-grpo-s2" {
		t.Errorf("run %d: %s", nm, r.ID)
	}
	def, _, err := benchPlan("small", "", 1, 1, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := runconfig.BenchPreset("small")
	if def[0].ID != "bench-small-grpo-s1" || def[0].Cfg.Steps != small.Steps {
		t.Errorf("default id: %+v", def[0])
	}
	for _, give := range [][]any{{"huge", "", 1, 0}, {"tiny", "", 0, 0}, {"tiny", "", 1, -1}, {"tiny", "has space", 1, 0}} {
		if _, _, err := benchPlan(give[0].(string), give[1].(string), 1, give[2].(int), give[3].(int), nil, nil); err == nil {
			t.Errorf("benchPlan%v accepted", give)
		}
	}
}

func TestBenchPlanFromSeed(t *testing.T) {
	plan, _, err := benchPlan("tiny", "b1", 2, 3, 0, nil, []mode.Mode{mode.GRPO})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].ID != "b1-grpo-s2" || plan[0].Cfg.Seed != 2 || plan[1].ID != "b1-grpo-s3" {
		t.Fatalf("--from-seed 2 --seeds 3: %+v", plan)
	}
	for _, from := range []int{0, 4} {
		if _, _, err := benchPlan("tiny", "b1", from, 3, 0, nil, nil); err == nil || !strings.Contains(err.Error(), "--from-seed") {
			t.Errorf("--from-seed %d --seeds 3: %v", from, err)
		}
	}
}

func TestBenchPlanOverlay(t *testing.T) {
	modes, err := parseModes(" wmrl, grpo")
	if err != nil || len(modes) != 2 || modes[0] != mode.GRPO || modes[1] != mode.WMRL {
		t.Fatalf("parseModes: %v %v", modes, err)
	}
	plan, base, err := benchPlan("small", "x", 1, 2, 0, []byte("denoise:\n  rho_max: 100\n  warmup: 8\n"), modes)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := runconfig.BenchPreset("small")
	if len(plan) != 4 || plan[1].ID != "x-wmrl-s1" || plan[2].ID != "x-grpo-s2" {
		t.Fatalf("plan %+v", plan)
	}
	for _, r := range plan {
		if r.Cfg.Denoise.RhoMax != 100 || r.Cfg.Denoise.Warmup != 8 || r.Cfg.Denoise.HalfLife != small.Denoise.HalfLife || r.Cfg.Steps != small.Steps {
			t.Errorf("%s: denoise %+v steps %d", r.ID, r.Cfg.Denoise, r.Cfg.Steps)
		}
	}
	if base.Denoise.RhoMax != 100 {
		t.Errorf("base rho_max %v", base.Denoise.RhoMax)
	}
	for give, want := range map[string]string{
		"wmrl,bogus": "--modes", "grpo,grpo": "given twice",
	} {
		if _, err := parseModes(give); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseModes(%q): %v, want %q", give, err, want)
		}
	}
	for give, want := range map[string]string{
		"steps: 3\nmode: wm\n":      "line 2: mode is set by the benchmark",
		"seed: 4\n":                 "line 1: seed",
		"denoise:\n  rho_maxx: 3\n": "rho_maxx",
		"denoise:\n  rho_max: -1\n": "rho_max",
		"policy: [1, 2]\n":          "line 1",
	} {
		_, _, err := benchPlan("small", "x", 1, 1, 0, []byte(give), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("overlay %q: %v, want %q", give, err, want)
		}
	}
}

// benchStack is stack in the benchmark's namespace: it returns the store
// and the connection flags.
func benchStack(t *testing.T) (*store.Store, []string) {
	t.Helper()
	e := stack(t, benchNamespace)
	return e.st, e.flags
}

// TestBenchReproduce runs the tiny benchmark (one seed, every mode) through
// the real stack and checks its bookkeeping against the database: the
// executions of each mode are the trajectories graded by real execution
// (all of them in grpo, the anchor groups' in the anchor modes, none in
// wm; no world-model call in grpo and anchor), held-out evaluation is counted apart, and running the command again
// collects the finished runs instead of starting them over.
func TestBenchReproduce(t *testing.T) {
	st, flags := benchStack(t)
	ctx := t.Context()
	id := uniqueName("bt")
	dir := filepath.Join(t.TempDir(), "results")
	args := append([]string{"bench", "reproduce", "--preset", "tiny", "--seeds", "1", "--id", id, "--out", dir,
		"--poll", "100ms", "--json"}, flags...)
	runCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stdout, stderr, err := runCmd(runCtx, args...)
	if err != nil {
		t.Fatalf("bench reproduce: %v\n%s", err, stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, reproduce.FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	res, err := reproduce.DecodeResults(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if printed, err := reproduce.DecodeResults(strings.NewReader(stdout)); err != nil || printed.Header != res.Header {
		t.Errorf("--json output is not results.json: %v", err)
	}
	cfg, _ := runconfig.BenchPreset("tiny")
	if res.Preset != "tiny" || res.Steps != cfg.Steps || res.SuiteSeed != cfg.SuiteSeed || len(res.Runs) != len(mode.All()) {
		t.Fatalf("results: preset %s, %d steps, suite %d, %d runs", res.Preset, res.Steps, res.SuiteSeed, len(res.Runs))
	}
	if !strings.Contains(res.Header.Command, "--id="+id) || res.Header.Machine.Cores < 1 {
		t.Errorf("header %+v", res.Header)
	}
	G, n := cfg.Groups, cfg.Samples
	evalPerRun := cfg.Eval.Tasks * cfg.Eval.Samples // one evaluation, at the end
	for i, r := range res.Runs {
		if r.Mode != mode.All()[i] || r.Seed != 1 {
			t.Fatalf("run %d: %s seed %d", i, r.Mode, r.Seed)
		}
		runID := id + "-" + string(r.Mode) + "-s1"
		c, err := st.Count(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := st.Steps(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		// What the workflow says it executed, what the trajectories table
		// holds, and what the anchor choice implies must all agree.
		graded, anchorGroups, anchorExecuted := 0, 0, 0
		for _, s := range steps {
			graded += s.Metrics.Executed - s.Metrics.Ungraded
			anchorGroups += s.Metrics.AnchorGroups
			ts, err := st.StepTrajectories(ctx, runID, s.Step)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range ts {
				switch {
				case tr.Exec != nil && tr.Anchor:
					anchorExecuted++
				case tr.Exec != nil && r.Mode != mode.GRPO:
					t.Errorf("%s step %d: trajectory %d/%d executed but not an anchor", r.Mode, s.Step, tr.Group, tr.Sample)
				}
			}
		}
		if len(steps) != cfg.Steps || c.Trajectories != cfg.Steps*G*n {
			t.Errorf("%s: %d steps, %d trajectories", r.Mode, len(steps), c.Trajectories)
		}
		if r.Executions != c.Executed || r.Executions != graded {
			t.Errorf("%s: %d executions in results, %d executed trajectories, %d graded per the steps", r.Mode, r.Executions, c.Executed, graded)
		}
		if r.EvalExecutions != c.Evaluations || r.EvalExecutions != evalPerRun {
			t.Errorf("%s: %d eval executions in results, %d stored, want %d", r.Mode, r.EvalExecutions, c.Evaluations, evalPerRun)
		}
		switch pc := r.Mode.Pieces(); {
		case pc.ExecuteAll:
			if r.Executions != cfg.Steps*G*n || r.WMCalls != 0 {
				t.Errorf("grpo: %d executions, %d wm calls; want every trajectory executed, none scored", r.Executions, r.WMCalls)
			}
		case !pc.Anchors:
			if r.Executions != 0 || r.SandboxCPUSeconds != 0 || c.Executed != 0 || r.EvalExecutions == 0 {
				t.Errorf("wm: %d executions (%.3f CPU s), %d executed rows, %d eval executions; want executions only in evaluation",
					r.Executions, r.SandboxCPUSeconds, c.Executed, r.EvalExecutions)
			}
		default:
			if anchorGroups == 0 || r.Executions != anchorGroups*n || r.Executions != anchorExecuted {
				t.Errorf("%s: %d executions, %d anchor groups of %d, %d executed anchors", r.Mode, r.Executions, anchorGroups, n, anchorExecuted)
			}
		}
		if want := map[bool]int{true: cfg.Steps * G * n}[r.Mode.Pieces().WorldModel]; r.WMCalls != want {
			t.Errorf("%s: %d wm calls, want %d", r.Mode, r.WMCalls, want)
		}
	}
	for _, f := range []string{reproduce.FileMarkdown, reproduce.PlotHeldOutByStep, reproduce.PlotWMRLRho} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}

	// Again: every run is collected, none started.
	_, stderr, err = runCmd(runCtx, args...)
	if err != nil {
		t.Fatalf("bench reproduce again: %v\n%s", err, stderr)
	}
	if got := strings.Count(stderr, "completed earlier"); got != len(mode.All()) || strings.Contains(stderr, "started") {
		t.Errorf("second run: %d runs collected, want %d:\n%s", got, len(mode.All()), stderr)
	}
	again, err := os.ReadFile(filepath.Join(dir, reproduce.FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	res2, err := reproduce.DecodeResults(bytes.NewReader(again))
	if err != nil {
		t.Fatal(err)
	}
	for i := range res.Runs {
		if res2.Runs[i] != res.Runs[i] {
			t.Errorf("run %d collected again: %+v, first %+v", i, res2.Runs[i], res.Runs[i])
		}
	}
}

// TestBenchHeaderLeavesOutDatabaseURL: the results' header records the
// command line but never the database URL, which may hold a password.
func TestBenchHeaderLeavesOutDatabaseURL(t *testing.T) {
	root := newRootCmd()
	cmd, _, err := root.Find([]string{"bench", "reproduce"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags([]string{"--database-url", "host=db user=wmrl password=hunter2", "--seeds", "2"}); err != nil {
		t.Fatal(err)
	}
	h := benchHeader(cmd)
	if strings.Contains(h.Command, "hunter2") || !strings.Contains(h.Command, "--seeds=2") ||
		!strings.Contains(h.Command, "--database-url=(not recorded)") {
		t.Fatalf("header command %q", h.Command)
	}
}
