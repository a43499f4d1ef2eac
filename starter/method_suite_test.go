package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/suite"
)

// smallSuiteOptions keeps the command tests fast: every (kind, family) in
// both splits, tiny data, a short reference panel.
func smallSuiteOptions(seed uint64) suite.Options {
	return suite.Options{Seed: seed, Train: 13, HeldOut: 13, MinRows: 150, MaxRows: 240, MaxFeatures: 8, PanelSize: 5}
}

// runSuiteCmd runs wmrl suite ARGS in-process on the small suite, with the
// cache in a fresh directory unless cache is given.
func runSuiteCmd(t *testing.T, cache string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv(suite.CacheEnv, cache)
	root := &cobra.Command{Use: "wmrl", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newSuiteCmdWith(smallSuiteOptions))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"suite"}, args...))
	err = root.Execute()
	return out.String(), errOut.String(), err
}

func TestSuiteListJSON(t *testing.T) {
	cache := t.TempDir()
	out, errOut, err := runSuiteCmd(t, cache, "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "building suite") {
		t.Errorf("no progress note on stderr while building: %q", errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var list []suiteListEntry
	if err := dec.Decode(&list); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if len(list) != 26 {
		t.Fatalf("%d tasks, want 26", len(list))
	}
	splits := map[string]int{}
	for _, e := range list {
		splits[e.Split]++
		if e.ID == "" || (e.Kind != "regression" && e.Kind != "classification") || e.Family == "" {
			t.Errorf("bad entry %+v", e)
		}
	}
	if splits["train"] != 13 || splits["heldout"] != 13 {
		t.Fatalf("splits %v", splits)
	}
	// A second run reads the cache: same output, no build note.
	out2, errOut2, err := runSuiteCmd(t, cache, "list", "--json")
	if err != nil || out2 != out || errOut2 != "" {
		t.Fatalf("cached run: err %v, stderr %q, same output %v", err, errOut2, out2 == out)
	}
	// Another seed is another suite: same ids, different hash in the text form.
	txt1, _, err := runSuiteCmd(t, cache, "list")
	if err != nil {
		t.Fatal(err)
	}
	txt2, _, err := runSuiteCmd(t, cache, "list", "--suite-seed", "99")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt1, "26 tasks (13 train, 13 held-out)") || !strings.Contains(txt2, "suite seed 99") {
		t.Fatalf("text summary missing:\n%s\n%s", txt1, txt2)
	}
	if lastLine(txt1) == lastLine(txt2) {
		t.Fatal("different suite seeds print the same hash")
	}
}

func TestSuiteShow(t *testing.T) {
	cache := t.TempDir()
	out, _, err := runSuiteCmd(t, cache, "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []suiteListEntry
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	id := list[3].ID
	out, _, err = runSuiteCmd(t, cache, "show", id, "--json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var r suiteShowReport
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if r.ID != id || r.Question == "" || r.Card.TrainRows == 0 || len(r.Card.Features) == 0 || len(r.Leaderboard) != 5 {
		t.Fatalf("incomplete report %+v", r)
	}
	if _, err := program.Parse(r.ExampleProgram); err != nil {
		t.Fatalf("example_program %q: %v", r.ExampleProgram, err)
	}
	for _, key := range []string{`"question"`, `"card"`, `"example_program"`} {
		if !strings.Contains(out, key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	txt, _, err := runSuiteCmd(t, cache, "show", id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{id, r.Question, "data card", "example_program", r.ExampleProgram, "x0"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text output lacks %q:\n%s", want, txt)
		}
	}
}

func TestSuiteShowUnknownTask(t *testing.T) {
	_, _, err := runSuiteCmd(t, t.TempDir(), "show", "reg-nope-123")
	if err == nil || !strings.Contains(err.Error(), `"reg-nope-123"`) {
		t.Fatalf("error %v does not name the unknown task", err)
	}
	if _, _, err := runSuiteCmd(t, t.TempDir(), "show"); err == nil {
		t.Fatal("show without a task accepted")
	}
}

func TestSuiteDefaultFlags(t *testing.T) {
	// The real command uses the default suite and the fixed default seed.
	cmd := newSuiteCmd()
	for _, sub := range cmd.Commands() {
		f := sub.Flags().Lookup("suite-seed")
		if f == nil || f.DefValue != strconv.FormatUint(suite.DefaultSeed, 10) {
			t.Errorf("%s: --suite-seed default %v", sub.Name(), f)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
