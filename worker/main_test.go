package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "temporal:7233")
	t.Setenv("WMRL_SANDBOX", "")
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.address != "temporal:7233" || o.sandboxKind != "auto" || len(o.queues) != 5 {
		t.Fatalf("defaults %+v", o)
	}
	o, err = parseFlags([]string{"--queues", "sandbox, gpu,sandbox", "--sandbox", "process", "--address", "x:1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.queues, []string{"sandbox", "gpu"}) || o.sandboxKind != "process" || o.address != "x:1" {
		t.Fatalf("parsed %+v", o)
	}
	bad := []struct {
		give []string
		want string
	}{
		{[]string{"--queues", "control,cpu"}, `unknown queue "cpu"`},
		{[]string{"--sandbox", "vm"}, "--sandbox"},
		{[]string{"--suite-seed", "-1"}, "--suite-seed"},
		{[]string{"extra"}, "unexpected arguments"},
	}
	for _, tt := range bad {
		if _, err := parseFlags(tt.give); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tt.give, err, tt.want)
		}
	}
}
