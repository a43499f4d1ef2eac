package reproduce

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gopkg.in/yaml.v3"

	"github.com/wmrl/wmrl/internal/backend"
	"github.com/wmrl/wmrl/internal/mode"
)

// Files written by WriteFrontier.
const (
	FrontierJSON     = "frontier.json"
	FrontierMarkdown = "frontier.md"
	FrontierPlot     = "frontier.png"
)

// FrontierSource is one point of a frontier before it is summarised: a
// label, the runs of one mode in one results.json, and the file it was
// read from.
type FrontierSource struct {
	Label   string
	Path    string
	Mode    mode.Mode
	Results Results
}

// FrontierDiff is a point's held-out score minus a reference point's,
// paired by seed: the mean of the per-seed differences over the seeds both
// ran and its standard error (sd of the differences / √n; 0 when n < 2).
type FrontierDiff struct {
	Against string   `json:"against"`
	Mean    float64  `json:"mean"`
	SE      float64  `json:"se"`
	Seeds   []uint64 `json:"seeds"`
}

// FrontierPoint is one labelled point of a frontier: the seeds of one mode
// of one results.json, aggregated.
type FrontierPoint struct {
	Label  string    `json:"label"`
	Source string    `json:"source"`
	Mode   mode.Mode `json:"mode"`
	// WorldModel is the world model's backend ("builtin" when the
	// configuration named none), empty for a mode without world model;
	// Noise is the simulated world model's noise sd (backend simulated
	// only).
	WorldModel string   `json:"world_model,omitempty"`
	Noise      *float64 `json:"noise,omitempty"`
	// RefreshEvery is world_model.refresh.every: the world model is
	// retrained on the run's anchor executions every so many steps (0:
	// frozen).
	RefreshEvery int      `json:"refresh_every,omitempty"`
	Seeds        []uint64 `json:"seeds"`
	// HeldOutPerSeed is the held-out score of each seed, in Seeds' order;
	// HeldOutSE the standard error of their mean (sd / √n, 0 for one seed).
	HeldOutPerSeed []float64 `json:"heldout_per_seed"`
	HeldOut        Stat      `json:"heldout_score"`
	HeldOutSE      float64   `json:"heldout_se"`
	// CPUSeconds and Executions count the training executions only.
	CPUSeconds Stat `json:"sandbox_cpu_seconds"`
	Executions Stat `json:"executions"`
	// VsGRPO and VsAnchor are the paired differences against the grpo and
	// anchor reference points (absent for the reference itself, without a
	// reference, or without a shared seed).
	VsGRPO   *FrontierDiff `json:"vs_grpo,omitempty"`
	VsAnchor *FrontierDiff `json:"vs_anchor,omitempty"`
}

// Simulated reports whether the point's world model is the simulated one.
func (p FrontierPoint) Simulated() bool { return p.Noise != nil }

// Frontier is frontier.json: the points, in the order given, of one suite
// (preset, suite seed and steps are shared by every source), and the
// labels of the reference points.
type Frontier struct {
	Preset    string          `json:"preset"`
	SuiteSeed uint64          `json:"suite_seed"`
	Steps     int             `json:"steps"`
	GRPO      string          `json:"grpo,omitempty"`
	Anchor    string          `json:"anchor,omitempty"`
	Points    []FrontierPoint `json:"points"`
	// Commands are the commands that made each source, by label.
	Commands map[string]string `json:"commands"`
}

// worldModelOf sets p's world model from a results header's configuration
// (YAML laid over the preset; the preset's world model is the built-in,
// frozen one): its backend, the simulated one's noise, its refresh.
func worldModelOf(p *FrontierPoint, config string) error {
	var doc struct {
		WorldModel struct {
			Backend   string `yaml:"backend"`
			Simulated struct {
				Noise float64 `yaml:"noise"`
			} `yaml:"simulated"`
			Refresh struct {
				Every int `yaml:"every"`
			} `yaml:"refresh"`
		} `yaml:"world_model"`
	}
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		return fmt.Errorf("header config: %w", err)
	}
	wm := doc.WorldModel
	p.WorldModel, p.RefreshEvery = wm.Backend, wm.Refresh.Every
	switch wm.Backend {
	case "":
		p.WorldModel = backend.Builtin
	case backend.Simulated:
		noise := wm.Simulated.Noise
		p.Noise = &noise
	}
	return nil
}

// BuildFrontier aggregates each source into a point and pairs every point
// with the references: grpo and anchor name the reference labels; empty
// means the only point of mode grpo (anchor), none when there is no such
// point. Labels must be unique, each source must have runs of its mode, and
// all sources one preset, suite seed and number of steps (held-out scores
// of other suites do not compare).
func BuildFrontier(srcs []FrontierSource, grpo, anchor string) (Frontier, error) {
	if len(srcs) == 0 {
		return Frontier{}, fmt.Errorf("frontier: no point")
	}
	first := srcs[0]
	f := Frontier{Preset: first.Results.Preset, SuiteSeed: first.Results.SuiteSeed, Steps: first.Results.Steps,
		Commands: map[string]string{}}
	scores := map[string]map[uint64]float64{}
	for _, s := range srcs {
		if _, dup := scores[s.Label]; dup {
			return Frontier{}, fmt.Errorf("label %q given twice", s.Label)
		}
		r := s.Results
		if r.Preset != f.Preset || r.SuiteSeed != f.SuiteSeed || r.Steps != f.Steps {
			return Frontier{}, fmt.Errorf("%s (%s) is preset %s, suite seed %d, %d steps; %s (%s) is preset %s, suite seed %d, %d steps: a frontier compares runs of one suite",
				s.Label, s.Path, r.Preset, r.SuiteSeed, r.Steps, first.Label, first.Path, f.Preset, f.SuiteSeed, f.Steps)
		}
		p := FrontierPoint{Label: s.Label, Source: s.Path, Mode: s.Mode}
		if s.Mode.Pieces().WorldModel {
			if err := worldModelOf(&p, r.Header.Config); err != nil {
				return Frontier{}, fmt.Errorf("%s (%s): %w", s.Label, s.Path, err)
			}
		}
		var runs []Run
		for _, run := range r.Runs {
			if run.Mode == s.Mode {
				runs = append(runs, run)
			}
		}
		if len(runs) == 0 {
			return Frontier{}, fmt.Errorf("%s (%s): no run of mode %s", s.Label, s.Path, s.Mode)
		}
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].Seed < runs[j].Seed })
		byseed := map[uint64]float64{}
		var cpu, execs []float64
		for _, run := range runs {
			if _, dup := byseed[run.Seed]; dup {
				return Frontier{}, fmt.Errorf("%s (%s): mode %s seed %d appears twice", s.Label, s.Path, s.Mode, run.Seed)
			}
			byseed[run.Seed] = run.HeldOutScore
			p.Seeds = append(p.Seeds, run.Seed)
			p.HeldOutPerSeed = append(p.HeldOutPerSeed, run.HeldOutScore)
			cpu = append(cpu, run.SandboxCPUSeconds)
			execs = append(execs, float64(run.Executions))
		}
		p.HeldOut, p.CPUSeconds, p.Executions = MeanSD(p.HeldOutPerSeed), MeanSD(cpu), MeanSD(execs)
		if p.HeldOut.N >= 2 {
			p.HeldOutSE = p.HeldOut.SD / math.Sqrt(float64(p.HeldOut.N))
		}
		scores[s.Label] = byseed
		f.Points = append(f.Points, p)
		f.Commands[s.Label] = r.Header.Command
	}
	var err error
	if f.GRPO, err = reference(f.Points, grpo, mode.GRPO); err != nil {
		return Frontier{}, err
	}
	if f.Anchor, err = reference(f.Points, anchor, mode.Anchor); err != nil {
		return Frontier{}, err
	}
	diff := func(label, ref string) *FrontierDiff {
		if ref == "" || ref == label {
			return nil
		}
		mean, se, seeds, ok := pairScores(scores[label], scores[ref])
		if !ok {
			return nil
		}
		return &FrontierDiff{Against: ref, Mean: mean, SE: se, Seeds: seeds}
	}
	for i := range f.Points {
		f.Points[i].VsGRPO = diff(f.Points[i].Label, f.GRPO)
		f.Points[i].VsAnchor = diff(f.Points[i].Label, f.Anchor)
	}
	return f, nil
}

// ReferenceError is a reference label that is not a point's, or a
// reference left to be inferred when several points ran its mode.
type ReferenceError struct{ Err error }

func (e *ReferenceError) Error() string { return e.Err.Error() }
func (e *ReferenceError) Unwrap() error { return e.Err }

// reference resolves a reference label: label itself when given (it must
// be a point's), else the only point of mode m ("" when none).
func reference(ps []FrontierPoint, label string, m mode.Mode) (string, error) {
	var labels, ofMode []string
	for _, p := range ps {
		labels = append(labels, p.Label)
		if p.Mode == m {
			ofMode = append(ofMode, p.Label)
		}
	}
	if label != "" {
		if !slices.Contains(labels, label) {
			return "", &ReferenceError{Err: fmt.Errorf("--%s %q is not a label (labels: %s)", m, label, strings.Join(labels, ", "))}
		}
		return label, nil
	}
	switch len(ofMode) {
	case 0:
		return "", nil
	case 1:
		return ofMode[0], nil
	}
	return "", &ReferenceError{Err: fmt.Errorf("%s reference: points %s all ran %s; name the one to pair with (--%s LABEL)",
		m, strings.Join(ofMode, ", "), m, m)}
}

// xyErr is points with vertical error bars.
type xyErr struct {
	plotter.XYs
	plotter.YErrors
}

// DrawFrontier draws the frontier and writes it to w in format: held-out
// score (mean ± SE over seeds) against training sandbox CPU-seconds (mean),
// one point per label. The simulated world model's points are joined by a
// line in noise order and annotated with their noise; the grpo and anchor
// references have their own glyphs (a filled square and a filled
// triangle), every other point a filled circle; each is annotated with its
// label.
func DrawFrontier(w io.Writer, format string, f Frontier) error {
	p := newPlot("Held-out score vs training cost", "training sandbox CPU-seconds (mean over seeds)",
		"held-out score (mean ± SE over seeds)")
	var sim []FrontierPoint
	for _, pt := range f.Points {
		if pt.Simulated() {
			sim = append(sim, pt)
		}
	}
	sort.SliceStable(sim, func(i, j int) bool { return *sim[i].Noise < *sim[j].Noise })
	var labels plotter.XYLabels
	annotate := func(pt FrontierPoint, text string) {
		labels.XYs = append(labels.XYs, plotter.XY{X: pt.CPUSeconds.Mean, Y: pt.HeldOut.Mean})
		labels.Labels = append(labels.Labels, text)
	}
	errorBars := func(pts []FrontierPoint, c color.Color) error {
		var e xyErr
		for _, pt := range pts {
			e.XYs = append(e.XYs, plotter.XY{X: pt.CPUSeconds.Mean, Y: pt.HeldOut.Mean})
			e.YErrors = append(e.YErrors, struct{ Low, High float64 }{pt.HeldOutSE, pt.HeldOutSE})
		}
		bars, err := plotter.NewYErrorBars(e)
		if err != nil {
			return err
		}
		bars.Color = c
		p.Add(bars)
		return nil
	}
	if len(sim) > 0 {
		c := Curve{Name: fmt.Sprintf("%s, simulated world model (noise sd)", sim[0].Mode)}
		for _, pt := range sim {
			c.Points = append(c.Points, Point{X: pt.CPUSeconds.Mean, Y: pt.HeldOut.Mean})
			annotate(pt, fmt.Sprintf("sd %g", *pt.Noise))
		}
		if err := addLine(p, 0, c); err != nil {
			return err
		}
		if err := errorBars(sim, plotutil.Color(0)); err != nil {
			return err
		}
	}
	i := 0
	for _, pt := range f.Points {
		if pt.Simulated() {
			continue
		}
		i++
		c, shape, radius := plotutil.Color(i), draw.GlyphDrawer(draw.CircleGlyph{}), vg.Points(3.5)
		switch pt.Label {
		case f.GRPO:
			shape, radius = draw.BoxGlyph{}, vg.Points(4)
		case f.Anchor:
			shape, radius = draw.PyramidGlyph{}, vg.Points(4.5)
		}
		sc, err := plotter.NewScatter(plotter.XYs{{X: pt.CPUSeconds.Mean, Y: pt.HeldOut.Mean}})
		if err != nil {
			return fmt.Errorf("%s: %w", pt.Label, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: c, Shape: shape, Radius: radius}
		p.Add(sc)
		p.Legend.Add(pt.Label, sc)
		if err := errorBars([]FrontierPoint{pt}, c); err != nil {
			return fmt.Errorf("%s: %w", pt.Label, err)
		}
		annotate(pt, pt.Label)
	}
	if len(labels.Labels) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return err
		}
		l.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(-4)}
		p.Add(l)
	}
	// CPU from 0, so the cost ratios read off the plot; room on the right
	// for the annotations.
	p.X.Min = 0
	p.X.Max *= 1.15
	return writePlot(w, format, p)
}

// FrontierTable writes the frontier's markdown table: one row per point.
func FrontierTable(w io.Writer, f Frontier) error {
	var b strings.Builder
	vsG, vsA := "vs grpo", "vs anchor"
	if f.GRPO != "" {
		vsG = "vs " + f.GRPO
	}
	if f.Anchor != "" {
		vsA = "vs " + f.Anchor
	}
	fmt.Fprintf(&b, "| label | mode | world model | seeds | held-out per seed | mean | SE | training sandbox CPU-s (mean) | executions | %s (paired, ± SE) | %s (paired, ± SE) |\n", vsG, vsA)
	b.WriteString("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range f.Points {
		per := make([]string, len(p.HeldOutPerSeed))
		for i, v := range p.HeldOutPerSeed {
			per[i] = fmt.Sprintf("%.4f", v)
		}
		wm := p.WorldModel
		switch {
		case wm == "":
			wm = "none"
		case p.Simulated():
			wm = fmt.Sprintf("simulated, noise %g", *p.Noise)
		}
		if p.RefreshEvery > 0 {
			wm += fmt.Sprintf(", refreshed every %d steps", p.RefreshEvery)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %.4f | %.4f | %.1f | %.0f | %s | %s |\n", p.Label, p.Mode, wm,
			len(p.Seeds), strings.Join(per, ", "), p.HeldOut.Mean, p.HeldOutSE, p.CPUSeconds.Mean, p.Executions.Mean,
			diffCell(p, p.VsGRPO, f.GRPO), diffCell(p, p.VsAnchor, f.Anchor))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// diffCell prints a paired difference, with its number of seeds when they
// are fewer than the point's; "(reference)" for the reference itself, ""
// without a reference, "no shared seed" when the two share none.
func diffCell(p FrontierPoint, d *FrontierDiff, ref string) string {
	switch {
	case ref == "":
		return ""
	case ref == p.Label:
		return "(reference)"
	case d == nil:
		return "no shared seed"
	}
	s := fmt.Sprintf("%+.4f ± %.4f", d.Mean, d.SE)
	if len(d.Seeds) < len(p.Seeds) {
		s += fmt.Sprintf(" (%d seeds)", len(d.Seeds))
	}
	return s
}

// FrontierMarkdownReport writes frontier.md: the sources, the table, how
// its numbers are computed, and the plot (when plot is not empty).
func FrontierMarkdownReport(w io.Writer, f Frontier, plot string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# wmrl bench frontier: %s preset, suite seed %d, %d steps\n\n", f.Preset, f.SuiteSeed, f.Steps)
	b.WriteString("Sources:\n\n")
	for _, p := range f.Points {
		fmt.Fprintf(&b, "- %s: mode %s of `%s`", p.Label, p.Mode, p.Source)
		if c := f.Commands[p.Label]; c != "" {
			fmt.Fprintf(&b, " (`%s`)", c)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nHeld-out score: the final policy's (avg@n, real execution); mean over seeds and its\n")
	b.WriteString("standard error (sd / √n). Training sandbox CPU-seconds and executions count the training\n")
	b.WriteString("executions only (the simulated world model's are its prediction cost, not counted).\n")
	b.WriteString("Paired differences: the point's held-out score minus the reference's, seed by seed, then\n")
	b.WriteString("the mean of the differences ± its standard error (sd of the differences / √n).\n\n")
	if err := FrontierTable(&b, f); err != nil {
		return err
	}
	if plot != "" {
		fmt.Fprintf(&b, "\n![frontier](%s)\n", plot)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteFrontier writes frontier.json, frontier.md and frontier.png to dir
// (created if needed) and returns the names of the files written.
func WriteFrontier(dir string, f Frontier) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("frontier dir: %w", err)
	}
	var js, md, png bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encode frontier: %w", err)
	}
	if err := DrawFrontier(&png, "png", f); err != nil {
		return nil, fmt.Errorf("plot %s: %w", FrontierPlot, err)
	}
	if err := FrontierMarkdownReport(&md, f, FrontierPlot); err != nil {
		return nil, err
	}
	files := []struct {
		name string
		data []byte
	}{{FrontierJSON, js.Bytes()}, {FrontierMarkdown, md.Bytes()}, {FrontierPlot, png.Bytes()}}
	var names []string
	for _, file := range files {
		if err := os.WriteFile(filepath.Join(dir, file.name), file.data, 0o644); err != nil {
			return names, fmt.Errorf("write %s: %w", file.name, err)
		}
		names = append(names, file.name)
	}
	return names, nil
}
