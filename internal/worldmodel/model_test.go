package worldmodel

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// synthetic returns examples whose score is a logistic function of a few
// features plus noise, in groups of 8.
func synthetic(n int, r *rand.Rand) []Example {
	d := numFeatures
	out := make([]Example, n)
	for i := range out {
		x := make([]float64, d)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		z := 1.5*x[0] - x[1] + 0.5*x[2]*x[3] + 0.3*r.NormFloat64()
		out[i] = Example{Group: string(rune('a' + i/8)), X: x, Y: sigmoid(z)}
	}
	return out
}

func TestFitLinearDeterministicAndUseful(t *testing.T) {
	ex := synthetic(400, rand.New(rand.NewPCG(1, 2)))
	m1, err := FitLinear(ex, FeatureNames(), DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	m2, err := FitLinear(ex, FeatureNames(), DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	b1, err := m1.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := m2.Marshal()
	if !bytes.Equal(b1, b2) {
		t.Fatal("two fits of the same data give different artefacts")
	}
	test := synthetic(200, rand.New(rand.NewPCG(3, 4)))
	var g []string
	var p, y []float64
	for _, e := range test {
		g = append(g, e.Group)
		p = append(p, m1.PredictFeatures(e.X))
		y = append(y, e.Y)
	}
	rho, n := WithinGroupSpearman(g, p, y)
	if n != 25 || rho < 0.7 {
		t.Fatalf("held-out within-group Spearman %.3f over %d groups, want >= 0.7 over 25", rho, n)
	}
}

func TestFitLinearRejects(t *testing.T) {
	good := synthetic(20, rand.New(rand.NewPCG(1, 2)))
	short := synthetic(20, rand.New(rand.NewPCG(1, 2)))
	short[3].X = short[3].X[:5]
	nan := synthetic(20, rand.New(rand.NewPCG(1, 2)))
	nan[4].Y = math.NaN()
	tests := []struct {
		name string
		give []Example
		opt  FitOptions
		want string
	}{
		{"too few", good[:1], DefaultFitOptions(), "at least 2"},
		{"zero lambda", good, FitOptions{Lambda: 0, TargetEps: 0.05, Link: LinkLogit}, "lambda"},
		{"bad eps", good, FitOptions{Lambda: 1, TargetEps: 0.5, Link: LinkLogit}, "eps"},
		{"short row", short, DefaultFitOptions(), "example 3 has 5 features"},
		{"nan score", nan, DefaultFitOptions(), "example 4 has score NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FitLinear(tt.give, FeatureNames(), tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FitLinear error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func fittedModel(t *testing.T) *Model {
	t.Helper()
	m, err := FitLinear(synthetic(100, rand.New(rand.NewPCG(5, 6))), FeatureNames(), DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// reseal re-encodes a JSON object edited by f with a valid checksum, so that
// a test reaches the checks behind the checksum.
func reseal(t *testing.T, art []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(art, &raw); err != nil {
		t.Fatal(err)
	}
	f(raw)
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadRoundTrip(t *testing.T) {
	m := fittedModel(t)
	art, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(art)
	if err != nil {
		t.Fatalf("Load of a fresh artefact: %v", err)
	}
	again, _ := got.Marshal()
	if !bytes.Equal(art, again) {
		t.Fatal("Load then Marshal changes the artefact")
	}
}

func TestLoadRefusesCorrupted(t *testing.T) {
	m := fittedModel(t)
	art, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// An edited value under the old checksum.
	var edited map[string]any
	if err := json.Unmarshal(art, &edited); err != nil {
		t.Fatal(err)
	}
	edited["intercept"] = edited["intercept"].(float64) + 0.5
	flipped, _ := json.Marshal(edited)
	tests := []struct {
		name string
		give []byte
		want string
	}{
		{"empty", nil, "EOF"},
		{"truncated", art[:len(art)/2], "unexpected EOF"},
		{"edited value", flipped, "checksum mismatch"},
		{"no checksum", nil, ""}, // filled in below
		{"unknown field", bytes.Replace(art, []byte(`"version"`), []byte(`"extra": 1, "version"`), 1), "unknown field"},
		{"wrong version", reseal(t, art, func(m map[string]any) { m["version"] = 99 }), "format version 99"},
		{"stale layout", reseal(t, art, func(m map[string]any) {
			names := m["feature_names"].([]any)
			names[0] = "renamed"
		}), "feature layout differs"},
		{"short weights", reseal(t, art, func(m map[string]any) {
			m["weights"] = m["weights"].([]any)[:3]
		}), "parameter lengths"},
		{"zero scale", reseal(t, art, func(m map[string]any) {
			m["scale"].([]any)[7] = 0.0
		}), "scale > 0"},
	}
	// A sealed artefact whose checksum field was blanked.
	var blank map[string]any
	if err := json.Unmarshal(art, &blank); err != nil {
		t.Fatal(err)
	}
	blank["checksum"] = ""
	tests[3].give, _ = json.Marshal(blank)
	tests[3].want = "no checksum"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.give)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	group := []string{"a", "a", "a", "b", "b", "b"}
	wm := []float64{0.05, 0.15, 0.95, 0.5, 0.55, 0.6}
	env := []float64{0.1, 0.2, 0.8, 0.6, 0.5, 0.4}
	r := Summarize(group, wm, env, 10)
	if r.SpearmanGroups != 2 || math.Abs(r.SpearmanWithinGroup-0) > 1e-12 {
		t.Fatalf("within-group Spearman %v over %d, want 0 over 2 (a: +1, b: -1)", r.SpearmanWithinGroup, r.SpearmanGroups)
	}
	wantBias := (0.05 + 0.15 + 0.95 + 0.5 + 0.55 + 0.6 - (0.1 + 0.2 + 0.8 + 0.6 + 0.5 + 0.4)) / 6
	if math.Abs(r.MeanBias-wantBias) > 1e-12 {
		t.Fatalf("mean bias %v, want %v", r.MeanBias, wantBias)
	}
	// Bins: [0,.1): 0.05; [.1,.2): 0.15; [.5,.6): 0.5, 0.55; [.6,.7): 0.6; [.9,1]: 0.95.
	wantBins := []Bin{
		{Lo: 0, Hi: 0.1, N: 1, MeanWM: 0.05, MeanEnv: 0.1},
		{Lo: 0.1, Hi: 0.2, N: 1, MeanWM: 0.15, MeanEnv: 0.2},
		{Lo: 0.5, Hi: 0.6, N: 2, MeanWM: 0.525, MeanEnv: 0.55},
		{Lo: 0.6, Hi: 0.7, N: 1, MeanWM: 0.6, MeanEnv: 0.4},
		{Lo: 0.9, Hi: 1, N: 1, MeanWM: 0.95, MeanEnv: 0.8},
	}
	if len(r.Calibration) != len(wantBins) {
		t.Fatalf("calibration %+v, want %+v", r.Calibration, wantBins)
	}
	for i, b := range r.Calibration {
		w := wantBins[i]
		if b.N != w.N || math.Abs(b.Lo-w.Lo) > 1e-12 || math.Abs(b.MeanWM-w.MeanWM) > 1e-12 || math.Abs(b.MeanEnv-w.MeanEnv) > 1e-12 {
			t.Fatalf("bin %d = %+v, want %+v", i, b, w)
		}
	}
	wantECE := (0.05 + 0.05 + 2*0.025 + 0.2 + 0.15) / 6
	if math.Abs(r.CalibrationError-wantECE) > 1e-12 {
		t.Fatalf("calibration error %v, want %v", r.CalibrationError, wantECE)
	}
}

// TestSummarizeAfterIsotonic: predictions that are a monotone distortion of
// the truth (biased and compressed) are mostly repaired by the cross-fitted
// isotonic map, and their within-group order is kept.
func TestSummarizeAfterIsotonic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var group []string
	var wm, env []float64
	for g := range 8 {
		for range 40 {
			y := r.Float64()
			group = append(group, string(rune('a'+g)))
			env = append(env, y)
			wm = append(wm, 0.3+0.2*y*y) // biased low at the top, compressed, non-affine
		}
	}
	rep := Summarize(group, wm, env, 10)
	a := rep.AfterIsotonic
	if a == nil {
		t.Fatal("no after-isotonic statistics")
	}
	if math.Abs(rep.MeanBias) < 0.05 || math.Abs(a.MeanBias) > 0.02 || a.CalibrationError > rep.CalibrationError/3 {
		t.Fatalf("bias %.4f -> %.4f, calibration error %.4f -> %.4f: want the map to remove most of both",
			rep.MeanBias, a.MeanBias, rep.CalibrationError, a.CalibrationError)
	}
	if a.SpearmanWithinGroup < 0.95 {
		t.Fatalf("within-group Spearman after the map %.3f, want the order kept (>= 0.95)", a.SpearmanWithinGroup)
	}
	if one := Summarize([]string{"a", "a"}, []float64{0.1, 0.2}, []float64{0.1, 0.3}, 10); one.AfterIsotonic != nil {
		t.Fatal("after-isotonic statistics from a single task")
	}
}
