// Command isobench times isotonic.Fit against scikit-learn's
// IsotonicRegression(out_of_bounds="clip").fit on the same data and checks
// that both give the same predictions.
//
// For each size it generates deterministic pairs (generate.go), writes them
// as raw float64 files, and alternates one Go fit with one scikit-learn fit
// per round so both see the same machine load; each side reports the median
// of its rounds. scikit-learn runs in one long-lived /usr/bin/python3 process
// (internal/bench/sklearn_iso.py) that times fit in-process with
// time.perf_counter. Predictions are compared on a fixed grid over [-0.5,
// 1.5] and on every data point; any difference above -tol is an error and a
// non-zero exit.
//
// Run from the repository root: go run ./internal/bench/isobench
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wmrl/wmrl/internal/isotonic"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "isobench:", err)
		os.Exit(1)
	}
}

type config struct {
	sizes   []int
	repeats int
	seed    uint64
	tol     float64
	python  string
	script  string
	timeout time.Duration
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("isobench", flag.ContinueOnError)
	sizes := fs.String("sizes", "10000,100000,1000000", "comma-separated numbers of pairs")
	cfg := config{}
	fs.IntVar(&cfg.repeats, "repeats", 7, "timed fits per size and side (the median is reported)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "data seed")
	fs.Float64Var(&cfg.tol, "tol", 1e-9, "largest allowed absolute difference between predictions")
	fs.StringVar(&cfg.python, "python", "/usr/bin/python3", "python with scikit-learn")
	fs.StringVar(&cfg.script, "script", "internal/bench/sklearn_iso.py", "scikit-learn side of the benchmark")
	fs.DurationVar(&cfg.timeout, "timeout", 20*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return config{}, fmt.Errorf("size %q: not a positive integer", s)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	if cfg.repeats < 1 {
		return config{}, fmt.Errorf("repeats must be at least 1, got %d", cfg.repeats)
	}
	return cfg, nil
}

// row is one line of the result table.
type row struct {
	n              int
	goMS, skMS     float64
	maxDiff        float64
	knots, queries int
}

func run(args []string, out io.Writer) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "isobench")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)

	py, err := startPython(ctx, cfg.python, cfg.script)
	if err != nil {
		return err
	}
	defer py.close()
	ver, err := py.call("version")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "single-threaded isotonic fits: Go %s (GOMAXPROCS %d) vs scikit-learn/numpy %s; median of %d alternating rounds\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), strings.ReplaceAll(ver, " ", "/"), cfg.repeats)

	var rows []row
	for _, n := range cfg.sizes {
		r, err := benchSize(ctx, py, dir, n, cfg)
		if err != nil {
			return fmt.Errorf("n=%d: %w", n, err)
		}
		rows = append(rows, r)
	}
	printTable(out, rows)

	var bad []string
	for _, r := range rows {
		if !(r.maxDiff <= cfg.tol) {
			bad = append(bad, fmt.Sprintf("n=%d: max |diff| %.3g", r.n, r.maxDiff))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("predictions differ from scikit-learn by more than %g: %s", cfg.tol, strings.Join(bad, "; "))
	}
	return nil
}

func benchSize(ctx context.Context, py *python, dir string, n int, cfg config) (row, error) {
	x, y := generate(n, cfg.seed)
	if gap := minGap(x); gap < 1e-13 {
		// scikit-learn pools x values closer than 1e-15 as ties; keep the
		// data clear of that so both sides fit the same problem.
		return row{}, fmt.Errorf("generated x has distinct values only %g apart", gap)
	}
	id := strconv.Itoa(n)
	xf, yf := filepath.Join(dir, id+".x"), filepath.Join(dir, id+".y")
	if err := writeFloats(xf, x); err != nil {
		return row{}, err
	}
	if err := writeFloats(yf, y); err != nil {
		return row{}, err
	}
	if _, err := py.call("load", id, xf, yf); err != nil {
		return row{}, err
	}

	var goSec, skSec []float64
	var m isotonic.Map
	for range cfg.repeats {
		if err := ctx.Err(); err != nil {
			return row{}, err
		}
		runtime.GC()
		start := time.Now()
		fit, err := isotonic.Fit(x, y, nil)
		goSec = append(goSec, time.Since(start).Seconds())
		if err != nil {
			return row{}, fmt.Errorf("go fit: %w", err)
		}
		m = fit

		reply, err := py.call("fit", id)
		if err != nil {
			return row{}, err
		}
		s, err := strconv.ParseFloat(reply, 64)
		if err != nil {
			return row{}, fmt.Errorf("sklearn fit time %q: %w", reply, err)
		}
		skSec = append(skSec, s)
	}

	q := queries(x)
	qf, pf := filepath.Join(dir, id+".q"), filepath.Join(dir, id+".pred")
	if err := writeFloats(qf, q); err != nil {
		return row{}, err
	}
	if _, err := py.call("predict", id, qf, pf); err != nil {
		return row{}, err
	}
	want, err := readFloats(pf)
	if err != nil {
		return row{}, err
	}
	if len(want) != len(q) {
		return row{}, fmt.Errorf("sklearn returned %d predictions for %d queries", len(want), len(q))
	}
	got := make([]float64, len(q))
	m.ApplyAll(got, q)
	return row{
		n:       n,
		goMS:    1e3 * median(goSec),
		skMS:    1e3 * median(skSec),
		maxDiff: maxAbsDiff(got, want),
		knots:   len(m.X),
		queries: len(q),
	}, nil
}

// queries returns the prediction points: a grid of step 1e-4 over
// [-0.5, 1.5] (inside and outside the fitted range) followed by every x.
func queries(x []float64) []float64 {
	const steps = 20000
	q := make([]float64, 0, steps+1+len(x))
	for i := range steps + 1 {
		q = append(q, -0.5+2*float64(i)/steps)
	}
	return append(q, x...)
}

func printTable(out io.Writer, rows []row) {
	fmt.Fprintln(out, "| n | go_fit_ms | sklearn_fit_ms | speedup | max_abs_diff | knots | queries |")
	fmt.Fprintln(out, "|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(out, "| %d | %.2f | %.2f | %.1fx | %.1e | %d | %d |\n",
			r.n, r.goMS, r.skMS, r.skMS/r.goMS, r.maxDiff, r.knots, r.queries)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// maxAbsDiff returns the largest |a_i - b_i|; NaN anywhere gives NaN.
func maxAbsDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("maxAbsDiff: lengths %d and %d", len(a), len(b)))
	}
	d := 0.0
	for i := range a {
		e := math.Abs(a[i] - b[i])
		if math.IsNaN(e) {
			return math.NaN()
		}
		d = max(d, e)
	}
	return d
}

// minGap returns the smallest positive difference between values of x
// (+Inf when all are equal).
func minGap(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	gap := math.Inf(1)
	for i := 1; i < len(s); i++ {
		if d := s[i] - s[i-1]; d > 0 {
			gap = min(gap, d)
		}
	}
	return gap
}

var errPython = errors.New("python side failed")
