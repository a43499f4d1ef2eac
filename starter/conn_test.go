package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wmrl/wmrl/internal/deployenv"
	"github.com/wmrl/wmrl/internal/testenv"
)

// unreachableDB is a DSN no Postgres answers at.
const unreachableDB = "host=127.0.0.1 port=1 user=x dbname=x connect_timeout=1"

// runTree runs the real command tree and returns the exit status and
// what it printed.
func runTree(args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = run(newRootCmd, args, &out, &errOut)
	return status, out.String(), errOut.String()
}

// TestConnFlagsBeforeOrAfter gives the connection flags before and after
// the subcommand: both reach the command.
func TestConnFlagsBeforeOrAfter(t *testing.T) {
	t.Setenv(deployenv.EnvAddress, "127.0.0.1:1")
	t.Setenv(deployenv.EnvDatabaseURL, unreachableDB)
	dsn := testenv.EmptyDB(t)
	for _, give := range [][]string{
		{"--database-url", dsn, "migrate"},
		{"migrate", "--database-url", dsn},
		{"--database-url=" + dsn, "migrate", "--json"},
	} {
		if got, out, errOut := runTree(give...); got != exitOK || !strings.Contains(out, "version") {
			t.Errorf("wmrl %q: exit %d, stdout %q, stderr %q", give, got, out, errOut)
		}
	}
	// Temporal's flags: the command dials the address given, wherever it is.
	tests := []struct {
		give []string
		want int
		msg  string
	}{
		{[]string{"--address", "127.0.0.2:1", "pause", "r1"}, exitRuntime, "connect to temporal at 127.0.0.2:1"},
		{[]string{"pause", "r1", "--address", "127.0.0.2:1"}, exitRuntime, "connect to temporal at 127.0.0.2:1"},
		{[]string{"--namespace", "ns", "set-anchor-fraction", "--address", "127.0.0.2:1", "r1", "0.5"}, exitRuntime, "connect to temporal at 127.0.0.2:1"},
		{[]string{"--address", "127.0.0.2:1", "set-anchor-fraction", "r1", "-0.5"}, exitUsage, `anchor fraction "-0.5"`},
		{[]string{"--address"}, exitUsage, "flag needs an argument: --address"},
		{[]string{"--bogus=1", "pause", "r1"}, exitUsage, "unknown flag: --bogus"},
	}
	for _, tt := range tests {
		got, out, errOut := runTree(tt.give...)
		if got != tt.want || out != "" || !strings.Contains(errOut, tt.msg) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("wmrl %q: exit %d, stdout %q, stderr %q; want %d, %q", tt.give, got, out, errOut, tt.want, tt.msg)
		}
	}
}

// TestNoConnNeeded runs the commands that need neither Temporal nor
// Postgres where neither answers, with the flags given or not.
func TestNoConnNeeded(t *testing.T) {
	t.Setenv(deployenv.EnvAddress, "127.0.0.1:1")
	t.Setenv(deployenv.EnvDatabaseURL, unreachableDB)
	for _, give := range [][]string{
		{"--version"},
		{"calibrate", "--pairs", examplePairs},
		{"--database-url", unreachableDB, "--address", "127.0.0.1:1", "calibrate", "--pairs", examplePairs, "--json"},
		{"worldmodel", "--help"},
		{"suite", "--help"},
		{"tasks", "list", "--data-dir", "testdata-none"},
	} {
		if got, out, errOut := runTree(give...); got != exitOK || out == "" || errOut != "" {
			t.Errorf("wmrl %q: exit %d, stderr %q", give, got, errOut)
		}
	}
}

func TestContinueAlias(t *testing.T) {
	root := newRootCmd()
	for _, name := range []string{"continue", "resume-from"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil || cmd.Name() != "continue" {
			t.Errorf("wmrl %s finds %v, %v; want continue", name, cmd, err)
		}
	}
	for _, name := range []string{"continue", "resume-from"} {
		got, _, errOut := runTree(name, "")
		if got != exitUsage || !strings.Contains(errOut, "run name: must not be empty") {
			t.Errorf("wmrl %s '': exit %d, stderr %q", name, got, errOut)
		}
		got, _, errOut = runTree(name, "r1", "--database-url", unreachableDB)
		if got != exitRuntime || !strings.Contains(errOut, "127.0.0.1") {
			t.Errorf("wmrl %s r1: exit %d, stderr %q; want a failure to connect", name, got, errOut)
		}
	}
	_, out, _ := runTree("continue", "--help")
	if !strings.Contains(out, "continue, resume-from") || !strings.Contains(out, "not wmrl resume") {
		t.Errorf("continue --help:\n%s", out)
	}
}

// TestHelpGroups reads the sections of wmrl --help: every command is in its
// group, and the connection flags are shown once, grouped.
func TestHelpGroups(t *testing.T) {
	got, out, _ := runTree("--help")
	if got != exitOK {
		t.Fatalf("--help: exit %d", got)
	}
	sections := map[string][]string{}
	var title string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			title = strings.TrimSuffix(l, ":")
		case strings.HasPrefix(l, "  ") && title != "":
			sections[title] = append(sections[title], strings.Fields(l)[0])
		case l == "":
			title = ""
		}
	}
	want := map[string][]string{
		"Runs":                 {"continue", "inspect", "list", "pause", "report", "resume", "run", "set-anchor-fraction", "status", "stop", "terminate"},
		"Method and suite":     {"calibrate", "exec", "suite", "tasks", "worldmodel"},
		"Setup and benchmarks": {"bench", "migrate", "serve"},
		"Additional Commands":  {"completion", "help"},
		"Flags":                {"-h,", "-v,"},
	}
	for k, w := range want {
		if strings.Join(sections[k], " ") != strings.Join(w, " ") {
			t.Errorf("section %s: %q, want %q", k, sections[k], w)
		}
	}
	for _, f := range []string{"--address", "--namespace", "--ui-url", "--database-url"} {
		if strings.Count(out, f+" ") != 1 {
			t.Errorf("wmrl --help shows %s %d times, want once", f, strings.Count(out, f+" "))
		}
	}
	// A command's help shows the groups it uses.
	tests := []struct {
		give     []string
		want     []string
		wantNone []string
	}{
		{[]string{"run", "--help"}, []string{"Temporal flags", "--address", "--ui-url", "Postgres flags", "--database-url"}, nil},
		{[]string{"inspect", "--help"}, []string{"Postgres flags", "--database-url"}, []string{"--address", "Temporal"}},
		{[]string{"report", "--help"}, []string{"Postgres flags", "--database-url"}, []string{"--address", "Temporal"}},
		{[]string{"pause", "--help"}, []string{"--address", "--namespace"}, []string{"--database-url"}},
		{[]string{"migrate", "--help"}, []string{"--database-url"}, []string{"--address"}},
		{[]string{"worldmodel", "anchors", "--help"}, []string{"--database-url"}, []string{"--address"}},
		{[]string{"calibrate", "--help"}, nil, []string{"--address", "--database-url", "Global Flags"}},
		{[]string{"worldmodel", "fit", "--help"}, nil, []string{"--address", "--database-url"}},
		{[]string{"tasks", "show", "--help"}, []string{"--data-dir"}, []string{"--address", "--database-url"}},
	}
	for _, tt := range tests {
		_, out, _ := runTree(tt.give...)
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("wmrl %q lacks %q", tt.give, w)
			}
		}
		for _, w := range tt.wantNone {
			if strings.Contains(out, w) {
				t.Errorf("wmrl %q shows %q", tt.give, w)
			}
		}
	}
}

// TestListWithoutTemporal lists the runs of Postgres when Temporal does not
// answer, and says so.
func TestListWithoutTemporal(t *testing.T) {
	_, dsn := testenv.FreshDB(t)
	got, out, errOut := runTree("--address", "127.0.0.1:1", "list", "--json", "--database-url", dsn)
	if got != exitOK || !strings.Contains(out, `"runs": []`) || !strings.Contains(out, "connect to temporal at 127.0.0.1:1") {
		t.Errorf("list without Temporal: exit %d, stdout %q, stderr %q", got, out, errOut)
	}
	got, _, errOut = runTree("status", "ghost", "--database-url", dsn, "--address", "127.0.0.1:1")
	if got != exitRuntime || !strings.Contains(errOut, "ghost") {
		t.Errorf("status of an unknown run without Temporal: exit %d, stderr %q", got, errOut)
	}
}
