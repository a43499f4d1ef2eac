package runconfig

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The backend fields accept "" and any well-formed backend name (which
// backends exist is the workers' registrations', told by the preflight),
// refuse anything else naming the field, and are left out of the JSON when
// empty, so that recorded workflow inputs keep their bytes.
func TestBackendFields(t *testing.T) {
	for _, tt := range []struct {
		give string
		want string // "" when valid, else the error's prefix
	}{
		{"steps: 3\n", ""},
		{"policy:\n  backend: builtin\nworld_model:\n  backend: builtin\n", ""},
		{"policy:\n  backend: tinker\nworld_model:\n  backend: openai\nsandbox:\n  kind: grade-http\n", ""},
		{"world_model:\n  backend: grade-http\n", ""},
		{"world_model:\n  backend: constant\nsandbox:\n  kind: python3\n", ""}, // a worker may register them
		{"policy:\n  backend: Open AI\n", `must be a backend's name`},
		{"world_model:\n  backend: \"tinker!\"\n", `must be a backend's name`},
		{"sandbox:\n  kind: 3python\n", `must be a backend's name`},
		{"tasks: ../store\n", `must be a backend's name`},
		{"world_model:\n  model: x\n", "model"},
	} {
		_, err := Parse(Default(), []byte(tt.give))
		if tt.want == "" && err != nil {
			t.Errorf("Parse(%q) = %v", tt.give, err)
		}
		if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) ||
			!strings.HasPrefix(err.Error(), strings.SplitN(tt.give, ":", 2)[0])) {
			t.Errorf("Parse(%q) = %v, want %q", tt.give, err, tt.want)
		}
	}
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("backend")) || bytes.Contains(b, []byte("world_model")) {
		t.Errorf("default config JSON names a backend: %s", b)
	}
	c := Default()
	c.Policy.Backend, c.WorldModel.Backend = "builtin", "builtin"
	b, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back.Policy.Backend != "builtin" || back.WorldModel.Backend != "builtin" {
		t.Errorf("round trip of %s = %+v, %v", b, back, err)
	}
}

// policy.tinker is parsed strictly, validated naming its fields, and left
// out of the JSON when empty.
func TestTinkerSection(t *testing.T) {
	c, err := Parse(Default(), []byte("policy:\n  backend: tinker\n  tinker:\n    base_model: Qwen/Qwen3-4B\n    lora_rank: 16\n    loss: ppo\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.Tinker != (Tinker{BaseModel: "Qwen/Qwen3-4B", LoRARank: 16, Loss: "ppo"}) {
		t.Errorf("policy.tinker = %+v", c.Policy.Tinker)
	}
	b, err := json.Marshal(c)
	if err != nil || !bytes.Contains(b, []byte(`"tinker":{"base_model":"Qwen/Qwen3-4B","lora_rank":16,"loss":"ppo"}`)) {
		t.Errorf("JSON %s, %v", b, err)
	}
	for give, want := range map[string]string{
		"policy:\n  tinker:\n    rank: 3\n":         "policy.tinker.rank",
		"policy:\n  tinker:\n    loss: mse\n":       `policy.tinker.loss: line 3: must be "importance_sampling" or "ppo", got "mse"`,
		"policy:\n  tinker:\n    beta2: 1\n":        "policy.tinker.beta2",
		"policy:\n  tinker:\n    lora_rank: -1\n":   "policy.tinker.lora_rank",
		"policy:\n  tinker:\n    temperature: 99\n": "policy.tinker.temperature",
	} {
		if _, err := Parse(Default(), []byte(give)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", give, err, want)
		}
	}
}

// world_model.simulated needs world_model.backend: simulated, and bounds.
func TestSimulatedSection(t *testing.T) {
	if _, err := Parse(Default(), []byte("world_model:\n  backend: simulated\n  simulated:\n    noise: 0.15\n    bias: -0.1\n")); err != nil {
		t.Fatal(err)
	}
	for give, want := range map[string]string{
		"world_model:\n  simulated:\n    noise: 0.1\n":                       `world_model.simulated: line 2: is set but world_model.backend is "", not "simulated"`,
		"world_model:\n  backend: simulated\n  simulated:\n    noise: 2\n":   "world_model.simulated.noise",
		"world_model:\n  backend: simulated\n  simulated:\n    bias: -1.5\n": "world_model.simulated.bias",
	} {
		if _, err := Parse(Default(), []byte(give)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", give, err, want)
		}
	}
}
