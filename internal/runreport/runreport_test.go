package runreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"gonum.org/v1/plot/plotutil"

	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
	"github.com/wmrl/wmrl/internal/testenv"
)

// WriteRun stores a wmrl run of planned steps through the store's own
// writes, as the activities do: per step 2 groups of 4, all scored by the
// world model, group 1 the anchor group, executed (CPU 0.25 s each) with
// its anchor pairs recorded; the calibration map of every step fitted on
// the pairs so far (the identity at step 0: 4 pairs, fewer than
// min_pairs 8); the step's metrics; held-out evaluations of checkpoints 2
// and 4. The first done steps complete; step done, when planned, is left
// running with its map stored. It returns the number of knots of each
// step's map.
func WriteRun(t *testing.T, st *store.Store, id string, done, planned int) []int {
	t.Helper()
	ctx := t.Context()
	run := store.Run{ID: id, Name: id, Mode: mode.WMRL, Config: json.RawMessage(`{}`), Seed: 3, Steps: planned, State: store.RunRunning}
	if err := st.UpsertRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	var wm, env []float64
	var knots []int
	for step := range min(done+1, planned) {
		if err := st.StartStep(ctx, id, step); err != nil {
			t.Fatal(err)
		}
		var sols []store.Solution
		var scores []store.Score
		var execs []store.Execution
		var pairs []store.AnchorPair
		for g := range 2 {
			for i := range 4 {
				k := store.Key{Run: id, Step: step, Group: g, Sample: i}
				x := 0.1 + 0.2*float64(i) + 0.05*float64(step)
				sols = append(sols, store.Solution{Key: k, TaskID: "t", Program: "p"})
				scores = append(scores, store.Score{Key: k, WM: x})
				if g == 1 {
					r := executor.NewResult(executor.StatusOK, 0.9, float64((i*3+step)%4)/4, "")
					r.CPUSeconds, r.WallSeconds = 0.25, 0.5
					y := r.Score
					execs = append(execs, store.Execution{Key: k, Result: r})
					pairs = append(pairs, store.AnchorPair{Key: k, WM: x, Env: y})
					wm, env = append(wm, x), append(env, y)
				}
			}
		}
		if _, err := st.InsertTrajectories(ctx, sols); err != nil {
			t.Fatal(err)
		}
		if err := st.SetWMScores(ctx, scores); err != nil {
			t.Fatal(err)
		}
		if err := st.SetAnchors(ctx, id, step, []int{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordExecutions(ctx, execs); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordAnchorPairs(ctx, pairs); err != nil {
			t.Fatal(err)
		}
		cal := store.Calibration{Run: id, Step: step, NPairs: len(wm)}
		if len(wm) >= 8 {
			m, err := isotonic.Fit(wm, env, nil)
			if err != nil {
				t.Fatal(err)
			}
			cal.Map = m
		}
		before, after := 0.1/float64(step+1), 0.0
		cal.BiasBefore, cal.BiasAfter = &before, &after
		if err := st.SaveCalibration(ctx, cal); err != nil {
			t.Fatal(err)
		}
		knots = append(knots, len(cal.Map.X))
		if step == done {
			break
		}
		m := stepsummary.Step{Groups: 2, Samples: 4, AnchorGroups: 1, Trajectories: 8, Executed: 4, Graded: 8,
			MeanReward: 0.5 + 0.01*float64(step), MeanEnv: 0.6, MeanWM: 0.4, Rho: 1 + 0.25*float64(step),
			CalibrationPairs: len(wm), BiasBefore: before, BiasAfter: after, CPUSeconds: 1, WallSeconds: 2}
		if err := st.FinishStep(ctx, id, step, store.StepCompleted, m); err != nil {
			t.Fatal(err)
		}
		if v := step + 1; v == 2 || v == 4 {
			var evs []store.Evaluation
			for i := range 2 {
				r := executor.NewResult(executor.StatusOK, 0.7, 0.25*float64(v+i)/4, "")
				evs = append(evs, store.Evaluation{Run: id, Step: v, TaskID: "h", Sample: i, Program: "p", Result: r})
			}
			if _, err := st.SaveEvaluations(ctx, evs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if done == planned {
		if err := st.SetRunState(ctx, id, store.RunCompleted); err != nil {
			t.Fatal(err)
		}
	}
	return knots
}

// parsed is a report page, parsed.
type parsed struct {
	root *html.Node
}

func parse(t *testing.T, page []byte) parsed {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	return parsed{root}
}

// find returns the elements named tag under n, in document order.
func find(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && d.Data == tag {
			out = append(out, d)
		}
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func (p parsed) byID(id string) *html.Node {
	for d := range p.root.Descendants() {
		if d.Type == html.ElementNode && attr(d, "id") == id {
			return d
		}
	}
	return nil
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

// svgPoints decodes the figure's <svg> as XML (it must be well formed)
// and returns the number of points drawn for each curve, read from the
// paths stroked in the curve's colour: a curve draws its line and a glyph
// per point, and its legend entry a line and a glyph. Glyphs of shapes
// 0-2 (ring, square, triangle) are one closed path, of shapes 3-4 (cross,
// plus) two open paths.
func svgPoints(t *testing.T, fig *html.Node, curves int) []int {
	t.Helper()
	svgs := find(fig, "svg")
	if len(svgs) != 1 {
		t.Fatalf("figure %s: %d <svg> elements, want 1", attr(fig, "id"), len(svgs))
	}
	var b bytes.Buffer
	if err := html.Render(&b, svgs[0]); err != nil {
		t.Fatal(err)
	}
	type path struct{ d, style string }
	var paths []path
	dec := xml.NewDecoder(&b)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("figure %s: svg is not well-formed XML: %v", attr(fig, "id"), err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "path" {
			var p path
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "d":
					p.d = a.Value
				case "style":
					p.style = a.Value
				}
			}
			paths = append(paths, p)
		}
	}
	out := make([]int, curves)
	for i := range curves {
		r, g, bl, _ := plotutil.Color(i).RGBA()
		stroke := fmt.Sprintf("stroke:#%02X%02X%02X", r>>8, g>>8, bl>>8)
		closed, open := 0, 0
		for _, p := range paths {
			if !strings.Contains(p.style, stroke) {
				continue
			}
			if strings.HasSuffix(p.d, "Z") {
				closed++
			} else {
				open++
			}
		}
		switch {
		case open == 0 && closed == 0:
			out[i] = 0
		case i < 3:
			out[i] = closed - 1
		default:
			out[i] = (open-2)/2 - 1
		}
	}
	return out
}

// tableRows counts the data rows (<tr> with <td>) of the tables under n.
func tableRows(n *html.Node) int {
	rows := 0
	for _, tr := range find(n, "tr") {
		if len(find(tr, "td")) > 0 {
			rows++
		}
	}
	return rows
}

// checkPage checks a report of a wmrl run with the given completed steps
// (held-out evaluations of checkpoints 2 and 4) and drawn maps of mapKnots
// knots each.
func checkPage(t *testing.T, page []byte, steps int, mapKnots []int) {
	t.Helper()
	p := parse(t, page)
	for _, id := range []string{"summary", "reward", "heldout", "rho", "bias", "cost", "calibration", "steps"} {
		s := p.byID(id)
		if s == nil || s.Data != "section" {
			t.Errorf("no section %q", id)
		}
	}
	heldOut := 0 // checkpoints 2 and 4
	for _, v := range []int{2, 4} {
		if v <= steps {
			heldOut++
		}
	}
	curve := func(n int) []int { return []int{n} }
	maps := append(slices.Clone(mapKnots), 2) // and the identity
	tests := []struct {
		fig  string
		want []int
	}{
		{"fig-reward", []int{steps, steps, steps}},
		{"fig-heldout", curve(heldOut)},
		{"fig-rho", curve(steps)},
		{"fig-bias", []int{steps, steps}},
		{"fig-executions", curve(steps)},
		{"fig-cpu", curve(steps)},
		{"fig-maps", maps},
	}
	for _, tt := range tests {
		fig := p.byID(tt.fig)
		if fig == nil || fig.Data != "figure" {
			t.Errorf("no figure %s", tt.fig)
			continue
		}
		if got := svgPoints(t, fig, len(tt.want)); !slices.Equal(got, tt.want) {
			t.Errorf("figure %s: points per curve %v, want %v", tt.fig, got, tt.want)
		}
		if len(find(fig, "figcaption")) != 1 {
			t.Errorf("figure %s without caption", tt.fig)
		}
	}
	if got := tableRows(p.byID("steps")); got != steps {
		t.Errorf("steps table: %d rows, want %d", got, steps)
	}
	if got := tableRows(p.byID("calibration")); got != len(mapKnots) {
		t.Errorf("calibration table: %d rows, want %d", got, len(mapKnots))
	}
}

func TestReportCompletedRun(t *testing.T) {
	st := testenv.FreshStore(t)
	knots := WriteRun(t, st, "report-done", 5, 5)
	d, err := Collect(t.Context(), st, "report-done", 3)
	if err != nil {
		t.Fatal(err)
	}
	// Steps 1..4 have fitted maps (8, 12, 16, 20 pairs), step 0 the
	// identity; 3 of 4 are drawn: steps 1, 3 and 4.
	if len(d.Steps) != 5 || d.Fitted != 4 || d.Identity != 1 || len(d.Maps) != 3 {
		t.Fatalf("collected %d steps, %d fitted maps, %d identity, %d drawn", len(d.Steps), d.Fitted, d.Identity, len(d.Maps))
	}
	var drawn, want []int
	for _, c := range d.Maps {
		drawn = append(drawn, c.Step)
	}
	if !slices.Equal(drawn, []int{1, 3, 4}) {
		t.Errorf("maps of steps %v, want [1 3 4]", drawn)
	}
	for _, s := range drawn {
		want = append(want, knots[s])
	}
	if s := d.Steps[3]; s.Executions != 4 || s.CPUSeconds != 1 || s.WMCalls != 8 || s.Rho != 1.75 || s.MeanReward != 0.53 ||
		s.HeldOut == nil || *s.HeldOut != 0.25*4.5/4 || d.Steps[2].HeldOut != nil || s.CalibrationPairs != 16 {
		t.Errorf("step 3: %+v", s)
	}
	var page bytes.Buffer
	if err := Write(&page, d); err != nil {
		t.Fatal(err)
	}
	checkPage(t, page.Bytes(), 5, want)
	for _, w := range []string{"<title>wmrl run report-done</title>", "5 completed of 5 planned", "completed", "4 of the 5 completed steps have a fitted map"} {
		if !strings.Contains(page.String(), w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if d.Turns != nil || strings.Contains(page.String(), `id="turns"`) {
		t.Errorf("a single-shot run has turns %+v, or a turns section", d.Turns)
	}
	t.Logf("page: %d bytes", page.Len())

	// The same rows give the same page.
	var again bytes.Buffer
	if err := Write(&again, d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(page.Bytes(), again.Bytes()) {
		t.Error("two pages of the same rows differ")
	}
}

func TestReportRunInProgress(t *testing.T) {
	st := testenv.FreshStore(t)
	knots := WriteRun(t, st, "report-running", 3, 6)
	d, err := Collect(t.Context(), st, "report-running", DefaultMaps)
	if err != nil {
		t.Fatal(err)
	}
	// Step 3 runs: its trajectories and map are left out.
	if len(d.Steps) != 3 || d.Run.State != store.RunRunning || d.Fitted != 2 || len(d.Maps) != 2 {
		t.Fatalf("collected %d steps (state %s), %d fitted, %d drawn", len(d.Steps), d.Run.State, d.Fitted, len(d.Maps))
	}
	var page bytes.Buffer
	if err := Write(&page, d); err != nil {
		t.Fatal(err)
	}
	checkPage(t, page.Bytes(), 3, knots[1:3])
	if !strings.Contains(page.String(), "3 completed of 6 planned") {
		t.Error("page does not say 3 of 6 steps completed")
	}
	if _, err := Collect(t.Context(), st, "no-such-run", DefaultMaps); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v, want ErrNotFound", err)
	}
}

// A run without a completed step, and a grpo run (no world model, no
// calibration), still give every section, with notes instead of plots.
func TestReportNotes(t *testing.T) {
	st := testenv.FreshStore(t)
	WriteRun(t, st, "report-new", 0, 4)
	ctx := t.Context()
	if err := st.UpsertRun(ctx, store.Run{ID: "report-grpo", Name: "report-grpo", Mode: mode.GRPO, Config: json.RawMessage(`{}`), Seed: 1, Steps: 1, State: store.RunRunning}); err != nil {
		t.Fatal(err)
	}
	if err := st.StartStep(ctx, "report-grpo", 0); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishStep(ctx, "report-grpo", 0, store.StepCompleted, stepsummary.Step{Groups: 1, Rho: 1}); err != nil {
		t.Fatal(err)
	}
	// A wmrl run whose signal gate closed in its second step.
	if err := st.UpsertRun(ctx, store.Run{ID: "report-gate", Name: "report-gate", Mode: mode.WMRL, Config: json.RawMessage(`{}`), Seed: 1, Steps: 2, State: store.RunRunning}); err != nil {
		t.Fatal(err)
	}
	for i, g := range []denoise.Gate{{Groups: 4, Mean: 0.6, Low: 0.2, Open: true}, {Groups: 6, Mean: 0.05, Low: -0.2}} {
		if err := st.StartStep(ctx, "report-gate", i); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishStep(ctx, "report-gate", i, store.StepCompleted, stepsummary.Step{Groups: 1, Rho: 2, Gate: &g}); err != nil {
			t.Fatal(err)
		}
	}
	// A grpo run whose step 1 started 2 s before step 0's update ended.
	if err := st.UpsertRun(ctx, store.Run{ID: "report-time", Name: "report-time", Mode: mode.GRPO, Config: json.RawMessage(`{}`), Seed: 1, Steps: 2, State: store.RunRunning}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	sp := func(a, b int) stepsummary.Span {
		return stepsummary.Span{Start: t0.Add(time.Duration(a) * time.Second), End: t0.Add(time.Duration(b) * time.Second)}
	}
	for i, sg := range []stepsummary.Stages{
		{Step: sp(0, 10), Generate: sp(0, 3), Execute: sp(1, 6), CalibrateFuse: sp(6, 7), Update: sp(7, 10)},
		{Step: sp(8, 18), Generate: sp(8, 11), Execute: sp(9, 14), CalibrateFuse: sp(14, 15), Update: sp(15, 18)},
	} {
		if err := st.StartStep(ctx, "report-time", i); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishStep(ctx, "report-time", i, store.StepCompleted, stepsummary.Step{Groups: 1, Rho: 1, Stages: sg}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		run   string
		notes map[string]string
		figs  []string
	}{
		{"report-time", map[string]string{"time": "Mean over the 2 steps with stage times: generate 3.000 s (1.000 s overlapped), " +
			"execute 5.000 s (0.500 s overlapped), calibrate+fuse 1.000 s (0.000 s overlapped), update 3.000 s (1.000 s overlapped), " +
			"whole step 10.000 s (2.000 s overlapped)."},
			[]string{"fig-reward", "fig-rho", "fig-executions", "fig-cpu", "fig-time"}},
		{"report-grpo", map[string]string{"time": "No completed step has stage times"}, []string{"fig-reward", "fig-rho", "fig-executions", "fig-cpu"}},
		{"report-gate", map[string]string{"rho": "The signal gate closed in 1 of the 2 completed steps"},
			[]string{"fig-reward", "fig-rho", "fig-gate", "fig-bias", "fig-executions", "fig-cpu"}},
		{"report-new", map[string]string{"reward": "No completed step yet.", "calibration": "No completed step yet.", "steps": "No completed step yet."}, nil},
		{"report-grpo", map[string]string{"heldout": "has been evaluated yet", "rho": "Mode grpo does not denoise", "bias": "Mode grpo does not debias",
			"calibration": "no map is fitted"}, []string{"fig-reward", "fig-rho", "fig-executions", "fig-cpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.run, func(t *testing.T) {
			d, err := Collect(ctx, st, tt.run, DefaultMaps)
			if err != nil {
				t.Fatal(err)
			}
			var page bytes.Buffer
			if err := Write(&page, d); err != nil {
				t.Fatal(err)
			}
			p := parse(t, page.Bytes())
			for id, note := range tt.notes {
				if s := p.byID(id); s == nil || !strings.Contains(text(s), note) {
					t.Errorf("section %s lacks %q", id, note)
				}
			}
			var figs []string
			for _, f := range find(p.root, "figure") {
				figs = append(figs, attr(f, "id"))
			}
			if !slices.Equal(figs, tt.figs) {
				t.Errorf("figures %v, want %v", figs, tt.figs)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		n, k int
		want []int
	}{
		{0, 4, []int{}}, {3, 4, []int{0, 1, 2}}, {4, 4, []int{0, 1, 2, 3}}, {10, 1, []int{9}}, {10, 0, nil},
		{5, 2, []int{0, 4}}, {4, 3, []int{0, 2, 3}}, {10, 4, []int{0, 3, 6, 9}}, {100, 4, []int{0, 33, 66, 99}},
	}
	for _, tt := range tests {
		if got := spread(tt.n, tt.k); !slices.Equal(got, tt.want) {
			t.Errorf("spread(%d, %d) = %v, want %v", tt.n, tt.k, got, tt.want)
		}
	}
}
