package runconfig

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/anchors"
	"github.com/wmrl/wmrl/internal/mode"
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
		{give: "steps: ten\n", want: "cannot unmarshal"},
		{give: "mode: fast\n", want: "mode: line 1: unknown mode \"fast\""},
		{give: "name: a\n---\nname: b\n", want: "more than one YAML document"},
		{give: "anchors:\n  fraction: 1.5\n", want: "anchors.fraction: must be in [0,1], got 1.5"},
		{give: "steps: 0\n", want: "steps: must be in [1,1000000], got 0"},
		{give: "name: 'a/b'\n", want: "name: letters"},
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
		{func(c *Config) { c.Debias.Method = "spline" }, "debias.method:"},
		{func(c *Config) { c.Debias.Bins = 0 }, "debias.bins:"},
		{func(c *Config) { c.Debias.MinPairs = -1 }, "debias.min_pairs:"},
		{func(c *Config) { c.Debias.Window = -5 }, "debias.window:"},
		{func(c *Config) { c.Denoise.HalfLife = 0 }, "denoise.half_life:"},
		{func(c *Config) { c.Denoise.Warmup = 0 }, "denoise.warmup:"},
		{func(c *Config) { c.Denoise.RhoMax = 0.5 }, "denoise.rho_max:"},
		{func(c *Config) { c.Advantage.Eps = 0 }, "advantage.eps:"},
		{func(c *Config) { c.Policy.LearningRate = 0 }, "policy.learning_rate:"},
		{func(c *Config) { c.Policy.KLCoef = -1 }, "policy.kl_coef:"},
		{func(c *Config) { c.Policy.Hidden = 0 }, "policy.hidden:"},
		{func(c *Config) { c.Eval.Every = -1 }, "eval.every:"},
		{func(c *Config) { c.Eval.Samples = 0 }, "eval.samples:"},
		{func(c *Config) { c.Eval.Tasks = -1 }, "eval.tasks:"},
		{func(c *Config) { c.ContinueAsNewEvery = 0 }, "continue_as_new_every:"},
		{func(c *Config) { c.Sandbox.Kind = "vm" }, "sandbox.kind:"},
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
	c, err := Decode(Default(), []byte("steps: 0\nanchors:\n  fraction: 1.5\nsandbox:\n  kind: vm\n"))
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
