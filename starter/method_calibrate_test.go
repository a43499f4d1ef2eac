package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/debias"
	"github.com/wmrl/wmrl/internal/pairscsv"
)

const (
	examplePairs = "../internal/pairscsv/testdata/example_pairs.csv"
	exampleWM    = "../internal/pairscsv/testdata/example_wm.csv"
)

// runWMRL runs the wmrl command line in-process.
func runWMRL(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// jsonReport mirrors the --json object, with pointers to see nulls.
type jsonReport struct {
	Method         string   `json:"method"`
	Bins           int      `json:"bins"`
	MinPairs       int      `json:"min_pairs"`
	Window         int      `json:"window"`
	NPairs         int      `json:"n_pairs"`
	NUsed          int      `json:"n_used"`
	Identity       bool     `json:"identity"`
	Knots          []knot   `json:"knots"`
	BiasBefore     *float64 `json:"bias_before"`
	BiasAfter      *float64 `json:"bias_after"`
	MeanBiasBefore *float64 `json:"mean_bias_before"`
	MeanBiasAfter  *float64 `json:"mean_bias_after"`
	FitSeconds     *float64 `json:"fit_seconds"`
	Applied        []struct {
		WM         float64 `json:"wm"`
		Calibrated float64 `json:"calibrated"`
	} `json:"applied"`
}

func decodeReport(t *testing.T, s string) jsonReport {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var r jsonReport
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %q", s)
	}
	if r.Knots == nil || r.Applied == nil || r.FitSeconds == nil || r.MeanBiasBefore == nil {
		t.Fatalf("missing fields in %s", s)
	}
	return r
}

func checkKnots(t *testing.T, ks []knot) {
	t.Helper()
	for i := 1; i < len(ks); i++ {
		if ks[i].X <= ks[i-1].X || ks[i].Y < ks[i-1].Y {
			t.Fatalf("knots %d and %d out of order: %+v %+v", i-1, i, ks[i-1], ks[i])
		}
	}
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCalibrateText(t *testing.T) {
	out, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"method    pava\n",
		"pairs     48 (window: all pairs, used: 48)\n",
		"knots\n",
		"fit time  ",
		"within-group RMS  0.1073   0.0294\n",
		"mean (wm - env)   -0.2621  ",
		"knot  x       y\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestCalibrateJSON(t *testing.T) {
	out, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs, "--json")
	if err != nil {
		t.Fatal(err)
	}
	r := decodeReport(t, out)
	if r.Method != "pava" || r.NPairs != 48 || r.NUsed != 48 || r.Identity || r.MinPairs != 32 {
		t.Fatalf("report %+v", r)
	}
	if len(r.Knots) < 2 {
		t.Fatalf("%d knots", len(r.Knots))
	}
	checkKnots(t, r.Knots)
	if r.BiasBefore == nil || r.BiasAfter == nil || *r.BiasAfter >= *r.BiasBefore {
		t.Fatalf("bias before %v after %v, want a drop", r.BiasBefore, r.BiasAfter)
	}
	if *r.FitSeconds < 0 || *r.FitSeconds > 1 {
		t.Fatalf("fit_seconds %v", *r.FitSeconds)
	}
	if len(r.Applied) != 0 {
		t.Fatalf("applied %v without --apply", r.Applied)
	}
	// The knots are the map debias.Fit computes from the same file.
	fh, err := os.Open(examplePairs)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	pairs, _, err := pairscsv.ReadPairs(fh)
	if err != nil {
		t.Fatal(err)
	}
	m, err := debias.Fit(pairs, debias.Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.X) != len(r.Knots) {
		t.Fatalf("%d knots, debias.Fit gives %d", len(r.Knots), len(m.X))
	}
	for i, k := range r.Knots {
		if k.X != m.X[i] || k.Y != m.Y[i] {
			t.Fatalf("knot %d = %+v, want (%v, %v)", i, k, m.X[i], m.Y[i])
		}
	}
}

func TestCalibrateApply(t *testing.T) {
	out, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs, "--apply", exampleWM, "--json")
	if err != nil {
		t.Fatal(err)
	}
	r := decodeReport(t, out)
	want := []float64{0, 0.01, 0.1, 0.3, 0.6, 1}
	if len(r.Applied) != len(want) {
		t.Fatalf("applied %v", r.Applied)
	}
	first, last := r.Knots[0], r.Knots[len(r.Knots)-1]
	for i, a := range r.Applied {
		if a.WM != want[i] {
			t.Fatalf("applied[%d].wm = %v, want %v", i, a.WM, want[i])
		}
		if i > 0 && a.Calibrated < r.Applied[i-1].Calibrated {
			t.Fatalf("calibrated scores decrease: %v", r.Applied)
		}
		if a.Calibrated < first.Y || a.Calibrated > last.Y {
			t.Fatalf("calibrated %v outside the knots' range", a.Calibrated)
		}
	}
	// Clamped below the first knot and above the last.
	if r.Applied[0].Calibrated != first.Y || r.Applied[len(want)-1].Calibrated != last.Y {
		t.Fatalf("ends %v, %v not clamped to %v, %v", r.Applied[0], r.Applied[len(want)-1], first.Y, last.Y)
	}

	text, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs, "--apply", exampleWM)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "wm      calibrated\n0.0000  0.0845\n") || !strings.HasSuffix(text, "1.0000  0.9760\n") {
		t.Fatalf("text output lacks the applied table:\n%s", text)
	}
}

func TestCalibrateBinned(t *testing.T) {
	out, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs, "--method", "binned", "--bins", "5", "--json")
	if err != nil {
		t.Fatal(err)
	}
	r := decodeReport(t, out)
	if r.Method != "binned" || r.Bins != 5 {
		t.Fatalf("report %+v", r)
	}
	if len(r.Knots) < 1 || len(r.Knots) > 2*5 {
		t.Fatalf("%d knots for 5 bins", len(r.Knots))
	}
	checkKnots(t, r.Knots)
	text, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs, "--method", "binned", "--bins", "5")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "method    binned (5 bins)\n") {
		t.Fatalf("text output:\n%s", text)
	}
}

func TestCalibrateWindowAndIdentity(t *testing.T) {
	out, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs, "--window", "16", "--min-pairs", "20", "--json")
	if err != nil {
		t.Fatal(err)
	}
	r := decodeReport(t, out)
	if r.NPairs != 48 || r.NUsed != 16 || !r.Identity || len(r.Knots) != 0 {
		t.Fatalf("window 16 < min pairs 20: %+v", r)
	}
	if *r.BiasBefore != *r.BiasAfter {
		t.Fatalf("identity map changed the bias: %v -> %v", *r.BiasBefore, *r.BiasAfter)
	}
	text, _, err := runWMRL(t, "calibrate", "--pairs", examplePairs, "--window", "16", "--min-pairs", "20")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "map       identity (16 pairs used, --min-pairs 20)") {
		t.Fatalf("text output:\n%s", text)
	}
}

func TestCalibrateNoGroups(t *testing.T) {
	p := writeFile(t, "pairs.csv", "wm,env\n0.1,0.3\n0.2,0.2\n0.5,0.9\n")
	out, _, err := runWMRL(t, "calibrate", "--pairs", p, "--min-pairs", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"bias_before":null,"bias_after":null`) {
		t.Fatalf("bias not null without groups: %s", out)
	}
	r := decodeReport(t, out)
	// PAVA pools (0.1, 0.3) and (0.2, 0.2) into 0.25.
	if want := []knot{{0.1, 0.25}, {0.2, 0.25}, {0.5, 0.9}}; len(r.Knots) != 3 ||
		r.Knots[0] != want[0] || r.Knots[1] != want[1] || r.Knots[2] != want[2] {
		t.Fatalf("knots %v, want %v", r.Knots, want)
	}
	if math.Abs(*r.MeanBiasAfter) > 1e-12 {
		t.Fatalf("PAVA in-sample mean bias %v, want 0", *r.MeanBiasAfter)
	}
	text, _, err := runWMRL(t, "calibrate", "--pairs", p, "--min-pairs", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "(no group column)") {
		t.Fatalf("text output:\n%s", text)
	}
}

func TestCalibrateRejects(t *testing.T) {
	bad := writeFile(t, "bad.csv", "wm,env,group\n0.1,0.2,a\n0.3,1.5,a\n")
	badApply := writeFile(t, "wm.csv", "wm\n0.1\n\n0.2,0.3\n")
	tests := []struct {
		name string
		give []string
		want string // substring of the error
	}{
		{"malformed pairs", []string{"--pairs", bad}, `line 3: env: "1.5" is outside [0, 1]`},
		{"malformed apply", []string{"--pairs", examplePairs, "--apply", badApply, "--json"}, "line 4: 2 values"},
		{"missing file", []string{"--pairs", filepath.Join(t.TempDir(), "none.csv")}, "pairs file"},
		{"missing --pairs", nil, `"pairs"`},
		{"unknown method", []string{"--pairs", examplePairs, "--method", "spline"}, `--method: "spline"`},
		{"zero bins", []string{"--pairs", examplePairs, "--bins", "0"}, "--bins 0: want 1..1000000"},
		{"negative window", []string{"--pairs", examplePairs, "--window", "-1"}, "--window"},
		{"negative min pairs", []string{"--pairs", examplePairs, "--min-pairs", "-2"}, "--min-pairs"},
		{"positional argument", []string{"--pairs", examplePairs, "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runWMRL(t, append([]string{"calibrate"}, tt.give...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if out != "" {
				t.Fatalf("stdout not empty on error: %q", out)
			}
		})
	}
}
