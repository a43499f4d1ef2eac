package reproduce

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"maps"
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
	"github.com/wmrl/wmrl/internal/runconfig"
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
	// NoHarm is the no-harm bar for a point with a world model: its paired
	// difference against the anchor reference is at least minus its
	// standard error (absent without a world model, an anchor reference or
	// two shared seeds).
	NoHarm *bool `json:"no_harm,omitempty"`
}

// Simulated reports whether the point's world model is the simulated one.
func (p FrontierPoint) Simulated() bool { return p.Noise != nil }

// Frontier is frontier.json: the points, in the order given, of one suite
// (preset, suite seed and steps are shared by every source), and the
// labels of the reference points.
type Frontier struct {
	Preset    string `json:"preset"`
	SuiteSeed uint64 `json:"suite_seed"`
	Steps     int    `json:"steps"`
	GRPO      string `json:"grpo,omitempty"`
	Anchor    string `json:"anchor,omitempty"`
	// AnchorPool is the anchor reference when --anchor named several
	// labels (Anchor is then their names joined by " + ").
	AnchorPool *AnchorPool     `json:"anchor_pool,omitempty"`
	Points     []FrontierPoint `json:"points"`
	// Commands are the commands that made each source, by label.
	Commands map[string]string `json:"commands"`
}

// AnchorPool is a pooled anchor reference: the per-seed mean of several
// points' held-out scores (a control and its null perturbations) over the
// seeds all of them ran.
type AnchorPool struct {
	Labels         []string  `json:"labels"`
	Seeds          []uint64  `json:"seeds"`
	HeldOutPerSeed []float64 `json:"heldout_per_seed"`
	HeldOut        Stat      `json:"heldout_score"`
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

// BuildFrontier aggregates each label's sources into a point and pairs
// every point with the references. Sources that share a label are one
// point: their runs are pooled (seeds 1–5 of one invocation and 6–8 of
// another, say), and they must share mode and configuration and have no
// seed twice. grpo names the grpo reference label; empty means the only
// point of mode grpo, none when there is no such point. anchor names the
// anchor reference: one label, or several, whose per-seed mean over the
// seeds they share is the reference (a control and its null perturbations:
// a single control run is one draw of a chaotic training run); empty means
// the only point of mode anchor. Every source must be of one preset, suite
// seed and number of steps (held-out scores of other suites do not
// compare).
func BuildFrontier(srcs []FrontierSource, grpo string, anchor []string) (Frontier, error) {
	if len(srcs) == 0 {
		return Frontier{}, fmt.Errorf("frontier: no point")
	}
	first := srcs[0]
	f := Frontier{Preset: first.Results.Preset, SuiteSeed: first.Results.SuiteSeed, Steps: first.Results.Steps,
		Commands: map[string]string{}}
	var labels []string
	byLabel := map[string][]FrontierSource{}
	for _, s := range srcs {
		r := s.Results
		if r.Preset != f.Preset || r.SuiteSeed != f.SuiteSeed || r.Steps != f.Steps {
			return Frontier{}, fmt.Errorf("%s (%s) is preset %s, suite seed %d, %d steps; %s (%s) is preset %s, suite seed %d, %d steps: a frontier compares runs of one suite",
				s.Label, s.Path, r.Preset, r.SuiteSeed, r.Steps, first.Label, first.Path, f.Preset, f.SuiteSeed, f.Steps)
		}
		if prev, ok := byLabel[s.Label]; ok {
			p := prev[0]
			switch {
			case p.Mode != s.Mode:
				return Frontier{}, fmt.Errorf("label %q: %s is mode %s, %s mode %s: one label pools runs of one mode",
					s.Label, p.Path, p.Mode, s.Path, s.Mode)
			}
			same, err := sameConfig(f.Preset, f.SuiteSeed, p.Results.Header, r.Header)
			if err != nil {
				return Frontier{}, fmt.Errorf("label %q: %w", s.Label, err)
			}
			if !same {
				return Frontier{}, fmt.Errorf("label %q: %s and %s were run with different --config: one label pools runs of one configuration",
					s.Label, p.Path, s.Path)
			}
		} else {
			labels = append(labels, s.Label)
		}
		byLabel[s.Label] = append(byLabel[s.Label], s)
	}
	scores := map[string]map[uint64]float64{}
	for _, label := range labels {
		group := byLabel[label]
		s0 := group[0]
		var paths, commands []string
		var runs []Run
		for _, s := range group {
			paths = append(paths, s.Path)
			if c := s.Results.Header.Command; c != "" {
				commands = append(commands, c)
			}
			for _, run := range s.Results.Runs {
				if run.Mode == s.Mode {
					runs = append(runs, run)
				}
			}
		}
		p := FrontierPoint{Label: label, Source: strings.Join(paths, ", "), Mode: s0.Mode}
		if s0.Mode.Pieces().WorldModel {
			if err := worldModelOf(&p, s0.Results.Header.Config); err != nil {
				return Frontier{}, fmt.Errorf("%s (%s): %w", label, p.Source, err)
			}
		}
		if len(runs) == 0 {
			return Frontier{}, fmt.Errorf("%s (%s): no run of mode %s", label, p.Source, s0.Mode)
		}
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].Seed < runs[j].Seed })
		byseed := map[uint64]float64{}
		var cpu, execs []float64
		for _, run := range runs {
			if _, dup := byseed[run.Seed]; dup {
				return Frontier{}, fmt.Errorf("%s (%s): mode %s seed %d appears twice", label, p.Source, s0.Mode, run.Seed)
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
		scores[label] = byseed
		f.Points = append(f.Points, p)
		f.Commands[label] = strings.Join(commands, "; ")
	}
	var err error
	if f.GRPO, err = reference(f.Points, grpo, mode.GRPO); err != nil {
		return Frontier{}, err
	}
	switch len(anchor) {
	case 0:
		f.Anchor, err = reference(f.Points, "", mode.Anchor)
	case 1:
		f.Anchor, err = reference(f.Points, anchor[0], mode.Anchor)
	default:
		f.Anchor, f.AnchorPool, err = pool(f.Points, scores, anchor)
	}
	if err != nil {
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
		p := &f.Points[i]
		p.VsGRPO = diff(p.Label, f.GRPO)
		p.VsAnchor = diff(p.Label, f.Anchor)
		if d := p.VsAnchor; d != nil && p.Mode.Pieces().WorldModel && len(d.Seeds) >= 2 {
			met := d.Mean >= -d.SE
			p.NoHarm = &met
		}
	}
	return f, nil
}

// pool makes the pooled anchor reference of several labels: its name
// (the labels joined by " + "), and, stored in scores under that name,
// the per-seed mean of their held-out scores over the seeds all of them
// ran.
func pool(ps []FrontierPoint, scores map[string]map[uint64]float64, labels []string) (string, *AnchorPool, error) {
	for i, l := range labels {
		if _, err := reference(ps, l, mode.Anchor); err != nil {
			return "", nil, err
		}
		if slices.Contains(labels[:i], l) {
			return "", nil, &ReferenceError{Err: fmt.Errorf("--anchor names %q twice", l)}
		}
	}
	name := strings.Join(labels, " + ")
	if _, taken := scores[name]; taken {
		return "", nil, &ReferenceError{Err: fmt.Errorf("--anchor: the pooled reference's name %q is a point's label", name)}
	}
	mean := map[uint64]float64{}
seeds:
	for s, v := range scores[labels[0]] {
		sum := v
		for _, l := range labels[1:] {
			w, ok := scores[l][s]
			if !ok {
				continue seeds
			}
			sum += w
		}
		mean[s] = sum / float64(len(labels))
	}
	if len(mean) == 0 {
		return "", nil, fmt.Errorf("--anchor %s: no seed is in all of them", strings.Join(labels, ","))
	}
	pl := &AnchorPool{Labels: labels, Seeds: slices.Sorted(maps.Keys(mean))}
	for _, s := range pl.Seeds {
		pl.HeldOutPerSeed = append(pl.HeldOutPerSeed, mean[s])
	}
	pl.HeldOut = MeanSD(pl.HeldOutPerSeed)
	scores[name] = mean
	return name, pl, nil
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
	fmt.Fprintf(&b, "| label | mode | world model | seeds | held-out per seed | mean | SE | training sandbox CPU-s (mean) | executions | %s (paired, ± SE) | %s (paired, ± SE) | no harm (≥ anchor − 1 SE) |\n", vsG, vsA)
	b.WriteString("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
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
		noHarm := ""
		if p.NoHarm != nil {
			noHarm = map[bool]string{true: "met", false: "**missed**"}[*p.NoHarm]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %.4f | %.4f | %.1f | %.0f | %s | %s | %s |\n", p.Label, p.Mode, wm,
			len(p.Seeds), strings.Join(per, ", "), p.HeldOut.Mean, p.HeldOutSE, p.CPUSeconds.Mean, p.Executions.Mean,
			diffCell(p, p.VsGRPO, f.GRPO), diffCell(p, p.VsAnchor, f.Anchor), noHarm)
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
	if pl := f.AnchorPool; pl != nil {
		per := make([]string, len(pl.HeldOutPerSeed))
		for i, v := range pl.HeldOutPerSeed {
			per[i] = fmt.Sprintf("%d: %.4f", pl.Seeds[i], v)
		}
		fmt.Fprintf(&b, "\nAnchor reference %q: the per-seed mean of %s over the seeds all of them ran (%s; mean %.4f).\n",
			f.Anchor, strings.Join(pl.Labels, ", "), strings.Join(per, ", "), pl.HeldOut.Mean)
	}
	b.WriteString("\nHeld-out score: the final policy's (avg@n, real execution); mean over seeds and its\n")
	b.WriteString("standard error (sd / √n). Training sandbox CPU-seconds and executions count the training\n")
	b.WriteString("executions only (the simulated world model's are its prediction cost, not counted).\n")
	b.WriteString("Paired differences: the point's held-out score minus the reference's, seed by seed, then\n")
	b.WriteString("the mean of the differences ± its standard error (sd of the differences / √n). No harm: a\n")
	b.WriteString("point with a world model whose difference against the anchor reference is at least minus its\n")
	b.WriteString("standard error (over at least two shared seeds).\n\n")
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

// sameConfig reports whether two benchmarks' --config texts give their
// runs the same configuration: equal texts over the same defaults, or the
// same configuration once each is laid over the preset with the defaults
// its runs had (runconfig.BenchPresetOf: "suite_seed: 7" and "suite_seed:
// 7\n# note", a text naming the default value of a field and one leaving
// it out, or "denoise: {estimator: difference, memory: true}" before the
// defaults changed and "" after). The suite seed is the results' own
// (compared before), since a text that omits it ran the suite the results
// name only when that is the default.
func sameConfig(preset string, suiteSeed uint64, a, b Header) (bool, error) {
	if a.Config == b.Config && a.Defaults == b.Defaults {
		return true, nil
	}
	effective := func(h Header) ([]byte, error) {
		base, err := runconfig.BenchPresetOf(preset, h.Defaults)
		if err != nil {
			return nil, err
		}
		var data []byte
		if strings.TrimSpace(h.Config) != "" {
			data = []byte(h.Config)
		}
		c, err := runconfig.Load(base, data, runconfig.Overrides{})
		if err != nil {
			return nil, fmt.Errorf("recorded --config %q: %w", h.Config, err)
		}
		c.SuiteSeed = suiteSeed
		return json.Marshal(c)
	}
	ja, err := effective(a)
	if err != nil {
		return false, err
	}
	jb, err := effective(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ja, jb), nil
}
