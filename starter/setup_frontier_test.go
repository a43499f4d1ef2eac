package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/reproduce"
)

// frontierRun is one (mode, seed) of a fixture: held-out score, training
// sandbox CPU-seconds, executions.
type frontierRun struct {
	m     mode.Mode
	seed  uint64
	score float64
	cpu   float64
	execs int
}

// writeFrontierFixture writes a hand-made results.json to path, made
// before the defaults had a version (runconfig.Defaults).
func writeFrontierFixture(t *testing.T, path string, suiteSeed uint64, config string, runs ...frontierRun) {
	t.Helper()
	writeFrontierFixtureAt(t, path, suiteSeed, 0, config, runs...)
}

// writeFrontierFixtureAt writes a hand-made results.json to path, made with
// version defaults of the presets' defaults.
func writeFrontierFixtureAt(t *testing.T, path string, suiteSeed uint64, defaults int, config string, runs ...frontierRun) {
	t.Helper()
	res := reproduce.Results{Header: reproduce.Header{Command: "wmrl bench reproduce --fixture", Config: config, Defaults: defaults},
		Preset: "small", SuiteSeed: suiteSeed, Steps: 30}
	for _, r := range runs {
		res.Runs = append(res.Runs, reproduce.Run{Mode: r.m, Seed: r.seed, HeldOutScore: r.score,
			SandboxCPUSeconds: r.cpu, Executions: r.execs})
	}
	var b bytes.Buffer
	if err := reproduce.WriteJSON(&b, res); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func simConfig(noise string) string {
	return "world_model:\n  backend: simulated\n  simulated:\n    noise: " + noise + "\n"
}

// frontierFixtures writes, under dir: base/results.json (grpo and anchor,
// seeds 1–3), sim-0.json (wmrl, simulated noise 0, seeds 1–3) and
// sim-0.2.json (wmrl, simulated noise 0.2, seeds 1–2).
func frontierFixtures(t *testing.T, dir string) {
	t.Helper()
	writeFrontierFixture(t, filepath.Join(dir, "base", "results.json"), 7, "",
		frontierRun{mode.GRPO, 1, 0.60, 100, 1920}, frontierRun{mode.GRPO, 2, 0.70, 120, 1920}, frontierRun{mode.GRPO, 3, 0.65, 110, 1920},
		frontierRun{mode.Anchor, 1, 0.62, 40, 480}, frontierRun{mode.Anchor, 2, 0.66, 50, 480}, frontierRun{mode.Anchor, 3, 0.64, 45, 480})
	writeFrontierFixture(t, filepath.Join(dir, "sim-0.json"), 7, simConfig("0"),
		frontierRun{mode.WMRL, 3, 0.70, 33, 480}, frontierRun{mode.WMRL, 1, 0.65, 30, 480}, frontierRun{mode.WMRL, 2, 0.69, 30, 480})
	writeFrontierFixture(t, filepath.Join(dir, "sim-0.2.json"), 7, simConfig("0.2"),
		frontierRun{mode.WMRL, 1, 0.58, 50, 480}, frontierRun{mode.WMRL, 2, 0.66, 60, 480})
}

func TestFrontierTable(t *testing.T) {
	dir := t.TempDir()
	frontierFixtures(t, dir)
	out := filepath.Join(dir, "out")
	base := filepath.Join(dir, "base")
	stdout, _, err := runWMRL(t, "bench", "frontier", "--out", out,
		"G="+base+":grpo", "A="+base+":anchor",
		"sd 0.2="+filepath.Join(dir, "sim-0.2.json"), "sd 0="+filepath.Join(dir, "sim-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, reproduce.FrontierMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	// By hand. grpo 0.60, 0.70, 0.65: mean 0.65, sd 0.05, SE 0.05/√3.
	// sd 0 − grpo per seed 0.05, −0.01, 0.05: mean 0.03, sd √0.0012, SE 0.02;
	// sd 0 − anchor 0.03, 0.03, 0.06: mean 0.04, SE 0.01; anchor − grpo
	// 0.02, −0.04, −0.01: mean −0.01, sd 0.03, SE 0.03/√3; sd 0.2 − grpo on
	// seeds 1, 2: −0.02, −0.04, mean −0.03, SE 0.01; − anchor −0.04, 0,
	// mean −0.02, SE 0.02.
	for _, want := range []string{
		"| G | grpo | none | 3 | 0.6000, 0.7000, 0.6500 | 0.6500 | 0.0289 | 110.0 | 1920 | (reference) | +0.0100 ± 0.0173 |  |",
		"| A | anchor | none | 3 | 0.6200, 0.6600, 0.6400 | 0.6400 | 0.0115 | 45.0 | 480 | -0.0100 ± 0.0173 | (reference) |  |",
		"| sd 0.2 | wmrl | simulated, noise 0.2 | 2 | 0.5800, 0.6600 | 0.6200 | 0.0400 | 55.0 | 480 | -0.0300 ± 0.0100 | -0.0200 ± 0.0200 |",
		"| sd 0 | wmrl | simulated, noise 0 | 3 | 0.6500, 0.6900, 0.7000 | 0.6800 | 0.0153 | 31.0 | 480 | +0.0300 ± 0.0200 | +0.0400 ± 0.0100 | met |",
		"vs G (paired, ± SE) | vs A (paired, ± SE) | no harm (≥ anchor − 1 SE) |",
		"![frontier](frontier.png)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("frontier.md lacks\n%s\n---\n%s", want, md)
		}
		if strings.HasPrefix(want, "| ") && !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %s", want)
		}
	}

	data, err := os.ReadFile(filepath.Join(out, reproduce.FrontierJSON))
	if err != nil {
		t.Fatal(err)
	}
	var fr reproduce.Frontier
	if err := json.Unmarshal(data, &fr); err != nil {
		t.Fatal(err)
	}
	if fr.GRPO != "G" || fr.Anchor != "A" || len(fr.Points) != 4 || fr.SuiteSeed != 7 || fr.Steps != 30 {
		t.Fatalf("frontier.json: %+v", fr)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	g, s02, s0 := fr.Points[0], fr.Points[2], fr.Points[3]
	near("grpo SE", g.HeldOutSE, 0.05/math.Sqrt(3))
	if g.VsGRPO != nil || g.Noise != nil || g.WorldModel != "" {
		t.Errorf("grpo point: %+v", g)
	}
	if s0.Noise == nil || *s0.Noise != 0 || s0.WorldModel != "simulated" || s0.VsGRPO == nil || s0.VsAnchor == nil {
		t.Fatalf("sd 0 point: %+v", s0)
	}
	near("sd 0 − grpo", s0.VsGRPO.Mean, 0.03)
	near("sd 0 − grpo SE", s0.VsGRPO.SE, 0.02)
	near("sd 0 − anchor SE", s0.VsAnchor.SE, 0.01)
	if got := s0.Seeds; len(got) != 3 || got[0] != 1 || got[2] != 3 || s0.HeldOutPerSeed[0] != 0.65 {
		t.Errorf("sd 0 seeds %v scores %v, want sorted by seed", got, s0.HeldOutPerSeed)
	}
	if s02.Noise == nil || *s02.Noise != 0.2 || len(s02.VsGRPO.Seeds) != 2 {
		t.Fatalf("sd 0.2 point: %+v", s02)
	}
	near("sd 0.2 − grpo SE", s02.VsGRPO.SE, 0.01)

	f, err := os.Open(filepath.Join(out, reproduce.FrontierPlot))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("frontier.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("frontier.png is %v", b)
	}

	// --json prints frontier.json's object.
	stdout, _, err = runWMRL(t, "bench", "frontier", "--json", "--out", out, "G="+base+":grpo", "sd 0="+filepath.Join(dir, "sim-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var js reproduce.Frontier
	if err := json.Unmarshal([]byte(stdout), &js); err != nil || len(js.Points) != 2 || js.Anchor != "" || js.Points[1].VsAnchor != nil {
		t.Errorf("--json: %v %+v", err, js)
	}
}

func TestFrontierArgErrors(t *testing.T) {
	dir := t.TempDir()
	frontierFixtures(t, dir)
	base := filepath.Join(dir, "base")
	sim := filepath.Join(dir, "sim-0.json")
	other := filepath.Join(dir, "other.json")
	writeFrontierFixture(t, other, 8, "", frontierRun{mode.GRPO, 1, 0.5, 10, 100})
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	checkFrontierErrors(t, filepath.Join(dir, "out"), []frontierErrCase{
		{nil, true, "no point"},
		{[]string{"G"}, true, `"G": want LABEL=RESULTS[:MODE]`},
		{[]string{"=" + base}, true, "empty label"},
		{[]string{"G=:grpo"}, true, `"G=:grpo": empty results path`},
		{[]string{"G=" + base + ":bogus"}, true, `:bogus": mode after ':'`},
		{[]string{"G=" + base}, true, "holds modes grpo, anchor: name one"},
		{[]string{"G=" + base + ":grpo", "G=" + sim}, false, `label "G": ` + filepath.Join(base, "results.json") + " is mode grpo, " + sim + " mode wmrl: one label pools runs of one mode"},
		{[]string{"G=" + base + ":grpo", "G=" + base + ":grpo"}, true, `label "G" already reads ` + base},
		{[]string{"W=" + base + ":wmrl"}, false, "has no run of mode wmrl (it holds grpo, anchor)"},
		{[]string{"X=" + filepath.Join(dir, "missing")}, false, `"X=` + filepath.Join(dir, "missing") + `"`},
		{[]string{"E=" + empty}, false, "has no results.json"},
		{[]string{"G=" + base + ":grpo", "O=" + other}, false, "suite seed 8"},
		{[]string{"G=" + base + ":grpo", "S=" + sim, "--grpo", "nope"}, true, `--grpo "nope" is not a label`},
		{[]string{"G=" + base + ":grpo", "G2=" + base + ":grpo"}, true, "points G, G2 all ran grpo"},
	})
	// Two grpo points are fine once --grpo names the reference.
	if _, _, err := runWMRL(t, "bench", "frontier", "--out", filepath.Join(dir, "out"), "--grpo", "G2",
		"G="+base+":grpo", "G2="+base+":grpo"); err != nil {
		t.Errorf("--grpo G2: %v", err)
	}
}

// frontierErrCase is a wmrl bench frontier invocation that must fail: its
// arguments after --out, whether the failure is a usage error, and what the
// error must say.
type frontierErrCase struct {
	give  []string
	usage bool
	want  string
}

// checkFrontierErrors runs each case with --out out and checks its error.
func checkFrontierErrors(t *testing.T, out string, cases []frontierErrCase) {
	t.Helper()
	for _, tt := range cases {
		args := append([]string{"bench", "frontier", "--out", out}, tt.give...)
		_, _, err := runWMRL(t, args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.give, err, tt.want)
			continue
		}
		if got := exitStatus(err) == exitUsage; got != tt.usage {
			t.Errorf("%q: usage error %v, want %v (%v)", tt.give, got, tt.usage, err)
		}
	}
}

// TestFrontierPooledAnchor pools a label's runs from two results files and
// pairs every point with the per-seed mean of a control and its null
// perturbation: the world-model point misses the no-harm bar against the
// control alone and meets it against the pooled control (numbers by hand).
func TestFrontierPooledAnchor(t *testing.T) {
	dir := t.TempDir()
	frontierFixtures(t, dir)
	base := filepath.Join(dir, "base")
	a2 := filepath.Join(dir, "a2.json")
	writeFrontierFixture(t, a2, 7, "policy:\n  learning_rate: 0.0099\n",
		frontierRun{mode.Anchor, 1, 0.58, 40, 480}, frontierRun{mode.Anchor, 2, 0.64, 40, 480}, frontierRun{mode.Anchor, 3, 0.60, 40, 480})
	diff := "denoise:\n  estimator: difference\n"
	w1, w2 := filepath.Join(dir, "w1.json"), filepath.Join(dir, "w2.json")
	writeFrontierFixture(t, w1, 7, diff, frontierRun{mode.WMRL, 1, 0.61, 30, 480}, frontierRun{mode.WMRL, 2, 0.65, 30, 480})
	writeFrontierFixture(t, w2, 7, diff, frontierRun{mode.WMRL, 3, 0.60, 34, 480})
	out := filepath.Join(dir, "out")

	// Against A alone, W − A per seed −0.01, −0.01, −0.04: −0.02 ± 0.01,
	// below minus its SE.
	stdout, _, err := runWMRL(t, "bench", "frontier", "--out", out, "--anchor", "A",
		"G="+base+":grpo", "A="+base+":anchor", "A2="+a2, "W="+w1, "W="+w2)
	if err != nil {
		t.Fatal(err)
	}
	if want := "| W | wmrl | builtin | 3 | 0.6100, 0.6500, 0.6000 | 0.6200 | 0.0153 | 31.3 | 480 | -0.0300 ± 0.0200 | -0.0200 ± 0.0100 | **missed** |"; !strings.Contains(stdout, want) {
		t.Errorf("table lacks\n%s\n---\n%s", want, stdout)
	}

	// Pooled with A2: per seed 0.60, 0.65, 0.62; W − pool 0.01, 0, −0.02:
	// −0.0033 ± 0.0088, met. A and A2 are paired with the pool too.
	stdout, _, err = runWMRL(t, "bench", "frontier", "--out", out, "--anchor", "A,A2",
		"G="+base+":grpo", "A="+base+":anchor", "A2="+a2, "W="+w1, "W="+w2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| W | wmrl | builtin | 3 | 0.6100, 0.6500, 0.6000 | 0.6200 | 0.0153 | 31.3 | 480 | -0.0300 ± 0.0200 | -0.0033 ± 0.0088 | met |",
		"| A | anchor | none | 3 | 0.6200, 0.6600, 0.6400 | 0.6400 | 0.0115 | 45.0 | 480 | -0.0100 ± 0.0173 | +0.0167 ± 0.0033 |  |",
		"| A2 | anchor | none | 3 | 0.5800, 0.6400, 0.6000 | 0.6067 | 0.0176 | 40.0 | 480 | -0.0433 ± 0.0120 | -0.0167 ± 0.0033 |  |",
		"vs A + A2 (paired, ± SE)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks\n%s\n---\n%s", want, stdout)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, reproduce.FrontierMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`Anchor reference "A + A2": the per-seed mean of A, A2 over the seeds all of them ran (1: 0.6000, 2: 0.6500, 3: 0.6200; mean 0.6233).`,
		"- W: mode wmrl of `" + w1 + ", " + w2 + "` (`wmrl bench reproduce --fixture; wmrl bench reproduce --fixture`)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("frontier.md lacks\n%s\n---\n%s", want, md)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, reproduce.FrontierJSON))
	if err != nil {
		t.Fatal(err)
	}
	var fr reproduce.Frontier
	if err := json.Unmarshal(data, &fr); err != nil {
		t.Fatal(err)
	}
	if fr.Anchor != "A + A2" || fr.AnchorPool == nil || len(fr.AnchorPool.Seeds) != 3 || fr.AnchorPool.Labels[1] != "A2" {
		t.Fatalf("frontier.json anchor %q pool %+v", fr.Anchor, fr.AnchorPool)
	}
	if w := fr.Points[3]; w.Label != "W" || w.NoHarm == nil || !*w.NoHarm || math.Abs(w.VsAnchor.Mean+0.01/3) > 1e-12 {
		t.Errorf("W point: %+v", w)
	}
	if g := fr.Points[0]; g.NoHarm != nil {
		t.Errorf("grpo point has a no-harm verdict: %+v", g)
	}

	// What cannot be pooled is refused, naming what is wrong.
	wx := filepath.Join(dir, "wx.json")
	writeFrontierFixture(t, wx, 7, "", frontierRun{mode.WMRL, 3, 0.60, 34, 480})
	wdup := filepath.Join(dir, "wdup.json")
	writeFrontierFixture(t, wdup, 7, diff, frontierRun{mode.WMRL, 2, 0.60, 34, 480})
	a9 := filepath.Join(dir, "a9.json")
	writeFrontierFixture(t, a9, 7, "", frontierRun{mode.Anchor, 9, 0.60, 34, 480})
	// pools checks that seed 4 of path pools with w1 and w2 under W.
	pools := func(path string) {
		t.Helper()
		stdout, _, err := runWMRL(t, "bench", "frontier", "--out", out, "A="+base+":anchor", "W="+w1, "W="+w2, "W="+path)
		if err != nil {
			t.Fatal(err)
		}
		if want := "| W | wmrl | builtin | 4 | 0.6100, 0.6500, 0.6000, 0.6300 |"; !strings.Contains(stdout, want) {
			t.Errorf("%s: table lacks\n%s\n---\n%s", path, want, stdout)
		}
	}
	// The same configuration written differently pools: the default
	// suite seed named, the estimator in flow style, a comment.
	wsame := filepath.Join(dir, "wsame.json")
	writeFrontierFixture(t, wsame, 7, "# the difference estimator\nsuite_seed: 20260829\ndenoise: {estimator: difference}\n", frontierRun{mode.WMRL, 4, 0.63, 30, 480})
	pools(wsame)
	// A text is read over the defaults its runs had: since version 1 the
	// difference estimator is the default, so "memory: false" then is the
	// configuration "estimator: difference" was before, and "" then is
	// not what "" was before.
	wnew := filepath.Join(dir, "wnew.json")
	writeFrontierFixtureAt(t, wnew, 7, 1, "denoise:\n  memory: false\n", frontierRun{mode.WMRL, 4, 0.63, 30, 480})
	pools(wnew)
	wnew0 := filepath.Join(dir, "wnew0.json")
	writeFrontierFixtureAt(t, wnew0, 7, 1, "", frontierRun{mode.WMRL, 4, 0.63, 30, 480})
	wbad := filepath.Join(dir, "wbad.json")
	writeFrontierFixture(t, wbad, 7, "denoise: {estimator: ppi}\n", frontierRun{mode.WMRL, 5, 0.60, 34, 480})
	checkFrontierErrors(t, out, []frontierErrCase{
		{[]string{"W=" + w1, "W=" + wbad}, false, `label "W": recorded --config "denoise: {estimator: ppi}\n": `},
		{[]string{"W=" + w1, "W=" + wx}, false, `label "W": ` + w1 + " and " + wx + " were run with different --config"},
		{[]string{"W=" + wx, "W=" + wnew0}, false, `label "W": ` + wx + " and " + wnew0 + " were run with different --config"},
		{[]string{"W=" + w1, "W=" + wnew0}, false, `label "W": ` + w1 + " and " + wnew0 + " were run with different --config"},
		{[]string{"W=" + w1, "W=" + wdup}, false, "seed 2 appears twice"},
		{[]string{"--anchor", "A,nope", "A=" + base + ":anchor", "W=" + w1}, true, `--anchor "nope" is not a label`},
		{[]string{"--anchor", "A,A", "A=" + base + ":anchor", "W=" + w1}, true, `--anchor names "A" twice`},
		{[]string{"--anchor", "A,A9", "A=" + base + ":anchor", "A9=" + a9}, false, "--anchor A,A9: no seed is in all of them"},
	})
}

// TestFrontierWorldModel reads the world model from each result's recorded
// --config: the built-in one when it names none, its refresh, another
// backend; a mode without world model has none.
func TestFrontierWorldModel(t *testing.T) {
	dir := t.TempDir()
	frontierFixtures(t, dir)
	refresh := filepath.Join(dir, "refresh.json")
	writeFrontierFixture(t, refresh, 7, "world_model:\n  refresh:\n    every: 5\n", frontierRun{mode.WMRL, 1, 0.6, 20, 480})
	remote := filepath.Join(dir, "remote.json")
	writeFrontierFixture(t, remote, 7, "world_model:\n  backend: openai\n", frontierRun{mode.WMRL, 1, 0.6, 20, 480})
	bad := filepath.Join(dir, "bad.json")
	writeFrontierFixture(t, bad, 7, "world_model: [", frontierRun{mode.WMRL, 1, 0.6, 20, 480})
	stdout, _, err := runWMRL(t, "bench", "frontier", "--out", filepath.Join(dir, "out"),
		"G="+filepath.Join(dir, "base")+":grpo", "R="+refresh, "O="+remote)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| G | grpo | none | 3 |", "| R | wmrl | builtin, refreshed every 5 steps | 1 |", "| O | wmrl | openai | 1 |"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %s:\n%s", want, stdout)
		}
	}
	if _, _, err := runWMRL(t, "bench", "frontier", "--out", filepath.Join(dir, "out"), "B="+bad); err == nil || !strings.Contains(err.Error(), "B ("+bad+"): header config") {
		t.Errorf("malformed header config: %v", err)
	}
}
