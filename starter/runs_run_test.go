package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/runconfig"
	"github.com/wmrl/wmrl/workflows"
)

// runCmd runs the wmrl command line in-process with a context.
func runCmd(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// nowhere are connection flags that reach no service: a command that got
// past its checks would fail to connect instead.
var nowhere = []string{"--address", "127.0.0.1:1", "--database-url", "host=127.0.0.1 port=1 user=x dbname=x connect_timeout=1"}

func TestRunConfigErrorsNameEveryField(t *testing.T) {
	bad := writeFile(t, "bad.yaml", "steps: 0\ngroups: 4\nanchors:\n  fraction: 1.5\ndenoise:\n  half_life: -1\nsandbox:\n  kind: VM\n")
	tests := []struct {
		name string
		give []string
		want []string
	}{
		{"fields", []string{"run", "--config", bad},
			[]string{"nothing started", "steps: line 1: must be in [1,1000000], got 0", "anchors.fraction:", "denoise.half_life:", "sandbox.kind:"}},
		{"flags", []string{"run", "--preset", "tiny", "--name", "no spaces"}, []string{"--name: letters"}},
		{"unknown field", []string{"run", "--config", writeFile(t, "u.yaml", "groups: 4\nstepz: 3\n")},
			[]string{"field stepz not found", "nothing started"}},
		{"bad mode", []string{"run", "--config", writeFile(t, "m.yaml", "mode: fast\n")}, []string{"mode: line 1"}},
		{"preset", []string{"run", "--preset", "huge"}, []string{`unknown preset "huge"`, "tiny, demo, small, default"}},
		{"neither", []string{"run"}, []string{"--config FILE or --preset NAME"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t.Context(), append(tt.give, nowhere...)...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "connect") || out != "" {
				t.Errorf("got past the config check: %v, stdout %q", err, out)
			}
		})
	}
}

func TestRunConfigPresetsAndOverrides(t *testing.T) {
	for _, name := range runconfig.PresetNames() {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadRunConfig(runOptions{preset: name}, false, false)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := runconfig.Preset(name)
			if cfg.Name != name || cfg.Steps != want.Steps || cfg.Groups != want.Groups {
				t.Errorf("preset %s gave %+v", name, cfg)
			}
		})
	}
	file := writeFile(t, "c.yaml", "mode: grpo\nsteps: 5\n")
	cfg, err := loadRunConfig(runOptions{preset: "tiny", configFile: file, name: "exp-1", seed: 9}, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "exp-1" || cfg.Seed != 9 || cfg.Mode != mode.GRPO || cfg.Steps != 5 || cfg.Groups != 4 {
		t.Errorf("config file over preset tiny with flags: %+v", cfg)
	}
	// Without a preset, the file goes over the default configuration.
	cfg, err = loadRunConfig(runOptions{configFile: file}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "default" || cfg.Groups != runconfig.Default().Groups || cfg.Steps != 5 {
		t.Errorf("config file over default: %+v", cfg)
	}
	// An unset --seed flag keeps the configuration's seed, even 0.
	cfg, _ = loadRunConfig(runOptions{preset: "tiny", seed: 0}, false, false)
	if cfg.Seed != runconfig.Default().Seed {
		t.Errorf("seed %d, want the preset's", cfg.Seed)
	}
}

func TestSetAnchorFractionRefusesNonNumbers(t *testing.T) {
	for _, give := range []string{"abc", "NaN", "inf", ""} {
		_, _, err := runCmd(t.Context(), append([]string{"set-anchor-fraction", "r", give}, nowhere...)...)
		if err == nil || !strings.Contains(err.Error(), "want a number in [0,1]") {
			t.Errorf("set-anchor-fraction %q: %v", give, err)
		}
	}
}

// keysOf returns the top-level keys of a JSON object.
func keysOf(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

func TestJSONShapes(t *testing.T) {
	st := statusReport{Status: workflows.Status{Run: "r", Name: "r", State: "running", Mode: mode.WMRL, Step: 1, Steps: 3},
		Workflow: wfRunning, Source: sourceQuery, URL: "u"}
	tests := []struct {
		name string
		give any
		want []string
	}{
		{"status", st, []string{"run", "state", "mode", "step", "steps", "rho", "anchor_fraction", "realised_anchor_fraction",
			"checkpoint", "workflow", "source", "url"}},
		{"run", runReport{Run: "r", Status: st}, []string{"run", "temporal_run_id", "detached", "status", "url"}},
		{"list", listReport{Runs: []listedRun{{Run: "r", Mode: mode.WMRL}}}, []string{"runs"}},
		{"signal", signalReport{Run: "r", Signal: "pause", Sent: true}, []string{"run", "signal", "sent"}},
		{"fraction", fractionReport{Run: "r", Fraction: 2, Reason: "x"}, []string{"run", "anchor_fraction", "accepted", "reason"}},
		{"inspect", inspectReport{Run: "r", Mode: mode.WMRL}, []string{"run", "mode", "step", "status", "metrics", "rho", "calibration", "cost",
			"checkpoint", "trajectories", "anchor_pairs", "stages"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeJSON(&b, tt.give); err != nil {
				t.Fatal(err)
			}
			m := keysOf(t, b.Bytes())
			for _, k := range tt.want {
				if _, ok := m[k]; !ok {
					t.Errorf("%s --json lacks %q: %s", tt.name, k, b.String())
				}
			}
		})
	}
	var b bytes.Buffer
	_ = writeJSON(&b, listReport{Runs: []listedRun{{Run: "r", Mode: mode.WMRL}}})
	var lr struct {
		Runs []map[string]json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &lr); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run", "name", "mode", "state", "workflow", "step", "steps", "created_at"} {
		if _, ok := lr.Runs[0][k]; !ok {
			t.Errorf("list run lacks %q", k)
		}
	}
}

func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, 4, "steps", false, false)
	p.seen(0)
	p.step("step 0: x", 1)
	p.draw(1)
	if got := b.String(); !strings.HasPrefix(got, "step 0: x  [1/4, ETA ") || strings.Contains(got, "\r") {
		t.Errorf("progress on a non-terminal wrote %q", got)
	}
	// A bench's notes and statuses: a line each, a status once per key.
	b.Reset()
	p = newProgress(&b, 2, "runs", false, false)
	p.count(0)
	p.note("started r1")
	p.status("r1/0", "r1: step 0/3 (0s)")
	p.status("r1/0", "r1: step 0/3 (1s)")
	p.status("r1/1", "r1: step 1/3 (2s)")
	p.count(1)
	p.note("r1 completed")
	want := []string{"[0/2 runs, 0s] started r1", "[0/2 runs, 0s] r1: step 0/3 (0s)", "[0/2 runs, 0s] r1: step 1/3 (2s)", "[1/2 runs, 0s] r1 completed", ""}
	if got := strings.Split(b.String(), "\n"); !slices.Equal(got, want) {
		t.Errorf("bench progress wrote %q, want %q", got, want)
	}
	// --json: nothing.
	b.Reset()
	p = newProgress(&b, 2, "steps", true, true)
	p.step("step 0", 1)
	p.draw(1)
	p.note("x")
	p.status("k", "x")
	if b.Len() > 0 {
		t.Errorf("quiet progress wrote %q", b.String())
	}
}

// TestProgressBar draws the bar as on a terminal: in place, erased before
// a line, gone at the end.
func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, 4, "steps", true, false)
	p.seen(0)
	p.draw(0)
	p.step("step 0: x", 1)
	p.draw(1)
	got := b.String()
	if !strings.Contains(got, "\r") || !strings.Contains(got, "1/4") || !strings.Contains(got, "step 0: x\n") ||
		strings.Contains(got, "step 0: x  [") {
		t.Errorf("bar wrote %q", got)
	}
	if i := strings.Index(got, "step 0: x"); !strings.HasSuffix(strings.TrimRight(got[:i], " "), "\r") {
		t.Errorf("the bar is not erased before the line: %q", got)
	}
	p.draw(4)
	p.clear()
	if last := b.String()[strings.LastIndex(b.String(), "\r"):]; strings.TrimSpace(last) != "" {
		t.Errorf("the bar stays after the end: %q", last)
	}
}

// TestSeedFlag: --seed takes decimal digits up to 2^64-1 and overrides the
// configuration's seed; other forms are refused.
func TestSeedFlag(t *testing.T) {
	for _, tt := range []struct {
		give string
		want uint64
		err  bool
	}{
		{give: "42", want: 42},
		{give: "18446744073709551615", want: 18446744073709551615},
		{give: "0x10", err: true},
		{give: "1_000", err: true},
		{give: "18446744073709551616", err: true},
		{give: "", err: true},
	} {
		var seed uint64
		err := (decimalUint64{&seed}).Set(tt.give)
		if (err != nil) != tt.err || seed != tt.want {
			t.Errorf("--seed %q: %d, %v", tt.give, seed, err)
		}
		if err != nil {
			continue
		}
		cfg, err := loadRunConfig(runOptions{preset: "tiny", seed: seed}, false, true)
		if err != nil || cfg.Seed != tt.want {
			t.Errorf("--seed %q: config seed %d, %v", tt.give, cfg.Seed, err)
		}
	}
}
