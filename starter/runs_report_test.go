package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runreport"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

// writeReportRun stores a debias run of 3 planned steps through the store's
// writes: per step one group of 4 scored by the world model and executed
// (its anchor pairs recorded), the step's map fitted on the pairs so far,
// its metrics, and a held-out evaluation of checkpoint 2. Steps 0 and 1
// complete; step 2 is left running.
func writeReportRun(t *testing.T, st *store.Store, id string) {
	t.Helper()
	ctx := t.Context()
	if err := st.UpsertRun(ctx, store.Run{ID: id, Name: id, Mode: mode.Debias, Config: json.RawMessage(`{}`), Seed: 2, Steps: 3, State: store.RunRunning}); err != nil {
		t.Fatal(err)
	}
	var wm, env []float64
	for step := range 3 {
		if err := st.StartStep(ctx, id, step); err != nil {
			t.Fatal(err)
		}
		var sols []store.Solution
		var scores []store.Score
		var execs []store.Execution
		var pairs []store.AnchorPair
		for i := range 4 {
			k := store.Key{Run: id, Step: step, Group: 0, Sample: i}
			x := 0.2*float64(i) + 0.1*float64(step)
			r := executor.NewResult(executor.StatusOK, 0.5, float64((i+step)%4)/4, "")
			r.CPUSeconds = 0.5
			sols = append(sols, store.Solution{Key: k, TaskID: "t", Program: "p"})
			scores = append(scores, store.Score{Key: k, WM: x})
			execs = append(execs, store.Execution{Key: k, Result: r})
			pairs = append(pairs, store.AnchorPair{Key: k, WM: x, Env: r.Score})
			wm, env = append(wm, x), append(env, r.Score)
		}
		for _, err := range []error{
			func() error { _, err := st.InsertTrajectories(ctx, sols); return err }(),
			st.SetWMScores(ctx, scores),
			st.SetAnchors(ctx, id, step, []int{0}),
			func() error { _, err := st.RecordExecutions(ctx, execs); return err }(),
			func() error { _, err := st.RecordAnchorPairs(ctx, pairs); return err }(),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		m, err := isotonic.Fit(wm, env, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveCalibration(ctx, store.Calibration{Run: id, Step: step, Map: m, NPairs: len(wm)}); err != nil {
			t.Fatal(err)
		}
		if step == 2 {
			break
		}
		if err := st.FinishStep(ctx, id, step, store.StepCompleted, stepsummary.Step{Groups: 1, AnchorGroups: 1, Rho: 1, MeanReward: 0.6}); err != nil {
			t.Fatal(err)
		}
	}
	ev := store.Evaluation{Run: id, Step: 2, TaskID: "h", Program: "p", Result: executor.NewResult(executor.StatusOK, 0.5, 0.75, "")}
	if _, err := st.SaveEvaluations(ctx, []store.Evaluation{ev}); err != nil {
		t.Fatal(err)
	}
}

// TestReportCmd runs wmrl report on a run in progress: the page written
// to --out (or stdout) holds its two completed steps.
func TestReportCmd(t *testing.T) {
	st, dsn := testenv.FreshDB(t)
	writeReportRun(t, st, "rep-cli")
	dir := t.TempDir()
	out := filepath.Join(dir, "page.html")

	status, stdout, stderr := runTree("report", "rep-cli", "--out", out, "--database-url", dsn)
	if status != exitOK || stderr != "" {
		t.Fatalf("report: exit %d, stderr %q", status, stderr)
	}
	if want := "wrote " + out + ": run rep-cli (debias, running), 2 of 3 steps completed, 2 calibration maps"; !strings.HasPrefix(stdout, want) {
		t.Errorf("stdout %q, want it to start %q", stdout, want)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	checkReportPage(t, page, 2, true)
	if names, _ := filepath.Glob(filepath.Join(dir, ".*")); len(names) > 0 {
		t.Errorf("temporary files left: %v", names)
	}

	// --out - writes the same page to stdout.
	status, stdout, stderr = runTree("report", "rep-cli", "--out", "-", "--database-url", dsn)
	if status != exitOK || stderr != "" || stdout != string(page) {
		t.Errorf("report --out -: exit %d, stderr %q, %d bytes (file: %d)", status, stderr, len(stdout), len(page))
	}

	// --json: the data, no page.
	status, stdout, stderr = runTree("report", "rep-cli", "--json", "--maps", "1", "--database-url", dsn)
	var d runreport.Data
	if status != exitOK || stderr != "" || json.Unmarshal([]byte(stdout), &d) != nil {
		t.Fatalf("report --json: exit %d, stderr %q, stdout %q", status, stderr, stdout)
	}
	if d.Run.ID != "rep-cli" || len(d.Steps) != 2 || d.Steps[1].HeldOut == nil || *d.Steps[1].HeldOut != 0.75 ||
		d.Steps[1].Executions != 4 || d.Steps[1].CPUSeconds != 2 || d.Fitted != 2 || len(d.Maps) != 1 || d.Maps[0].Step != 1 {
		t.Errorf("report --json: %+v", d)
	}

	// Without --out: RUN.html in the working directory.
	t.Chdir(dir)
	if status, _, stderr := runTree("report", "rep-cli", "--database-url", dsn, "--maps", "1"); status != exitOK {
		t.Fatalf("report without --out: exit %d, stderr %q", status, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "rep-cli.html")); err != nil || !bytes.Contains(b, []byte("2 of the 2 completed steps have a fitted map")) {
		t.Errorf("rep-cli.html: %v", err)
	}

	// An unknown run is named; nothing is written.
	status, stdout, stderr = runTree("report", "no-such-run", "--out", filepath.Join(dir, "none.html"), "--database-url", dsn)
	if status != exitRuntime || stdout != "" || stderr != "wmrl: no run \"no-such-run\" (wmrl list shows the runs)\n" {
		t.Errorf("unknown run: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.html")); !os.IsNotExist(err) {
		t.Errorf("page of an unknown run: %v", err)
	}
	// A directory that does not exist is an error naming it.
	status, _, stderr = runTree("report", "rep-cli", "--out", filepath.Join(dir, "no", "x.html"), "--database-url", dsn)
	if status != exitRuntime || !strings.Contains(stderr, filepath.Join(dir, "no")) {
		t.Errorf("--out in a missing directory: exit %d, stderr %q", status, stderr)
	}
}

// checkReportPage parses a report page and checks its sections, its curve
// plots (and the plot of the maps when maps is true), and the rows of its
// steps table.
func checkReportPage(t *testing.T, page []byte, steps int, maps bool) {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	rows := 0
	for n := range root.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		for _, a := range n.Attr {
			if a.Key == "id" {
				ids[a.Val] = n.Data
				if a.Val == "steps" {
					for r := range n.Descendants() {
						if r.Type == html.ElementNode && r.Data == "td" && r.Parent.FirstChild == r {
							rows++
						}
					}
				}
			}
		}
	}
	for _, id := range []string{"summary", "reward", "heldout", "rho", "bias", "cost", "calibration", "steps"} {
		if ids[id] != "section" {
			t.Errorf("no section %s", id)
		}
	}
	figs := []string{"fig-reward", "fig-heldout", "fig-rho", "fig-bias", "fig-executions", "fig-cpu"}
	if maps {
		figs = append(figs, "fig-maps")
	}
	for _, id := range figs {
		if ids[id] != "figure" {
			t.Errorf("no figure %s", id)
		}
	}
	if rows != steps {
		t.Errorf("steps table: %d rows, want %d", rows, steps)
	}
}
