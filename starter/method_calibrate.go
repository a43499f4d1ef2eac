package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/isotonic"
	"github.com/wmrl/wmrl/internal/pairscsv"
)

// calibrateFlags are the flags of wmrl calibrate, as given.
type calibrateFlags struct {
	pairs    string
	apply    string
	method   string
	bins     int
	minPairs int
	window   int
	json     bool
}

// calibrateReport is the result of wmrl calibrate; with --json it is printed
// as one JSON object. BiasBefore/BiasAfter are null when the file has no
// group column or no group holds two pairs. Applied is [] without --apply.
type calibrateReport struct {
	Method         string    `json:"method"`
	Bins           int       `json:"bins"`
	MinPairs       int       `json:"min_pairs"`
	Window         int       `json:"window"`
	NPairs         int       `json:"n_pairs"`
	NUsed          int       `json:"n_used"`
	Identity       bool      `json:"identity"`
	Knots          []knot    `json:"knots"`
	BiasBefore     *float64  `json:"bias_before"`
	BiasAfter      *float64  `json:"bias_after"`
	MeanBiasBefore float64   `json:"mean_bias_before"`
	MeanBiasAfter  float64   `json:"mean_bias_after"`
	FitSeconds     float64   `json:"fit_seconds"`
	Applied        []applied `json:"applied"`

	grouped bool          // the file has a group column
	fitTime time.Duration // for the text output
}

type knot struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

type applied struct {
	WM         float64 `json:"wm"`
	Calibrated float64 `json:"calibrated"`
}

func newCalibrateCmd() *cobra.Command {
	def := debias.Default()
	f := calibrateFlags{method: def.Method, bins: def.Bins, minPairs: def.MinPairs, window: def.Window}
	cmd := &cobra.Command{
		Use:   "calibrate --pairs FILE.csv",
		Short: "Fit and audit the online-debiasing map on a CSV of anchor pairs",
		Long: `calibrate fits the monotone calibration map of online debiasing on a CSV of
anchor pairs (header wm,env and an optional group column; scores in [0,1]),
exactly as a training step would, and prints the knots, the number of pairs,
the within-group bias before and after calibration (when groups are given),
the mean bias and the fit time. --apply maps a one-column CSV (header wm)
through the fitted map. Every input is read and checked before anything is
printed: a malformed file is reported with its line number on stderr. A file
may have lines of at most 4096 bytes, 1048576 data rows and 64 MiB.

--json prints one object: method, bins, min_pairs, window, n_pairs, n_used,
identity, knots [{x,y}], bias_before, bias_after (null without groups),
mean_bias_before, mean_bias_after, fit_seconds, applied [{wm,calibrated}]
([] without --apply).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out bytes.Buffer
			if err := runCalibrate(f, &out); err != nil {
				return err
			}
			_, err := io.Copy(cmd.OutOrStdout(), &out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.pairs, "pairs", "", "CSV of anchor pairs: wm,env[,group] (required)")
	fl.StringVar(&f.method, "method", f.method, "fitting method: pava or binned")
	fl.IntVar(&f.bins, "bins", f.bins, fmt.Sprintf("number of equal-width bins on [0,1] (binned method; 1..%d)", maxBins))
	fl.IntVar(&f.minPairs, "min-pairs", f.minPairs, fmt.Sprintf("pairs needed before the map leaves the identity (0..%d)", pairscsv.MaxRows))
	fl.IntVar(&f.window, "window", f.window, fmt.Sprintf("fit on the last N pairs only (0 = all pairs; at most %d)", pairscsv.MaxRows))
	fl.StringVar(&f.apply, "apply", "", "one-column CSV (wm) of scores to map through the fitted map")
	fl.BoolVar(&f.json, "json", false, "print one JSON object instead of tables")
	_ = cmd.MarkFlagRequired("pairs") // the flag exists: cannot fail
	return cmd
}

// maxBins is the most bins of --bins, as for debias.bins of a run.
const maxBins = 1_000_000

// config checks the flags and turns them into a debias.Config. Errors name
// the flag.
func (f calibrateFlags) config() (debias.Config, error) {
	if f.method != debias.MethodPAVA && f.method != debias.MethodBinned {
		return debias.Config{}, usagef("--method: %q is not %s or %s", clipArg(f.method), debias.MethodPAVA, debias.MethodBinned)
	}
	for _, err := range []error{
		intIn("bins", f.bins, 1, maxBins),
		intIn("min-pairs", f.minPairs, 0, pairscsv.MaxRows),
		intIn("window", f.window, 0, pairscsv.MaxRows),
	} {
		if err != nil {
			return debias.Config{}, err
		}
	}
	cfg := debias.Config{Method: f.method, Bins: f.bins, MinPairs: f.minPairs, Window: f.window}
	return cfg, cfg.Validate()
}

// runCalibrate reads and checks every input, fits, and writes the report to
// out. On error nothing is written.
func runCalibrate(f calibrateFlags, out io.Writer) error {
	cfg, err := f.config()
	if err != nil {
		return err
	}
	pairs, grouped, err := readPairsFile(f.pairs)
	if err != nil {
		return err
	}
	var scores []float64
	if f.apply != "" {
		if scores, err = readScoresFile(f.apply); err != nil {
			return err
		}
	}
	rep, err := calibrate(pairs, grouped, cfg, scores)
	if err != nil {
		return err
	}
	if f.json {
		return json.NewEncoder(out).Encode(rep)
	}
	return rep.writeText(out)
}

func readPairsFile(path string) ([]debias.Pair, bool, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("pairs file: %w", err)
	}
	defer fh.Close()
	pairs, grouped, err := pairscsv.ReadPairs(fh)
	if err != nil {
		return nil, false, fmt.Errorf("pairs file %s: %w", path, err)
	}
	return pairs, grouped, nil
}

func readScoresFile(path string) ([]float64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("apply file: %w", err)
	}
	defer fh.Close()
	scores, err := pairscsv.ReadScores(fh)
	if err != nil {
		return nil, fmt.Errorf("apply file %s: %w", path, err)
	}
	return scores, nil
}

// calibrate fits the map on pairs (timing the fit alone) and computes the
// diagnostics on the pairs the map was fitted on (the window).
func calibrate(pairs []debias.Pair, grouped bool, cfg debias.Config, scores []float64) (calibrateReport, error) {
	start := time.Now()
	m, err := debias.Fit(pairs, cfg)
	elapsed := time.Since(start)
	if err != nil {
		return calibrateReport{}, err
	}
	used := cfg.Windowed(pairs)
	rep := calibrateReport{
		Method:     cfg.Method,
		Bins:       cfg.Bins,
		MinPairs:   cfg.MinPairs,
		Window:     cfg.Window,
		NPairs:     len(pairs),
		NUsed:      len(used),
		Identity:   m.Identity(),
		Knots:      knots(m),
		FitSeconds: elapsed.Seconds(),
		Applied:    []applied{},
		grouped:    grouped,
		fitTime:    elapsed,
	}
	if before, after, ok := debias.Bias(used, m); ok {
		rep.BiasBefore, rep.BiasAfter = &before, &after
	}
	rep.MeanBiasBefore, rep.MeanBiasAfter, _ = debias.MeanBias(used, m)
	for _, v := range scores {
		rep.Applied = append(rep.Applied, applied{WM: v, Calibrated: m.Apply(v)})
	}
	return rep, nil
}

func knots(m isotonic.Map) []knot {
	ks := make([]knot, len(m.X))
	for i := range m.X {
		ks[i] = knot{m.X[i], m.Y[i]}
	}
	return ks
}

func (r calibrateReport) writeText(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	window := "all pairs"
	if r.Window > 0 {
		window = fmt.Sprintf("last %d", r.Window)
	}
	method := r.Method
	if r.Method == debias.MethodBinned {
		method = fmt.Sprintf("%s (%d bins)", r.Method, r.Bins)
	}
	fmt.Fprintf(tw, "method\t%s\n", method)
	fmt.Fprintf(tw, "pairs\t%d (window: %s, used: %d)\n", r.NPairs, window, r.NUsed)
	if r.Identity {
		fmt.Fprintf(tw, "map\tidentity (%d pairs used, --min-pairs %d)\n", r.NUsed, r.MinPairs)
	} else {
		fmt.Fprintf(tw, "map\t%d knots\n", len(r.Knots))
	}
	fmt.Fprintf(tw, "fit time\t%v\n", r.fitTime)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "bias\tbefore\tafter")
	switch {
	case r.BiasBefore != nil:
		fmt.Fprintf(tw, "within-group RMS\t%.4f\t%.4f\n", *r.BiasBefore, *r.BiasAfter)
	case r.grouped:
		fmt.Fprintln(tw, "within-group RMS\tn/a\tn/a\t(no group has 2 pairs)")
	default:
		fmt.Fprintln(tw, "within-group RMS\tn/a\tn/a\t(no group column)")
	}
	fmt.Fprintf(tw, "mean (wm - env)\t%.4f\t%.4f\n", r.MeanBiasBefore, r.MeanBiasAfter)
	if len(r.Knots) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "knot\tx\ty")
		for i, k := range r.Knots {
			fmt.Fprintf(tw, "%d\t%.4f\t%.4f\n", i+1, k.X, k.Y)
		}
	}
	if len(r.Applied) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "wm\tcalibrated")
		for _, a := range r.Applied {
			fmt.Fprintf(tw, "%.4f\t%.4f\n", a.WM, a.Calibrated)
		}
	}
	return tw.Flush()
}
