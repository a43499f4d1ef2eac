package reproduce

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/wmrl/wmrl/internal/mode"
)

// Plot files written by WritePlots.
const (
	PlotHeldOutByStep = "heldout_vs_step.png"
	PlotHeldOutByCPU  = "heldout_vs_cpu.png"
	PlotWMRLRho       = "wmrl_rho.png"
	PlotWMRLBias      = "wmrl_bias.png"
)

// DrawLines draws curves as lines with points, one colour, dash pattern
// and glyph each (plotutil's i-th for the i-th curve), on a 6×4 inch plot
// with a grid and the legend at the bottom right, and writes it to w in
// format ("png", "svg", or another format gonum/plot knows). Curves
// without points are left out but keep their index.
func DrawLines(w io.Writer, format, title, xLabel, yLabel string, curves []Curve) error {
	p := newPlot(title, xLabel, yLabel)
	for i, c := range curves {
		if len(c.Points) == 0 {
			continue
		}
		if err := addLine(p, i, c); err != nil {
			return err
		}
	}
	return writePlot(w, format, p)
}

// newPlot is the plot every drawing here starts from: a title, axis
// labels, a grid, the legend at the bottom right (scores mostly rise).
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	return p
}

// addLine adds c as a line with points in plotutil's i-th colour, dash
// pattern and glyph, with a legend entry.
func addLine(p *plot.Plot, i int, c Curve) error {
	xys := make(plotter.XYs, len(c.Points))
	for j, pt := range c.Points {
		xys[j] = plotter.XY{X: pt.X, Y: pt.Y}
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	line.Color = plotutil.Color(i)
	line.Dashes = plotutil.Dashes(i)
	points.Color = plotutil.Color(i)
	points.Shape = plotutil.Shape(i)
	p.Add(line, points)
	p.Legend.Add(c.Name, line, points)
	return nil
}

// writePlot writes p, 6×4 inches, to w in format.
func writePlot(w io.Writer, format string, p *plot.Plot) error {
	wt, err := p.WriterTo(6*vg.Inch, 4*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// linePlot draws curves with DrawLines to a PNG file.
func linePlot(path, title, xLabel, yLabel string, curves []Curve) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := DrawLines(f, "png", title, xLabel, yLabel, curves); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
	}
	return nil
}

// WritePlots writes the four PNG plots to dir and returns their names:
// held-out score versus step and versus training sandbox CPU-seconds for
// every mode (means over seeds), and ρ and the calibration bias over the
// steps of wmrl.
func WritePlots(dir string, rs []Record) ([]string, error) {
	type spec struct {
		file, title, x, y string
		curves            []Curve
	}
	abs := func(f func(StepRecord) float64) func(StepRecord) float64 {
		return func(s StepRecord) float64 {
			v := f(s)
			if v < 0 {
				return -v
			}
			return v
		}
	}
	specs := []spec{
		{PlotHeldOutByStep, "Held-out score (avg@n, mean over seeds)", "step", "held-out score", HeldOutByStep(rs)},
		{PlotHeldOutByCPU, "Held-out score vs training execution cost", "sandbox CPU-seconds (training)", "held-out score", HeldOutByCPU(rs)},
		{PlotWMRLRho, "wmrl: anchor weight rho (mean over seeds)", "step", "rho",
			[]Curve{StepSeries(rs, mode.WMRL, "rho", func(s StepRecord) float64 { return s.Rho })}},
		{PlotWMRLBias, "wmrl: |mean bias| of the calibration window", "step", "|bias| (r_wm - r_env)", []Curve{
			StepSeries(rs, mode.WMRL, "before map", abs(func(s StepRecord) float64 { return s.BiasBefore })),
			StepSeries(rs, mode.WMRL, "after map", abs(func(s StepRecord) float64 { return s.BiasAfter })),
		}},
	}
	var names []string
	for _, s := range specs {
		if err := linePlot(filepath.Join(dir, s.file), s.title, s.x, s.y, s.curves); err != nil {
			return names, err
		}
		names = append(names, s.file)
	}
	return names, nil
}
