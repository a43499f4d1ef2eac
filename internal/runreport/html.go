package runreport

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"

	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/reproduce"
	"github.com/wmrl/wmrl/internal/stepsummary"
	"github.com/wmrl/wmrl/internal/store"
)

//go:embed report.html.tmpl
var pageText string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"f3": func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"f2": func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"opt": func(p *float64) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprintf("%.3f", *p)
	},
}).Parse(pageText))

// Figure is one plot of the page.
type Figure struct {
	// ID names the figure in the page (its element id).
	ID      string
	Caption string
	// SVG is the plot, an <svg> element drawn by reproduce.DrawLines.
	SVG template.HTML
	// Curves are what it draws.
	Curves []reproduce.Curve
}

// Section is one part of the page: a heading, figures, or a note saying
// why there are none.
type Section struct {
	ID, Title string
	Figures   []Figure
	Note      string
}

// view is what the template renders.
type view struct {
	Data
	Completed int
	Totals    totals
	Sections  []Section
}

type totals struct {
	Executions int
	CPUSeconds float64
	WMCalls    int
	HeldOut    *float64
	HeldOutAt  int
	Rho        float64
}

// fig is a figure to draw, sec a section of them.
type fig struct {
	id, title, x, y, caption string
	curves                   []reproduce.Curve
}

type sec struct {
	id, title string
	figs      []fig
	note      string
}

// Sections are the sections of the page for d, in order, with their
// plots drawn: reward, heldout, rho, bias, cost and calibration.
func Sections(d Data) ([]Section, error) {
	p := d.Run.Mode.Pieces()
	series := func(name string, keep func(Step) bool, f func(Step) float64) reproduce.Curve {
		c := reproduce.Curve{Name: name, Points: []reproduce.Point{}}
		for _, s := range d.Steps {
			if keep == nil || keep(s) {
				c.Points = append(c.Points, reproduce.Point{X: float64(s.Step), Y: f(s)})
			}
		}
		return c
	}
	executed := func(s Step) bool { return s.Executions > 0 }
	reward := []reproduce.Curve{series("training reward", nil, func(s Step) float64 { return s.MeanReward })}
	reward = append(reward, series("mean r_env (executed)", executed, func(s Step) float64 { return s.MeanEnv }))
	if p.WorldModel {
		reward = append(reward, series("mean r_wm (raw)", func(s Step) bool { return s.WMCalls > 0 }, func(s Step) float64 { return s.MeanWM }))
	}
	held := reproduce.Curve{Name: "held-out score", Points: []reproduce.Point{}}
	for _, s := range d.Steps {
		if s.HeldOut != nil {
			held.Points = append(held.Points, reproduce.Point{X: float64(s.Step + 1), Y: *s.HeldOut})
		}
	}

	gated := func(s Step) bool { return s.Gate != nil && s.Gate.Groups >= denoise.MinSignalGroups }
	secs := []sec{
		{id: "reward", title: "Reward", figs: []fig{{"fig-reward", "Training reward by step", "step", "reward",
			"Mean training reward of the step's trajectories (r_env where executed, r_wm through the map where the mode debiases, " +
				"else raw), the mean real score of the executed ones and the mean raw world-model score.", reward}}},
		{id: "heldout", title: "Held-out score", figs: []fig{{"fig-heldout", "Held-out score (avg@n)", "checkpoint (completed steps)", "held-out score",
			"Held-out score of the checkpoint after each evaluated step, by real execution.", []reproduce.Curve{held}}}},
		{id: "rho", title: "Anchor weight ρ", figs: []fig{{"fig-rho", "Anchor weight rho", "step", "rho",
			"ρ of each step: 1 before the denoiser's warm-up, about 2 while the world model is as noisy as during warm-up.",
			[]reproduce.Curve{series("rho", nil, func(s Step) float64 { return s.Rho })}},
			{"fig-gate", "No-harm signal gate", "step", "correlation with real scores",
				"The recent anchor groups' mean within-group correlation of the calibrated world-model scores with the real ones, " +
					"its lower confidence bound, and the world-model groups' weight (1: the gate was open, 0: closed, the step trained on its anchor groups alone; " +
					"under the difference estimator its λ, 0 being the anchor control).",
				[]reproduce.Curve{
					series("mean", gated, func(s Step) float64 { return s.Gate.Mean }),
					series("lower bound", gated, func(s Step) float64 { return s.Gate.Low }),
					series("world-model weight", gated, func(s Step) float64 {
						if s.Gate.Lambda != nil {
							return *s.Gate.Lambda
						}
						return b2f(s.Gate.Open)
					}),
				}}}},
		{id: "bias", title: "Bias before and after debiasing", figs: []fig{{"fig-bias", "Mean bias of the calibration window", "step", "mean bias (r_wm - r_env)",
			"Mean r_wm − r_env over the step's calibration window, before and after the step's isotonic map (after is in-sample, 0 up to rounding with pava).",
			[]reproduce.Curve{
				series("before map", nil, func(s Step) float64 { return s.BiasBefore }),
				series("after map", nil, func(s Step) float64 { return s.BiasAfter }),
			}}}},
		{id: "cost", title: "Executions and sandbox CPU", figs: []fig{
			{"fig-executions", "Training executions by step", "step", "executions",
				"Training trajectories really executed at each step (held-out evaluations not counted).",
				[]reproduce.Curve{series("executions", nil, func(s Step) float64 { return float64(s.Executions) })}},
			{"fig-cpu", "Sandbox CPU seconds by step", "step", "sandbox CPU-seconds",
				"Sandbox CPU seconds of the step's training executions.",
				[]reproduce.Curve{series("CPU seconds", nil, func(s Step) float64 { return s.CPUSeconds })}},
		}},
		{id: "calibration", title: "Calibration maps", figs: []fig{{"fig-maps", "Isotonic maps of the debiaser", "world-model score r_wm", "calibrated score",
			"The map fitted at each step shown (its knots; below the first and above the last it is constant), and the identity.", mapCurves(d.Maps)}}},
	}
	switch {
	case len(d.Steps) == 0:
		for i := range secs {
			secs[i].figs, secs[i].note = nil, "No completed step yet."
		}
	default:
		for i := range secs {
			s := &secs[i]
			switch s.id {
			case "heldout":
				if len(held.Points) == 0 {
					s.figs, s.note = nil, "No checkpoint of the completed steps has been evaluated yet."
				}
			case "rho":
				if !p.Denoise {
					s.note = fmt.Sprintf("Mode %s does not denoise: ρ is 1 at every step.", d.Run.Mode)
				}
				if !slices.ContainsFunc(d.Steps, gated) {
					s.figs = s.figs[:1] // no signal gate (or too few groups yet): ρ alone
				} else if closed := countFunc(d.Steps, func(st Step) bool { return gated(st) && !st.Gate.Open }); closed > 0 {
					s.note = fmt.Sprintf("The signal gate closed in %d of the %d completed steps: they trained on their anchor groups alone.",
						closed, len(d.Steps))
				}
			case "bias":
				if !p.Debias {
					s.figs, s.note = nil, fmt.Sprintf("Mode %s does not debias: there is no calibration window.", d.Run.Mode)
				}
			case "calibration":
				switch {
				case !p.Debias:
					s.figs, s.note = nil, fmt.Sprintf("Mode %s does not debias: no map is fitted.", d.Run.Mode)
				case len(d.Maps) == 0:
					s.figs, s.note = nil, fmt.Sprintf("Every map of the completed steps is the identity (%d steps with too few anchor pairs).", d.Identity)
				default:
					s.note = fmt.Sprintf("%d of the %d completed steps have a fitted map, %d the identity (too few pairs); %d shown.",
						d.Fitted, len(d.Steps), d.Identity, len(d.Maps))
				}
			}
		}
	}
	if t := d.Turns; t != nil {
		secs = append(secs, turnsSection(t))
	}
	secs = append(secs, timeSection(d.Steps))
	out := make([]Section, 0, len(secs))
	for _, s := range secs {
		sec := Section{ID: s.id, Title: s.title, Note: s.note}
		for _, f := range s.figs {
			svg, err := drawSVG(f.title, f.x, f.y, f.curves)
			if err != nil {
				return nil, fmt.Errorf("plot %s: %w", f.id, err)
			}
			sec.Figures = append(sec.Figures, Figure{ID: f.id, Caption: f.caption, SVG: svg, Curves: f.curves})
		}
		out = append(out, sec)
	}
	return out, nil
}

// turnsSection is the section of a multi-turn run: the mean reward by turn
// index, a curve per source, and the share of trajectories that improved
// after their first turn.
func turnsSection(t *Turns) sec {
	var curves []reproduce.Curve
	at := map[store.Source]int{}
	for _, x := range t.ByIndex {
		if x.Rewarded == 0 {
			continue
		}
		i, ok := at[x.Source]
		if !ok {
			name := "real turns (r_env)"
			if x.Source == store.SourceWorldModel {
				name = "world-model turns (r_wm)"
			}
			i, at[x.Source] = len(curves), len(curves)
			curves = append(curves, reproduce.Curve{Name: name})
		}
		curves[i].Points = append(curves[i].Points, reproduce.Point{X: float64(x.Turn), Y: x.MeanReward})
	}
	s := sec{id: "turns", title: fmt.Sprintf("Turns (%d per trajectory)", t.K)}
	if len(curves) > 0 {
		s.figs = []fig{{"fig-turns", "Reward by turn index", "turn", "mean reward",
			"The mean reward of the completed steps' turns by turn index, for each source: the real grader's (the executed groups) and the world model's (the others).",
			curves}}
	}
	var notes []string
	for _, x := range t.Improved {
		notes = append(notes, fmt.Sprintf("%s: %d of %d trajectories (%.0f%%)", x.Source, x.Improved, x.Compared, 100*Share(x)))
	}
	if len(notes) == 0 {
		s.note = "No trajectory has a reward at its first turn and at a later one."
	} else {
		s.note = "Improved after their first turn (a later turn's reward above the first's): " + strings.Join(notes, "; ") + "."
	}
	executed, unexecuted := 0, 0
	for _, x := range t.ByIndex {
		if x.Source == store.SourceReal {
			executed += x.Answered - x.Unexecuted
		}
		unexecuted += x.Unexecuted
	}
	s.note += fmt.Sprintf(" %d real turns executed: the executions elsewhere on this page count executed trajectories, their CPU seconds every turn's.", executed)
	if unexecuted > 0 {
		s.note += fmt.Sprintf(" %d turns executed nothing (request_info, malformed) and are neither executions nor world-model calls.", unexecuted)
	}
	return s
}

// timeSection is where the time goes: each stage's wall seconds by step,
// and how many seconds of the step overlapped other steps' stages; its
// note is the mean of each over the steps with stage times.
func timeSection(steps []Step) sec {
	s := sec{id: "time", title: "Where the time goes"}
	names := append(append([]string{}, stepsummary.StageNames...), "step")
	curves := map[string]*reproduce.Curve{}
	var order []string
	sum, over := map[string]float64{}, map[string]float64{}
	n := 0
	for _, st := range steps {
		if len(st.Stages) > 0 {
			n++
		}
		for _, x := range st.Stages {
			c, ok := curves[x.Stage]
			if !ok {
				c = &reproduce.Curve{Name: strings.ReplaceAll(x.Stage, "_", "+")}
				if x.Stage == "step" {
					c.Name = "whole step"
				}
				curves[x.Stage] = c
			}
			c.Points = append(c.Points, reproduce.Point{X: float64(st.Step), Y: x.Seconds})
			sum[x.Stage] += x.Seconds
			over[x.Stage] += x.Overlapped
		}
	}
	if n == 0 {
		s.note = "No completed step has stage times (steps recorded before they were)."
		return s
	}
	for _, name := range names {
		if _, ok := curves[name]; ok {
			order = append(order, name)
		}
	}
	var out []reproduce.Curve
	for _, name := range order {
		out = append(out, *curves[name])
	}
	overlap := reproduce.Curve{Name: "step overlapped other steps"}
	for _, st := range steps {
		for _, x := range st.Stages {
			if x.Stage == "step" {
				overlap.Points = append(overlap.Points, reproduce.Point{X: float64(st.Step), Y: x.Overlapped})
			}
		}
	}
	out = append(out, overlap)
	s.figs = []fig{{"fig-time", "Stage wall time by step", "step", "seconds",
		"Wall seconds of each stage of the step, from its first activity's start to its last one's end as the step workflow saw them " +
			"(generate, score and execute overlap within a step), the whole step, and the seconds of the step during which another step's stage ran.", out}}
	parts := make([]string, 0, len(order))
	for _, name := range order {
		label := strings.ReplaceAll(name, "_", "+")
		if name == "step" {
			label = "whole step"
		}
		parts = append(parts, fmt.Sprintf("%s %.3f s (%.3f s overlapped)", label, sum[name]/float64(n), over[name]/float64(n)))
	}
	s.note = fmt.Sprintf("Mean over the %d steps with stage times: %s.", n, strings.Join(parts, ", "))
	return s
}

// mapCurves are the maps' knots, one curve per map, then the identity.
func mapCurves(maps []store.Calibration) []reproduce.Curve {
	out := make([]reproduce.Curve, 0, len(maps)+1)
	for _, c := range maps {
		cv := reproduce.Curve{Name: fmt.Sprintf("step %d (%d pairs)", c.Step, c.NPairs)}
		for i := range min(len(c.Map.X), len(c.Map.Y)) {
			cv.Points = append(cv.Points, reproduce.Point{X: c.Map.X[i], Y: c.Map.Y[i]})
		}
		out = append(out, cv)
	}
	return append(out, reproduce.Curve{Name: "identity", Points: []reproduce.Point{{X: 0, Y: 0}, {X: 1, Y: 1}}})
}

// drawSVG draws curves with reproduce.DrawLines and returns the <svg>
// element alone (without the XML prologue), for inline use in HTML.
func drawSVG(title, x, y string, curves []reproduce.Curve) (template.HTML, error) {
	var b bytes.Buffer
	if err := reproduce.DrawLines(&b, "svg", title, x, y, curves); err != nil {
		return "", err
	}
	i := bytes.Index(b.Bytes(), []byte("<svg"))
	if i < 0 {
		return "", fmt.Errorf("no <svg> element in the plot")
	}
	// gonum measures text in Liberation Serif; a browser without it falls
	// back to Times (the same metrics), else to its serif.
	svg := bytes.ReplaceAll(b.Bytes()[i:], []byte("font-family:Liberation Serif;"),
		[]byte("font-family:'Liberation Serif','Times New Roman',Tinos,Times,serif;"))
	// The SVG is gonum's own output: its text is escaped by vgsvg, and the
	// titles and names drawn are this package's, or numbers.
	return template.HTML(svg), nil
}

// Write renders d as one self-contained HTML page to w.
func Write(w io.Writer, d Data) error {
	secs, err := Sections(d)
	if err != nil {
		return fmt.Errorf("report %s: %w", d.Run.ID, err)
	}
	v := view{Data: d, Completed: len(d.Steps), Sections: secs}
	for _, s := range d.Steps {
		v.Totals.Executions += s.Executions
		v.Totals.CPUSeconds += s.CPUSeconds
		v.Totals.WMCalls += s.WMCalls
		if s.HeldOut != nil {
			v.Totals.HeldOut, v.Totals.HeldOutAt = s.HeldOut, s.Step+1
		}
		v.Totals.Rho = s.Rho
	}
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		return fmt.Errorf("report %s: %w", d.Run.ID, err)
	}
	_, err = b.WriteTo(w)
	return err
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func countFunc[T any](xs []T, f func(T) bool) int {
	n := 0
	for _, x := range xs {
		if f(x) {
			n++
		}
	}
	return n
}
