package runconfig

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// world_model.features and world_model.refresh.half_life are parsed
// strictly, validated naming their fields, and left out of the JSON when
// unset, so that every default configuration keeps its recorded bytes.
func TestFeaturesAndHalfLife(t *testing.T) {
	for _, tt := range []struct {
		give  string
		field string // "" when valid
		want  string
	}{
		{"world_model:\n  features: v2\n", "", ""},
		{"world_model:\n  features: v1\n", "", ""},
		{"mode: mix\nworld_model:\n  features: v2\n  refresh:\n    every: 5\n    half_life: 4\n", "", ""},
		{"world_model:\n  refresh:\n    every: 5\n    half_life: 0.5\n", "", ""},
		{"world_model:\n  features: v3\n", "world_model.features", `got "v3"`},
		{"world_model:\n  features: V2\n", "world_model.features", `got "V2"`},
		{"mode: grpo\nworld_model:\n  features: v2\n", "world_model.features", "mode grpo uses no world model"},
		{"mode: anchor\nworld_model:\n  features: v2\n", "world_model.features", "mode anchor uses no world model"},
		{"world_model:\n  backend: openai\n  features: v2\n", "world_model.features", `world_model.backend is "openai"`},
		{"world_model:\n  refresh:\n    half_life: 4\n", "world_model.refresh.half_life", "every is 0 (off)"},
		{"world_model:\n  refresh:\n    every: 5\n    half_life: -1\n", "world_model.refresh.half_life", "got -1"},
		{"world_model:\n  refresh:\n    every: 5\n    half_life: .nan\n", "world_model.refresh.half_life", "not a finite number"},
		{"world_model:\n  refresh:\n    every: 5\n    half_life: .inf\n", "world_model.refresh.half_life", "not a finite number"},
	} {
		c, err := Parse(Default(), []byte(tt.give))
		if tt.field == "" {
			if err != nil {
				t.Errorf("Parse(%q) = %v", tt.give, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.field+":") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %+v, %v; want an error naming %s with %q", tt.give, c.WorldModel, err, tt.field, tt.want)
		}
	}

	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(`"features"`)) || bytes.Contains(b, []byte(`"world_model"`)) {
			t.Errorf("preset %s JSON names the new fields: %s", name, b)
		}
	}
	c := Default()
	c.WorldModel.Features = FeaturesV2
	c.WorldModel.Refresh = Refresh{Every: 5, HalfLife: 3}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"world_model":{"features":"v2","refresh":{"every":5,"half_life":3}}`)) {
		t.Errorf("world_model JSON: %s", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("round trip of %s = %+v, %v", b, back.WorldModel, err)
	}
	if !back.WorldModel.FeaturesV2On() || Default().WorldModel.FeaturesV2On() {
		t.Error("FeaturesV2On")
	}
}

func TestRefreshWeight(t *testing.T) {
	tests := []struct {
		give        Refresh
		step, after int
		want        float64
	}{
		{Refresh{Every: 5}, 0, 29, 1},
		{Refresh{Every: 5, HalfLife: 5}, 29, 29, 1},
		{Refresh{Every: 5, HalfLife: 5}, 24, 29, 0.5},
		{Refresh{Every: 5, HalfLife: 5}, 19, 29, 0.25},
		{Refresh{Every: 5, HalfLife: 2.5}, 24, 29, 0.25},
		{Refresh{Every: 5, HalfLife: 0.001}, 0, 100000, 5e-324},
	}
	for _, tt := range tests {
		if got := tt.give.Weight(tt.step, tt.after); math.Abs(got-tt.want) > 1e-12 || !(got > 0) {
			t.Errorf("%+v.Weight(%d, %d) = %v, want %v", tt.give, tt.step, tt.after, got, tt.want)
		}
	}
}
