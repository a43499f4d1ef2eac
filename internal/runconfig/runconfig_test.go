package runconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/denoise"
	"github.com/wmrl/wmrl/internal/mode"
	"github.com/wmrl/wmrl/internal/turns"
)

func TestPresetsValid(t *testing.T) {
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatalf("Preset(%q): %v", name, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("preset %s invalid: %v", name, err)
		}
		if c.Name != name {
			t.Errorf("preset %s has name %q", name, c.Name)
		}
		for _, m := range mode.All() {
			c.Mode = m
			if err := c.Validate(); err != nil {
				t.Errorf("preset %s in mode %s invalid: %v", name, m, err)
			}
		}
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default invalid: %v", err)
	}
}

func TestPresetUnknownListsNames(t *testing.T) {
	_, err := Preset("huge")
	if err == nil {
		t.Fatal("Preset(huge) succeeded")
	}
	for _, name := range PresetNames() {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not list %q", err, name)
		}
	}
}

func TestParseOverlay(t *testing.T) {
	base, _ := Preset("tiny")
	c, err := Parse(base, []byte("name: exp-1\nmode: grpo\nanchors:\n  fraction: 0.5\nsandbox:\n  kind: process\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "exp-1" || c.Mode != mode.GRPO || c.Anchors.Fraction != 0.5 || c.Sandbox.Kind != SandboxProcess {
		t.Fatalf("fields not read: %+v", c)
	}
	// Omitted fields keep the base's values, including siblings in a section.
	if c.Anchors.Min != base.Anchors.Min || c.Steps != base.Steps || c.Sandbox.MemoryMB != base.Sandbox.MemoryMB {
		t.Fatalf("omitted fields changed: %+v", c)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		give string
		want string // substring of the error
	}{
		{give: "", want: "empty document"},
		{give: "nmae: x\n", want: "field nmae not found"},
		{give: "anchors:\n  fractoin: 0.1\n", want: "field fractoin not found"},
		{give: "steps: ten\n", want: "steps: line 1: ten is not an integer"},
		{give: "mode: fast\n", want: "mode: line 1: unknown mode \"fast\""},
		{give: "name: a\n---\nname: b\n", want: "more than one YAML document"},
		{give: "anchors:\n  fraction: 1.5\n", want: "anchors.fraction: line 2: must be in [0,1], got 1.5"},
		{give: "steps: 0\n", want: "steps: line 1: must be in [1,1000000], got 0"},
		{give: "name: 'a/b'\n", want: "name: line 1: letters"},
		{give: "steps: [1]\n", want: "steps: line 1: cannot unmarshal !!seq into int"},
		{give: "anchors: 5\n", want: "anchors: line 1: cannot unmarshal !!int `5` into runconfig.Anchors"},
		{give: "steps: 1\nsteps: 2\n", want: `line 2: mapping key "steps" already defined at line 1`},
		{give: "- 1\n", want: "config: line 1: cannot unmarshal !!seq into runconfig.Config"},
		{give: "steps: &a 1\ngroups: *b\n", want: "config: yaml: unknown anchor 'b' referenced"},
		{give: strings.Repeat("#", MaxBytes+1), want: "config: larger than 1048576 bytes"},
		{give: "debias: &d {method: pava}\nanchors: *d\n", want: "anchors.method: line 1: field method not found"},
	}
	for _, tt := range tests {
		_, err := Parse(Default(), []byte(tt.give))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", tt.give, err, tt.want)
		}
	}
}

func TestValidateNamesField(t *testing.T) {
	tests := []struct {
		give func(*Config)
		want string // the error's prefix: the field path
	}{
		{func(c *Config) { c.Name = "" }, "name:"},
		{func(c *Config) { c.Name = strings.Repeat("x", 65) }, "name:"},
		{func(c *Config) { c.Mode = "fast" }, "mode:"},
		{func(c *Config) { c.Steps = -1 }, "steps:"},
		{func(c *Config) { c.Groups = 0 }, "groups:"},
		{func(c *Config) { c.Samples = 1 }, "samples:"},
		{func(c *Config) { c.Anchors.Fraction = -0.1 }, "anchors.fraction:"},
		{func(c *Config) { c.Anchors.Min = c.Groups + 1 }, "anchors.min:"},
		{func(c *Config) { c.Anchors.Capacity = -1 }, "anchors.capacity:"},
		{func(c *Config) { c.Anchors.Active.Mix = 0.5 }, "anchors.active.enabled:"},
		{func(c *Config) { c.Anchors.Active = ActiveAnchors{Enabled: true, Mix: 0.5}; c.Mode = mode.GRPO }, "anchors.active.enabled:"},
		{func(c *Config) { c.Anchors.Active = ActiveAnchors{Enabled: true, Mix: 0.5}; c.Mode = mode.Anchor }, "anchors.active.enabled:"},
		{func(c *Config) { c.Anchors.Active = ActiveAnchors{Enabled: true} }, "anchors.active.mix:"},
		{func(c *Config) { c.Anchors.Active = ActiveAnchors{Enabled: true, Mix: 1.5} }, "anchors.active.mix:"},
		{func(c *Config) { c.Anchors.Active = ActiveAnchors{Enabled: true, Mix: 0.5, Floor: 2} }, "anchors.active.floor:"},
		{func(c *Config) { c.Anchors.Active = ActiveAnchors{Enabled: true, Mix: 1} }, "anchors.active.floor:"},
		{func(c *Config) { c.Anchors.Selective.Ratio = 2 }, "anchors.selective.enabled:"},
		{func(c *Config) { c.Denoise.Estimator = "ppi" }, "denoise.estimator:"},
		{func(c *Config) { c.Anchors.Selective = SelectiveScoring{Enabled: true, Ratio: 2}; c.Mode = mode.GRPO }, "anchors.selective.enabled:"},
		{func(c *Config) { c.Anchors.Selective = SelectiveScoring{Enabled: true, Ratio: 2}; c.Mode = mode.Anchor }, "anchors.selective.enabled:"},
		{func(c *Config) { c.Anchors.Selective = SelectiveScoring{Enabled: true, Ratio: 2}; c.Mode = mode.WM }, "anchors.selective.enabled:"},
		{func(c *Config) { c.Anchors.Selective = SelectiveScoring{Enabled: true} }, "anchors.selective.ratio:"},
		{func(c *Config) { c.Anchors.Selective = SelectiveScoring{Enabled: true, Ratio: 0.5} }, "anchors.selective.ratio:"},
		{func(c *Config) { c.Anchors.Selective = SelectiveScoring{Enabled: true, Ratio: math.Inf(1)} }, "anchors.selective.ratio:"},
		{func(c *Config) { c.Anchors.Adaptive.Gain = 0.1 }, "anchors.adaptive.target_rho:"},
		{func(c *Config) { c.Anchors.Adaptive = adaptive(); c.Mode = mode.Debias }, "anchors.adaptive.target_rho:"},
		{func(c *Config) { c.Anchors.Adaptive = adaptive(); c.Anchors.Adaptive.TargetRho = 0.5 }, "anchors.adaptive.target_rho:"},
		{func(c *Config) { c.Anchors.Adaptive = adaptive(); c.Anchors.Adaptive.Floor = -0.1 }, "anchors.adaptive.floor:"},
		{func(c *Config) { c.Anchors.Adaptive = adaptive(); c.Anchors.Adaptive.Ceiling = 0.01 }, "anchors.adaptive.ceiling:"},
		{func(c *Config) {
			c.Anchors.Adaptive = adaptive()
			c.Anchors.Adaptive.Floor, c.Anchors.Adaptive.Ceiling = 0, 0
		}, "anchors.adaptive.ceiling:"},
		{func(c *Config) { c.Anchors.Adaptive = adaptive(); c.Anchors.Adaptive.Gain = -1 }, "anchors.adaptive.gain:"},
		{func(c *Config) { c.Debias.Method = "spline" }, "debias.method:"},
		{func(c *Config) { c.Debias.Bins = 0 }, "debias.bins:"},
		{func(c *Config) { c.Debias.MinPairs = -1 }, "debias.min_pairs:"},
		{func(c *Config) { c.Debias.Window = -5 }, "debias.window:"},
		{func(c *Config) { c.Denoise.HalfLife = 0 }, "denoise.half_life:"},
		{func(c *Config) { c.Denoise.Warmup = 0 }, "denoise.warmup:"},
		{func(c *Config) { c.Denoise.RhoMax = 0.5 }, "denoise.rho_max:"},
		{func(c *Config) { c.Denoise.Eta2Floor = -0.01 }, "denoise.eta2_floor:"},
		{func(c *Config) { c.Mode, c.Anchors.Min = mode.Anchor, 0 }, "anchors.min:"},
		{func(c *Config) { c.Advantage.Eps = 0 }, "advantage.eps:"},
		{func(c *Config) { c.Policy.LearningRate = 0 }, "policy.learning_rate:"},
		{func(c *Config) { c.Policy.KLCoef = -1 }, "policy.kl_coef:"},
		{func(c *Config) { c.Policy.Hidden = 0 }, "policy.hidden:"},
		{func(c *Config) { c.Policy.Backend = "vLLM" }, "policy.backend:"},
		{func(c *Config) { c.WorldModel.Backend = "tinker:8000" }, "world_model.backend:"},
		{func(c *Config) { c.WorldModel.Refresh.Every = -1 }, "world_model.refresh.every:"},
		{func(c *Config) { c.WorldModel.Refresh = Refresh{Every: 5, MinPairs: -1} }, "world_model.refresh.min_pairs:"},
		{func(c *Config) { c.WorldModel.Refresh.MinPairs = 8 }, "world_model.refresh.min_pairs: is set"},
		{func(c *Config) { c.Mode, c.WorldModel.Refresh.Every = mode.GRPO, 5 }, "world_model.refresh.every: mode grpo"},
		{func(c *Config) { c.Mode, c.WorldModel.Refresh.Every = mode.WM, 5 }, "world_model.refresh.every: mode wm"},
		{func(c *Config) { c.Mode, c.WorldModel.Refresh.Every = mode.Anchor, 5 }, "world_model.refresh.every: mode anchor"},
		{func(c *Config) { c.WorldModel.Backend, c.WorldModel.Refresh.Every = "openai", 5 }, "world_model.refresh.every: world_model.backend \"openai\""},
		{func(c *Config) { c.Tasks = "/disk" }, "tasks:"},
		{func(c *Config) { c.Tasks = "store" }, "tasks:"}, // with sandbox.kind auto
		{func(c *Config) { c.Trajectory.Turns = -1 }, "trajectory.turns:"},
		{func(c *Config) { c.Trajectory.Turns = 65 }, "trajectory.turns:"},
		{func(c *Config) { c.Trajectory.Turns, c.Policy.Backend = 3, "vllm" }, "trajectory.turns: 3 turns with policy.backend \"vllm\""},
		{func(c *Config) { c.Trajectory.Reward = "mean" }, "trajectory.reward:"},
		{func(c *Config) { c.Trajectory.ObservationTokens = -1 }, "trajectory.observation_tokens:"},
		{func(c *Config) { c.Pipeline.MaxOffPolicy = -1 }, "pipeline.max_off_policy: must be in [0,4]"},
		{func(c *Config) { c.Pipeline.MaxOffPolicy = 5 }, "pipeline.max_off_policy: must be in [0,4]"},
		// A pipelined multi-turn run is valid; its turns are refused where
		// a single-step one's are (a policy without multi-turn sampling).
		{func(c *Config) { c.Pipeline.MaxOffPolicy, c.Trajectory.Turns, c.Policy.Backend = 1, 3, "vllm" }, "trajectory.turns: 3 turns with policy.backend \"vllm\""},
		{func(c *Config) { c.Pipeline.MaxOffPolicy, c.Anchors.Active = 2, ActiveAnchors{Enabled: true} }, "anchors.active.mix:"},
		{func(c *Config) {
			c.Pipeline.MaxOffPolicy, c.Anchors.Selective = 1, SelectiveScoring{Enabled: true, Ratio: 2}
		}, "pipeline.max_off_policy: 1 with anchors.selective"},
		{func(c *Config) { c.Pipeline.Clip = -0.1 }, "pipeline.clip:"},
		{func(c *Config) { c.Pipeline.Clip = 1 }, "pipeline.clip:"},
		{func(c *Config) { c.Pipeline.Clip = math.NaN() }, "pipeline.clip:"},
		{func(c *Config) { c.Eval.Every = -1 }, "eval.every:"},
		{func(c *Config) { c.Eval.Samples = 0 }, "eval.samples:"},
		{func(c *Config) { c.Eval.Tasks = -1 }, "eval.tasks:"},
		{func(c *Config) { c.Eval.BestOf = -1 }, "eval.best_of: must be in [0,64]"},
		{func(c *Config) { c.Eval.BestOf = 65 }, "eval.best_of: must be in [0,64]"},
		{func(c *Config) { c.Eval.BestOf, c.Trajectory.Turns = 3, 3 }, "eval.best_of: 3 with trajectory.turns 3"},
		{func(c *Config) { c.ContinueAsNewEvery = 0 }, "continue_as_new_every:"},
		{func(c *Config) { c.Sandbox.Kind = "v m" }, "sandbox.kind:"},
		{func(c *Config) { c.Sandbox.MemoryMB = 8 }, "sandbox.memory_mb:"},
		{func(c *Config) { c.Sandbox.DeadlineSeconds = 0 }, "sandbox.deadline_seconds:"},
		{func(c *Config) { c.Sandbox.CPUs = 0 }, "sandbox.cpus:"},
		{func(c *Config) { c.Sandbox.Budget = -1 }, "sandbox.budget:"},
		{func(c *Config) { c.Parallelism = 0 }, "parallelism:"},
	}
	for _, tt := range tests {
		c := Default()
		tt.give(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Validate() = %v, want an error starting with %q", err, tt.want)
		}
	}
}

// TestTasksField: tasks: store with sandbox.kind python is valid, parses
// from YAML, and is left out of the JSON when empty.
func TestTasksField(t *testing.T) {
	c, err := Parse(Default(), []byte("tasks: store\nsandbox:\n  kind: python\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tasks != "store" || c.Validate() != nil {
		t.Fatalf("tasks %q, validate %v", c.Tasks, c.Validate())
	}
	b, _ := json.Marshal(Default())
	if strings.Contains(string(b), `"tasks":"`) {
		t.Errorf("empty tasks in the JSON: %s", b)
	}
	p, _ := Preset("python-demo")
	if p.Tasks != "store" || p.Sandbox.Kind != SandboxPython || p.Validate() != nil {
		t.Errorf("python-demo: tasks %q sandbox.kind %q: %v", p.Tasks, p.Sandbox.Kind, p.Validate())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	c, _ := Preset("demo")
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got Config
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v", got, c)
	}
	if !strings.Contains(string(b), `"continue_as_new_every":5`) {
		t.Fatalf("json names differ from yaml names: %s", b)
	}
}

func TestDerivedConfigsValid(t *testing.T) {
	c := Default()
	if err := c.DebiasConfig().Validate(); err != nil {
		t.Error(err)
	}
	if err := c.DenoiseConfig().Validate(); err != nil {
		t.Error(err)
	}
	if err := c.AdvantageConfig().Validate(); err != nil {
		t.Error(err)
	}
	if err := c.Sandbox.Limits().Check(); err != nil {
		t.Error(err)
	}
	if c.FreeCapacity() != -1 {
		t.Errorf("FreeCapacity with capacity 0 = %d, want -1", c.FreeCapacity())
	}
	c.Anchors.Capacity = 3
	if c.FreeCapacity() != 3 {
		t.Errorf("FreeCapacity = %d, want 3", c.FreeCapacity())
	}
}

func TestProblemsNamesEveryField(t *testing.T) {
	c, err := Decode(Default(), []byte("steps: 0\nanchors:\n  fraction: 1.5\nsandbox:\n  kind: v.m\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.Problems() {
		got = append(got, strings.SplitN(p.Error(), ":", 2)[0])
	}
	want := []string{"steps", "anchors.fraction", "sandbox.kind"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Problems() fields = %v, want %v", got, want)
	}
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "steps:") {
		t.Errorf("Validate() = %v, want the first problem", err)
	}
	if ps := Default().Problems(); ps != nil {
		t.Errorf("Default().Problems() = %v", ps)
	}
	if _, err := Decode(Default(), []byte("stepz: 3\n")); err == nil || !strings.Contains(err.Error(), "stepz") {
		t.Errorf("Decode of an unknown field = %v", err)
	}
}

func TestBenchPresets(t *testing.T) {
	for _, name := range BenchPresetNames() {
		c, err := BenchPreset(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if c.Name != "bench-"+name {
			t.Errorf("%s: name %q", name, c.Name)
		}
	}
	// The small preset's two anchor groups per step (docs/results/README.md).
	small, _ := BenchPreset("small")
	if k, err := anchors.Count(small.Groups, small.Anchors.Fraction, small.Anchors.Min, small.FreeCapacity()); err != nil || k != 2 {
		t.Errorf("small preset: %d anchor groups per step (%v), want 2", k, err)
	}
	if _, err := BenchPreset("huge"); err == nil || !strings.Contains(err.Error(), "tiny, small, full") {
		t.Errorf("unknown preset: %v", err)
	}
}

func TestParseReportsEveryField(t *testing.T) {
	give := "mode: fast\nsteps: 0\ngroups: ten\nanchors:\n  fractoin: 1\n  fraction: 2\nsandbox:\n  kind: VM\n"
	want := `mode: line 1: unknown mode "fast"`
	_, err := Parse(Default(), []byte(give))
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("Parse = %v, want an *Invalid", err)
	}
	wantEach := []string{
		"mode: line 1: ",
		"groups: line 3: ten is not an integer",
		"anchors.fractoin: line 5: field fractoin not found",
		"steps: line 2: must be in [1,1000000], got 0",
		"anchors.fraction: line 6: must be in [0,1], got 2",
		`sandbox.kind: line 8: must be a backend's name (a lower-case letter, then up to 31 lower-case letters, digits, '-' or '_'; empty means "builtin"), got "VM"`,
	}
	if len(inv.Problems) != len(wantEach) {
		t.Fatalf("%d problems, want %d: %v", len(inv.Problems), len(wantEach), err)
	}
	for i, w := range wantEach {
		if !strings.HasPrefix(inv.Problems[i].Error(), w) {
			t.Errorf("problem %d = %q, want a prefix %q", i, inv.Problems[i], w)
		}
	}
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q: want one line starting %q", err, want)
	}
}

func TestLoadOverrides(t *testing.T) {
	name, seed := "no spaces", uint64(7)
	cfg, err := Load(Default(), []byte("name: ok\nseed: 1\nsteps: 0\n"), Overrides{Name: &name, Seed: &seed})
	want := `name: letters, digits, '.', '_' and '-' only, starting with a letter or digit, got "no spaces"; steps: line 3: must be in [1,1000000], got 0`
	if err == nil || err.Error() != want {
		t.Fatalf("Load error %v, want %q", err, want)
	}
	if cfg.Seed != 7 || cfg.Name != name {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
	if _, err := Load(Default(), nil, Overrides{}); err != nil {
		t.Fatalf("Load of no document: %v", err)
	}
}

// FuzzParse checks that parsing and validating any document never panics,
// that every error is one line, and that a configuration that validates
// round-trips: marshalled to YAML and parsed again, it is the same.
// The seeds below also run in a plain `go test`.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"name: exp-1\nmode: grpo\nanchors:\n  fraction: 0.5\nsandbox:\n  kind: process\n",
		"mode: fast\nsteps: 0\ngroups: ten\n",
		"anchors: 5\n",
		"- 1\n",
		"steps: 1\nsteps: 2\n",
		"a: &x [*x]\n",
		"<<: {steps: 3}\n",
		"denoise:\n  rho_max: .inf\n",
		"seed: 18446744073709551615\npolicy: {learning_rate: 1e-3}\n",
		"",
		"---\n---\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		base, _ := Preset("tiny")
		cfg, err := Parse(base, []byte(in))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", cfg, err)
		}
		again, err := Parse(Default(), out)
		if err != nil {
			t.Fatalf("re-parse of\n%s: %v", out, err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", cfg, again)
		}
	})
}

// The debias, denoise and advantage sections are validated by their domain
// packages, field by field: every invalid field is reported under its YAML
// path and line, once.
func TestParseReportsEveryDomainField(t *testing.T) {
	give := "debias:\n  method: spline\n  bins: 0\n  min_pairs: -1\n  window: 5\n" +
		"denoise:\n  half_life: -1\n  warmup: 0\n  rho_max: .inf\nadvantage:\n  eps: 2\n"
	_, err := Parse(Default(), []byte(give))
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("Parse = %v, want an *Invalid", err)
	}
	want := []string{
		// The document's own problems first: a number it cannot be.
		"denoise.rho_max: line 9: .inf is not a finite number",
		`debias.method: line 2: "spline" is not "pava" or "binned"`,
		"debias.bins: line 3: 0, want 1 to 1000000",
		"debias.min_pairs: line 4: -1, want 0 to 2147483647",
		"denoise.half_life: line 7: -1, want a positive number of groups",
		"denoise.warmup: line 8: 0, want at least 1 group",
		"advantage.eps: line 11: 2, want a small positive number, at most 1",
	}
	if len(inv.Problems) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(inv.Problems), len(want), err)
	}
	for i, w := range want {
		if got := inv.Problems[i].Error(); got != w {
			t.Errorf("problem %d = %q, want %q", i, got, w)
		}
	}
	c := Default()
	c.Denoise.RhoMax = math.NaN()
	if ps := c.Problems(); len(ps) != 1 || ps[0].Error() != "denoise.rho_max: must be a finite number, got NaN" {
		t.Errorf("Problems() of a NaN rho_max = %v", ps)
	}
}

// TestSectionsListEveryField: the validated sections name every field of
// their types, so a new field cannot go unvalidated.
func TestSectionsListEveryField(t *testing.T) {
	c := Default()
	for _, tt := range []struct {
		prefix string
		typ    reflect.Type
	}{
		{"debias.", reflect.TypeOf(c.Debias)},
		{"denoise.", reflect.TypeOf(c.Denoise)},
		{"advantage.", reflect.TypeOf(c.Advantage)},
	} {
		for i := range tt.typ.NumField() {
			name, _, _ := strings.Cut(tt.typ.Field(i).Tag.Get("yaml"), ",")
			bad := c
			// A value each field's owner refuses: set through YAML.
			doc := fmt.Sprintf("%s:\n  %s: %s\n", strings.TrimSuffix(tt.prefix, "."), name, map[reflect.Kind]string{
				reflect.Float64: "-1", reflect.Int: "-1", reflect.String: "nope", reflect.Bool: "true"}[tt.typ.Field(i).Type.Kind()])
			_, err := Parse(bad, []byte(doc))
			if tt.typ.Field(i).Type.Kind() == reflect.Bool {
				continue // every bool is valid
			}
			if err == nil || !strings.Contains(err.Error(), tt.prefix+name) {
				t.Errorf("%s%s: invalid value accepted or not named: %v", tt.prefix, name, err)
			}
		}
	}
}

// TestEta2FloorOldConfigs: the configuration of a run made before
// denoise.eta2_floor existed (every recorded workflow input) has no such
// field; it decodes to 0, the old behaviour (no floor but the 1e-12 guard),
// and encodes again to the same bytes. New presets carry the default floor.
func TestEta2FloorOldConfigs(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "preset-demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.Replace(golden, []byte(",\n    \"eta2_floor\": 0.01"), nil, 1)
	if bytes.Equal(old, golden) || bytes.Contains(old, []byte("eta2_floor")) {
		t.Fatalf("golden demo preset without its floor line:\n%s", old)
	}
	var c Config
	if err := json.Unmarshal(old, &c); err != nil {
		t.Fatal(err)
	}
	if c.Denoise.Eta2Floor != 0 || c.DenoiseConfig().Eta2Floor != 0 {
		t.Errorf("old config decodes to floor %v", c.Denoise.Eta2Floor)
	}
	again, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(again, '\n'), old) {
		t.Errorf("old config encodes to\n%s\nwant\n%s", again, old)
	}
	demo, _ := Preset("demo")
	if demo.DenoiseConfig().Eta2Floor != denoise.DefaultEta2Floor {
		t.Errorf("demo preset floor %v, want the default %v", demo.DenoiseConfig().Eta2Floor, denoise.DefaultEta2Floor)
	}
}

func adaptive() AdaptiveAnchors {
	return AdaptiveAnchors{TargetRho: 1.5, Floor: 0.05, Ceiling: 0.3, Gain: 0.05}
}

// TestAnchorsActiveAndAdaptive: the sections parse from YAML, validate, and
// are left out of the JSON when off.
func TestAnchorsActiveAndAdaptive(t *testing.T) {
	c, err := Parse(Default(), []byte("anchors:\n  active:\n    enabled: true\n    mix: 0.5\n    floor: 0.25\n"+
		"  adaptive:\n    target_rho: 1.5\n    floor: 0.05\n    ceiling: 0.3\n    gain: 0.05\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Anchors.Active != (ActiveAnchors{Enabled: true, Mix: 0.5, Floor: 0.25}) || c.Anchors.Adaptive != adaptive() {
		t.Errorf("parsed %+v", c.Anchors)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"active":{"enabled":true,"mix":0.5,"floor":0.25}`) ||
		!strings.Contains(string(raw), `"adaptive":{"target_rho":1.5,"floor":0.05,"ceiling":0.3,"gain":0.05}`) {
		t.Errorf("JSON %s", raw)
	}
	raw, err = json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "active") || strings.Contains(string(raw), "adaptive") {
		t.Errorf("off sections in the JSON: %s", raw)
	}
	_, err = Parse(Default(), []byte("anchors:\n  active:\n    enabled: true\n    mix: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "anchors.active.mix: line 4:") {
		t.Errorf("bad mix: %v", err)
	}
}

// TestAnchorsSelective: the section parses from YAML and validates in the
// modes with world-model groups next to anchor pairs, names its field and
// line when wrong, and is left out of the JSON when off.
func TestAnchorsSelective(t *testing.T) {
	for _, m := range []mode.Mode{mode.WMRL, mode.Mix, mode.Debias, mode.Denoise} {
		c, err := Parse(Default(), []byte("mode: "+string(m)+"\nanchors:\n  selective:\n    enabled: true\n    ratio: 2\n"))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if c.Anchors.Selective != (SelectiveScoring{Enabled: true, Ratio: 2}) {
			t.Errorf("%s: parsed %+v", m, c.Anchors.Selective)
		}
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), `"selective":{"enabled":true,"ratio":2}`) {
			t.Errorf("JSON %s", raw)
		}
	}
	raw, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "selective") {
		t.Errorf("off section in the JSON: %s", raw)
	}
	_, err = Parse(Default(), []byte("anchors:\n  selective:\n    enabled: true\n    ratio: 0.5\n"))
	if err == nil || !strings.Contains(err.Error(), "anchors.selective.ratio: line 4:") {
		t.Errorf("bad ratio: %v", err)
	}
}

// TestNumbersAsWritten: a number field takes a number only as a
// configuration writes it; the YAML decoder's own readings (2.9 as 2, 0x10
// as 16, 2^64 wrapped) are refused, naming the field's path and line.
func TestNumbersAsWritten(t *testing.T) {
	tests := []struct {
		give string
		want string // the whole error; "" for none
	}{
		{give: "steps: 2.9\n", want: "steps: line 1: 2.9 is not an integer"},
		{give: "sandbox:\n  memory_mb: 600.7\n", want: "sandbox.memory_mb: line 2: 600.7 is not an integer"},
		{give: "sandbox:\n  memory_mb: 1e30\n", want: "sandbox.memory_mb: line 2: 1e30 is not an integer"},
		{give: "sandbox: {kind: process, memory_mb: 1e3}\n", want: "sandbox.memory_mb: line 1: 1e3 is not an integer"},
		{give: "seed: 18446744073709551616\n", want: "seed: line 1: 18446744073709551616 is out of range [0,18446744073709551615]"},
		{give: "seed: 18446744073709551615\n"},
		{give: "seed: -1\n", want: "seed: line 1: -1 is out of range [0,18446744073709551615]"},
		{give: "suite_seed: 0x10\n", want: "suite_seed: line 1: 0x10 is not a decimal integer"},
		{give: "steps: 0x10\n", want: "steps: line 1: 0x10 is not a decimal integer"},
		{give: "steps: 0b11\n", want: "steps: line 1: 0b11 is not a decimal integer"},
		{give: "steps: 0o17\n", want: "steps: line 1: 0o17 is not a decimal integer"},
		{give: "steps: 010\n", want: "steps: line 1: 010 is not a decimal integer (a leading 0 reads as octal)"},
		{give: "steps: 1_000\n", want: "steps: line 1: 1_000 is not a decimal integer"},
		{give: "steps: 9223372036854775808\n", want: "steps: line 1: 9223372036854775808 is out of range [-9223372036854775808,9223372036854775807]"},
		{give: "steps: \"3\"\n", want: `steps: line 1: "3" is a string, not an integer`},
		{give: "steps: |\n  3\n", want: `steps: line 1: "3\n" is a string, not an integer`},
		{give: "steps: 2001-12-14\n", want: "steps: line 1: 2001-12-14 is not an integer"},
		{give: "steps: +3\n"},
		{give: "debias:\n  bins: 2.5\n", want: "debias.bins: line 2: 2.5 is not an integer"},
		{give: "world_model:\n  refresh:\n    every: 0x2\n", want: "world_model.refresh.every: line 3: 0x2 is not a decimal integer"},
		{give: "anchors:\n  fraction: abc\n", want: "anchors.fraction: line 2: abc is not a number"},
		{give: "anchors:\n  fraction: true\n", want: "anchors.fraction: line 2: true is not a number"},
		{give: "anchors:\n  fraction: 0x1p-2\n", want: "anchors.fraction: line 2: 0x1p-2 is not a decimal number"},
		{give: "anchors:\n  fraction: 010\n", want: "anchors.fraction: line 2: 010 is not a decimal number (a leading 0 reads as octal)"},
		{give: "anchors:\n  fraction: '0.5'\n", want: `anchors.fraction: line 2: "0.5" is a string, not a number`},
		{give: "anchors:\n  fraction: .NaN\n", want: "anchors.fraction: line 2: .NaN is not a finite number"},
		{give: "sandbox:\n  cpus: -.inf\n", want: "sandbox.cpus: line 2: -.inf is not a finite number"},
		{give: "sandbox:\n  cpus: 1e400\n", want: "sandbox.cpus: line 2: 1e400 is out of range for a 64-bit float"},
		{give: "max_ungraded: x\n", want: "max_ungraded: line 1: x is not a number"},
		{give: "max_ungraded: 0.5\n"},
		{give: "anchors:\n  fraction: .5\n"},
		{give: "anchors:\n  fraction: 5e-1\n"},
		// Every refusal at once, in the document's order, the other
		// fields read.
		{give: "steps: 2.9\nname: ok\ngroups: 0x4\n", want: "steps: line 1: 2.9 is not an integer; groups: line 3: 0x4 is not a decimal integer"},
	}
	for _, tt := range tests {
		_, err := Parse(Default(), []byte(tt.give))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Parse(%q): %v", tt.give, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("Parse(%q) = %v, want %q", tt.give, err, tt.want)
		}
	}
	if cfg, err := Parse(Default(), []byte("steps: +3\nseed: 18446744073709551615\n")); err != nil || cfg.Steps != 3 || cfg.Seed != math.MaxUint64 {
		t.Errorf("Parse: steps %d, seed %d, err %v", cfg.Steps, cfg.Seed, err)
	}
	// A refused field keeps the base's value; the others are read.
	cfg, err := Decode(Default(), []byte("steps: 2.9\nname: ok\n"))
	if err == nil || cfg.Steps != Default().Steps || cfg.Name != "ok" {
		t.Errorf("Decode: steps %d, name %q, err %v", cfg.Steps, cfg.Name, err)
	}
}

// TestEveryNumberFieldChecked: every number field of Config, at any depth,
// goes through the same check, so a field added later cannot take 2.9 as 2.
func TestEveryNumberFieldChecked(t *testing.T) {
	var paths []string
	var kinds []reflect.Kind
	var collect func(reflect.Type, string)
	collect = func(rt reflect.Type, prefix string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				collect(ft, prefix+name+".")
			case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
				paths, kinds = append(paths, prefix+name), append(kinds, ft.Kind())
			}
		}
	}
	collect(reflect.TypeFor[Config](), "")
	if len(paths) < 30 {
		t.Fatalf("found %d number fields: %v", len(paths), paths)
	}
	for i, path := range paths {
		parts := strings.Split(path, ".")
		var doc strings.Builder
		for d, p := range parts[:len(parts)-1] {
			fmt.Fprintf(&doc, "%s%s:\n", strings.Repeat("  ", d), p)
		}
		leaf := strings.Repeat("  ", len(parts)-1) + parts[len(parts)-1]
		line := len(parts)
		bads := []string{"0x10", "abc"}
		good := "7"
		if kinds[i] != reflect.Float64 {
			bads = append(bads, "2.9")
		}
		for _, b := range bads {
			_, err := Decode(Default(), []byte(doc.String()+leaf+": "+b+"\n"))
			want := fmt.Sprintf("%s: line %d: %s is not", path, line, b)
			if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), ";") {
				t.Errorf("%s: %s: %v, want one problem starting %q", path, b, err, want)
			}
		}
		if _, err := Decode(Default(), []byte(doc.String()+leaf+": "+good+"\n")); err != nil {
			t.Errorf("%s: %s: %v", path, good, err)
		}
	}
}

// TestTrajectory: the trajectory section's defaults (one turn, max, 1200
// tokens) when it is left out, its fields from YAML, its JSON left out
// when zero (so recorded configurations keep their form), three turns
// valid, and more than one turn refused, at its line, for a policy other
// than the built-in one.
func TestTrajectory(t *testing.T) {
	if RewardMax != turns.Max || RewardLast != turns.Last {
		t.Errorf("reductions %q, %q; turns.Reduce's are %q, %q", RewardMax, RewardLast, turns.Max, turns.Last)
	}
	c := Default()
	if got := c.Trajectory; got.TurnCount() != 1 || got.Reduction() != RewardMax || got.ObservationCap() != 1200 || got.MultiTurn() {
		t.Errorf("defaults: %d turns, %q, %d tokens, multi-turn %v; want 1, max, 1200, false",
			got.TurnCount(), got.Reduction(), got.ObservationCap(), got.MultiTurn())
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "trajectory") {
		t.Errorf("default config's JSON has a trajectory section: %s", b)
	}
	c, err = Parse(Default(), []byte("trajectory:\n  turns: 1\n  reward: last\n  observation_tokens: 600\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Trajectory; got.TurnCount() != 1 || got.Reduction() != RewardLast || got.ObservationCap() != 600 {
		t.Errorf("parsed: %+v", got)
	}
	b, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back.Trajectory != c.Trajectory {
		t.Errorf("JSON round trip: %+v, %v; want %+v", back.Trajectory, err, c.Trajectory)
	}
	c, err = Parse(Default(), []byte("steps: 2\ntrajectory:\n  turns: 3\n"))
	if err != nil || c.Trajectory.TurnCount() != 3 || !c.Trajectory.MultiTurn() {
		t.Errorf("turns 3: %+v, %v", c.Trajectory, err)
	}
	c, err = Parse(Default(), []byte("policy:\n  backend: tinker\ntrajectory:\n  turns: 3\n"))
	if err != nil || c.Trajectory.TurnCount() != 3 || c.Policy.Backend != "tinker" {
		t.Errorf("turns 3 with tinker: %+v %q, %v; want them taken", c.Trajectory, c.Policy.Backend, err)
	}
	_, err = Parse(Default(), []byte("policy:\n  backend: vllm\ntrajectory:\n  turns: 3\n"))
	want := "trajectory.turns: line 4: 3 turns with policy.backend \"vllm\": multi-turn sampling is built for the built-in policy and the Tinker policy only"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("turns 3 with vllm: %v, want an error starting %q", err, want)
	}
	if _, err = Parse(Default(), []byte("policy:\n  backend: vllm\n")); err != nil {
		t.Errorf("a single-shot run of another policy backend: %v", err)
	}
	_, err = Parse(Default(), []byte("trajectory:\n  reward: best\n"))
	if want := "trajectory.reward: line 2: must be \"max\" or \"last\""; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("reward best: %v, want an error starting %q", err, want)
	}
}

// TestPipeline: the pipeline section's defaults (d = 0, ε = 0.2) when it
// is left out, its JSON left out when zero (so recorded configurations and
// their hashes keep their form), its fields from YAML and back through
// JSON, the schedule max(0, t−d), d > 0 accepted with multi-turn
// trajectories and with active anchors, and a d out of range refused at
// its line.
func TestPipeline(t *testing.T) {
	c := Default()
	if p := c.Pipeline; p.OffPolicy() != 0 || p.ClipRange() != 0.2 || p.SamplingCheckpoint(7) != 7 {
		t.Errorf("defaults: d %d, clip %v, step 7 samples from %d; want 0, 0.2, 7", p.OffPolicy(), p.ClipRange(), p.SamplingCheckpoint(7))
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "pipeline") {
		t.Errorf("default config's JSON has a pipeline section: %s", b)
	}
	c, err = Parse(Default(), []byte("pipeline:\n  max_off_policy: 0\n  clip: 0.3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipeline.ClipRange() != 0.3 {
		t.Errorf("parsed clip %v, want 0.3", c.Pipeline.ClipRange())
	}
	b, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"pipeline":{"clip":0.3}`) {
		t.Errorf("JSON %s: want \"pipeline\":{\"clip\":0.3}", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back.Pipeline != c.Pipeline {
		t.Errorf("JSON round trip: %+v, %v; want %+v", back.Pipeline, err, c.Pipeline)
	}
	for _, tt := range []struct{ d, t, want int }{{1, 0, 0}, {1, 1, 0}, {1, 5, 4}, {2, 1, 0}, {2, 2, 0}, {2, 3, 1}, {4, 10, 6}} {
		if got := (Pipeline{MaxOffPolicy: tt.d}).SamplingCheckpoint(tt.t); got != tt.want {
			t.Errorf("d %d: step %d samples from %d, want %d", tt.d, tt.t, got, tt.want)
		}
	}
	c, err = Parse(Default(), []byte("steps: 3\npipeline:\n  max_off_policy: 2\n"))
	if err != nil || c.Pipeline.OffPolicy() != 2 {
		t.Errorf("max_off_policy 2: %+v, %v; want accepted", c.Pipeline, err)
	}
	// Multi-turn trajectories are pipelined: every turn of step t sampled
	// from checkpoint max(0, t−d).
	c, err = Parse(Default(), []byte("steps: 3\ntrajectory:\n  turns: 3\npipeline:\n  max_off_policy: 1\n"))
	if err != nil || c.Pipeline.OffPolicy() != 1 || c.Trajectory.TurnCount() != 3 {
		t.Errorf("max_off_policy 1 with 3 turns: %+v %+v, %v; want accepted", c.Pipeline, c.Trajectory, err)
	}
	// So is active anchor selection (its uncertainties read steps 0..t−d−1).
	c, err = Parse(Default(), []byte("steps: 3\nanchors:\n  active: {enabled: true, mix: 0.5, floor: 0.25}\npipeline:\n  max_off_policy: 2\n"))
	if err != nil || c.Pipeline.OffPolicy() != 2 || !c.Anchors.Active.Enabled {
		t.Errorf("max_off_policy 2 with anchors.active: %+v %+v, %v; want accepted", c.Pipeline, c.Anchors.Active, err)
	}
	_, err = Parse(Default(), []byte("steps: 3\npipeline:\n  max_off_policy: 5\n"))
	want := "pipeline.max_off_policy: line 3: must be in [0,4]"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("max_off_policy 5: %v, want an error starting %q", err, want)
	}
}

// TestEvalBestOf: eval.best_of is off by default and left out of the JSON
// (recorded configurations keep their form), parses from YAML, sets the
// executions of a held-out sample (EvalAttempts: best_of, or the turns of a
// multi-turn run), and is refused at its line with trajectory.turns > 1.
func TestEvalBestOf(t *testing.T) {
	c := Default()
	if c.Eval.BestOf != 0 || c.EvalAttempts() != 1 {
		t.Errorf("default best_of %d, attempts %d; want 0, 1", c.Eval.BestOf, c.EvalAttempts())
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "best_of") {
		t.Errorf("default config's JSON has best_of: %s", b)
	}
	c, err = Parse(Default(), []byte("eval:\n  best_of: 3\n"))
	if err != nil || c.Eval.BestOf != 3 || c.EvalAttempts() != 3 {
		t.Fatalf("best_of 3: %+v, attempts %d, %v", c.Eval, c.EvalAttempts(), err)
	}
	c, err = Parse(Default(), []byte("trajectory:\n  turns: 3\n"))
	if err != nil || c.EvalAttempts() != 3 {
		t.Fatalf("turns 3: attempts %d, %v; want 3", c.EvalAttempts(), err)
	}
	_, err = Parse(Default(), []byte("trajectory:\n  turns: 3\neval:\n  best_of: 3\n"))
	if want := "eval.best_of: line 4: 3 with trajectory.turns 3"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("best_of with turns: %v, want an error starting %q", err, want)
	}
}

// TestDenoiseEstimator: the difference estimator is the default where it
// applies; it parses from YAML in the modes that fuse the two streams, is
// in the JSON when set and left out when not (so earlier runs'
// configurations encode as they did).
func TestDenoiseEstimator(t *testing.T) {
	for _, m := range []mode.Mode{mode.WMRL, mode.Denoise} {
		c, err := Parse(Default(), []byte("mode: "+string(m)+"\ndenoise:\n  estimator: difference\n"))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if c.DenoiseConfig().Estimator != "difference" {
			t.Errorf("%s: parsed %+v", m, c.Denoise)
		}
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), `"estimator":"difference"`) {
			t.Errorf("JSON %s", raw)
		}
	}
	c, err := Parse(Default(), []byte("denoise:\n  estimator: fused\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DenoiseConfig().Estimator; got != "fused" {
		t.Errorf("estimator: fused read as %q", got)
	}
	if _, err := Parse(Default(), []byte("denoise:\n  estimator: ppi\n")); err == nil || !strings.Contains(err.Error(), "denoise.estimator") {
		t.Errorf("bad estimator: %v", err)
	}
}

// TestDenoiseDefaults: the difference estimator and execution memory are
// the defaults, read only where they apply (DenoiseConfig), cleared from a
// loaded configuration where they do not (FitDenoise, so that the JSON a
// run records says what it does, and grpo's and the control's say what
// they said before the defaults changed), and refused, naming the field and
// its line, where a document sets them and they would not apply.
func TestDenoiseDefaults(t *testing.T) {
	def := Default().DenoiseConfig()
	if def.Estimator != denoise.EstimatorDifference || !def.Memory {
		t.Fatalf("default denoiser %+v, want the difference estimator with memory", def)
	}
	for _, name := range PresetNames() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if d := p.DenoiseConfig(); d.Estimator != denoise.EstimatorDifference || d.Memory != (p.Trajectory.Turns <= 1) {
			t.Errorf("preset %s: denoiser %+v with %d turns", name, d, p.Trajectory.Turns)
		}
	}
	for _, tt := range []struct {
		give      string
		estimator string
		memory    bool
	}{
		{give: "mode: wmrl\n", estimator: "difference", memory: true},
		{give: "mode: denoise\n", estimator: "difference", memory: true},
		{give: "mode: grpo\n"},
		{give: "mode: anchor\n"},
		{give: "mode: debias\n"},
		{give: "mode: mix\n"},
		{give: "mode: wm\n"},
		{give: "trajectory:\n  turns: 3\n", estimator: "difference"},
		{give: "denoise:\n  signal_window: 0\n", memory: true},
		{give: "denoise:\n  wm_share_max: 0.5\n", memory: true},
		{give: "denoise:\n  memory: false\n", estimator: "difference"},
	} {
		c, err := Parse(Default(), []byte(tt.give))
		if err != nil {
			t.Errorf("%q: %v", tt.give, err)
			continue
		}
		if c.Denoise.Estimator != tt.estimator || c.Denoise.Memory != tt.memory {
			t.Errorf("%q: denoise %+v, want estimator %q memory %v", tt.give, c.Denoise, tt.estimator, tt.memory)
		}
		if d := c.DenoiseConfig(); d.Estimator != tt.estimator || d.Memory != tt.memory {
			t.Errorf("%q: read as %+v", tt.give, d)
		}
	}
	// Set in code where it does not apply: valid, and not read.
	c := Default()
	c.Mode, c.Trajectory.Turns = mode.GRPO, 2
	if err := c.Validate(); err != nil {
		t.Errorf("grpo with the defaults: %v", err)
	}
	if d := c.DenoiseConfig(); d.Estimator != "" || d.Memory {
		t.Errorf("grpo reads %+v", d)
	}
	c = Default()
	c.Trajectory.Turns = 3
	if d := c.DenoiseConfig(); d.Estimator != denoise.EstimatorDifference || d.Memory {
		t.Errorf("3 turns read as %+v", d)
	}
	for _, tt := range []struct{ give, want string }{
		{"mode: anchor\ndenoise:\n  estimator: difference\n", "denoise.estimator: line 3: \"difference\" combines"},
		{"mode: debias\ndenoise:\n  estimator: difference\n", "denoise.estimator: line 3:"},
		{"denoise:\n  estimator: difference\n  signal_window: 0\n", "denoise.estimator: line 2: \"difference\" reads λ from the signal gate"},
		{"denoise:\n  estimator: difference\n  wm_share_max: 0.5\n", "denoise.estimator: line 2: \"difference\" sets the world model's share"},
		{"mode: anchor\ndenoise:\n  memory: true\n", "denoise.memory: line 3: replaces world-model scores"},
		{"mode: grpo\ndenoise:\n  memory: true\n", "denoise.memory: line 3:"},
		{"trajectory:\n  turns: 3\ndenoise:\n  memory: true\n", "denoise.memory: line 4: keys an execution"},
	} {
		if _, err := Parse(Default(), []byte(tt.give)); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error starting %q", tt.give, err, tt.want)
		}
	}
	// Memory is carried to Fuse in the denoiser's JSON, and left out of it
	// when off.
	raw, err := json.Marshal(Default().DenoiseConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"memory":true`) {
		t.Errorf("denoiser JSON %s", raw)
	}
	g, err := Parse(Default(), []byte("mode: grpo\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{g, g.DenoiseConfig()} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "memory\"") || strings.Contains(string(raw), "estimator") {
			t.Errorf("grpo's JSON %s", raw)
		}
	}
}
