package runconfig

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// world_model.refresh is parsed strictly, validated naming its fields, and
// left out of the JSON when off, so that recorded workflow inputs keep their
// bytes.
func TestRefreshSection(t *testing.T) {
	for _, tt := range []struct {
		give string
		want string // "" when valid, else the error's prefix
	}{
		{"world_model:\n  refresh:\n    every: 10\n    min_pairs: 32\n", ""},
		{"world_model:\n  refresh:\n    every: 0\n", ""},
		{"mode: debias\nworld_model:\n  refresh:\n    every: 1\n", ""},
		{"world_model:\n  refresh:\n    every: -2\n", "world_model.refresh.every:"},
		{"world_model:\n  refresh:\n    min_pairs: 4\n", "is set (4) but"},
		{"world_model:\n  refresh:\n    every: 3\n    min_pairs: -1\n", "world_model.refresh.min_pairs:"},
		{"mode: grpo\nworld_model:\n  refresh:\n    every: 3\n", "mode grpo has no anchor pairs"},
		{"world_model:\n  backend: openai\n  refresh:\n    every: 3\n", "world_model.backend \"openai\" cannot be retrained"},
		{"world_model:\n  refresh:\n    each: 3\n", "each"},
	} {
		c, err := Parse(Default(), []byte(tt.give))
		if tt.want == "" {
			if err != nil {
				t.Errorf("Parse(%q) = %v", tt.give, err)
			}
			continue
		}
		field := "world_model.refresh."
		if strings.Contains(tt.give, "each") {
			field = "world_model"
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), field) {
			t.Errorf("Parse(%q) = %+v, %v, want an error with %q", tt.give, c.WorldModel, err, tt.want)
		}
	}

	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("refresh")) {
		t.Errorf("default config JSON has a refresh section: %s", b)
	}
	c := Default()
	c.WorldModel.Refresh = Refresh{Every: 5, MinPairs: 16}
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"world_model":{"refresh":{"every":5,"min_pairs":16}}`)) {
		t.Errorf("refresh JSON: %s", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("round trip of %s = %+v, %v", b, back.WorldModel, err)
	}
}
