package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/cmdline"
	"github.com/wmrl/wmrl/internal/tasks"
)

// TestHostileInput runs the real command tree on command lines a user (or
// a script gone wrong) may type, and checks that each fails cleanly: no
// panic, the exit status of its kind (2 usage, 1 failure), exactly one
// line on stderr, nothing on stdout, and soon. The connection flags reach
// no service, so a command that got past its checks fails to connect.
func TestHostileInput(t *testing.T) {
	dir := t.TempDir()
	badConfig := writeFile(t, "bad.yaml", "mode: fast\nsteps: 0\ngroups: ten\nstepz: 1\n")
	binary := writeFile(t, "binary.csv", "\x00\x1b[31m\xff\xfe,\x01\n\x02")
	manyRows := writeFile(t, "many.csv", "wm,env\n"+strings.Repeat("0.5,0.5\n", 1<<20+1))
	db := "--database-url=host=127.0.0.1 port=1 user=x dbname=x connect_timeout=1"
	data := "--data-dir=" + t.TempDir()
	spec, err := os.ReadFile(filepath.Join(toyTask, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	badMetric := copyTask(t, map[string]string{"task.yaml": strings.Replace(string(spec), "metric: roc_auc", "metric: f2", 1)})
	leakyTest := copyTask(t, map[string]string{"public/test.csv": "id,x1,x2,label\n3,1.0,a,no\n4,2.0,b,yes\n"})
	binarySpec := copyTask(t, map[string]string{"task.yaml": "\x00\xff\xfe"})
	imported := t.TempDir()
	if _, err := (tasks.Store{Dir: tasks.StoreDir(imported)}).Import(toyTask, false); err != nil {
		t.Fatal(err)
	}
	withToy := "--data-dir=" + imported
	tests := []struct {
		name string
		give []string
		want int    // exit status
		msg  string // in the one line on stderr
	}{
		// From the issue.
		{"bins 2^31", []string{"calibrate", "--pairs", examplePairs, "--bins", "2147483648"}, exitUsage, "--bins 2147483648: want 1..1000000"},
		{"bins max int", []string{"calibrate", "--pairs", examplePairs, "--bins", "9223372036854775807"}, exitUsage, "--bins 9223372036854775807: want 1..1000000"},
		{"bins over int", []string{"calibrate", "--pairs", examplePairs, "--bins", "9223372036854775808"}, exitUsage, `invalid argument "9223372036854775808" for "--bins"`},
		{"pairs /dev/zero", []string{"calibrate", "--pairs", "/dev/zero"}, exitRuntime, "pairs file /dev/zero: line 1: line longer than 4096 bytes"},
		{"apply /dev/zero", []string{"calibrate", "--pairs", examplePairs, "--apply", "/dev/zero"}, exitRuntime, "apply file /dev/zero: line 1: line longer"},
		{"negative fraction", []string{"set-anchor-fraction", "r1", "-1"}, exitUsage, `anchor fraction "-1": want a number in [0,1]`},
		{"negative fraction then flag", []string{"set-anchor-fraction", "r1", "-0.5", "--json"}, exitUsage, `anchor fraction "-0.5"`},
		{"status empty run", []string{"status", ""}, exitUsage, "run name: must not be empty"},
		// calibrate
		{"bins zero", []string{"calibrate", "--pairs", examplePairs, "--bins", "0"}, exitUsage, "--bins 0: want 1..1000000"},
		{"bins not a number", []string{"calibrate", "--pairs", examplePairs, "--bins", "x"}, exitUsage, `invalid argument "x" for "--bins"`},
		{"min pairs huge", []string{"calibrate", "--pairs", examplePairs, "--min-pairs", "99999999999"}, exitUsage, "--min-pairs 99999999999: want 0..1048576"},
		{"window negative", []string{"calibrate", "--pairs", examplePairs, "--window", "-1"}, exitUsage, "--window -1: want 0..1048576"},
		{"method", []string{"calibrate", "--pairs", examplePairs, "--method", "spline"}, exitUsage, `--method: "spline"`},
		{"no pairs flag", []string{"calibrate"}, exitUsage, `required flag(s) "pairs" not set`},
		{"pairs binary", []string{"calibrate", "--pairs", binary}, exitRuntime, "line 1: header: unknown column"},
		{"pairs too many rows", []string{"calibrate", "--pairs", manyRows}, exitRuntime, "line 1048578: more than 1048576 data rows"},
		{"pairs missing", []string{"calibrate", "--pairs", dir + "/none.csv"}, exitRuntime, "no such file"},
		{"pairs a directory", []string{"calibrate", "--pairs", dir}, exitRuntime, "is a directory"},
		{"calibrate argument", []string{"calibrate", "--pairs", examplePairs, "extra"}, exitUsage, `unknown command "extra" for "wmrl calibrate"`},
		// run names
		{"status newline run", []string{"status", "a\nb"}, exitUsage, `run name: letters, digits, '.', '_' and '-' only, starting with a letter or digit, got "a\nb"`},
		{"status long run", []string{"status", strings.Repeat("r", 1000)}, exitUsage, "run name: at most 64 characters, got 1000"},
		{"status flag-like run", []string{"status", "--", "-r"}, exitUsage, "run name: letters"},
		{"status two runs", []string{"status", "a", "b"}, exitUsage, "status: accepts 1 arg(s), received 2"},
		{"status no run", []string{"status"}, exitUsage, "status: accepts 1 arg(s), received 0"},
		{"pause empty run", []string{"pause", ""}, exitUsage, "run name: must not be empty"},
		{"resume slash run", []string{"resume", "a/b"}, exitUsage, "run name: letters"},
		{"stop empty run", []string{"stop", ""}, exitUsage, "run name: must not be empty"},
		{"continue empty run", []string{"continue", ""}, exitUsage, "run name: must not be empty"},
		{"resume-from slash run", []string{"resume-from", "a/b"}, exitUsage, "run name: letters"},
		{"inspect empty run", []string{"inspect", ""}, exitUsage, "run name: must not be empty"},
		{"anchors empty run", []string{"worldmodel", "anchors", "ok", ""}, exitUsage, "run name: must not be empty"},
		{"set fraction empty run", []string{"set-anchor-fraction", "", "0.5"}, exitUsage, "run name: must not be empty"},
		{"set fraction NaN", []string{"set-anchor-fraction", "r1", "NaN"}, exitUsage, `anchor fraction "NaN"`},
		{"set fraction overflow", []string{"set-anchor-fraction", "r1", "1e999"}, exitUsage, `anchor fraction "1e999"`},
		{"set fraction one arg", []string{"set-anchor-fraction", "r1"}, exitUsage, "set-anchor-fraction: accepts 2 arg(s), received 1"},
		{"set fraction unknown flag", []string{"set-anchor-fraction", "--bogus", "r1", "0.5"}, exitUsage, "unknown flag: --bogus"},
		// counts, steps, durations
		{"inspect step negative", []string{"inspect", "r1", "--step", "-1", db}, exitUsage, "--step -1: want 0..1000000"},
		{"inspect limit negative", []string{"inspect", "r1", "--limit", "-1", db}, exitUsage, "--limit -1: want 0..1000000"},
		{"report empty run", []string{"report", ""}, exitUsage, "run name: must not be empty"},
		{"report slash run", []string{"report", "../x"}, exitUsage, "run name: letters"},
		{"report maps negative", []string{"report", "r1", "--maps", "-1", db}, exitUsage, "--maps -1: want 0..8"},
		{"report out empty", []string{"report", "r1", "--out", "", db}, exitUsage, "--out: must not be empty"},
		{"report unreachable", []string{"report", "r1", db}, exitRuntime, ""},
		{"list limit negative", []string{"list", "--limit", "-5", db}, exitUsage, "--limit -5: want 0..1000000"},
		{"status poll zero", []string{"status", "r1", "--poll", "0s", db}, exitUsage, "--poll 0s: want 100ms..1h0m0s"},
		{"run poll negative", []string{"run", "--preset", "tiny", "--poll", "-1s", db}, exitUsage, "--poll -1s: want 100ms..1h0m0s"},
		{"anchors every zero", []string{"worldmodel", "anchors", "r1", "--every", "0", db}, exitUsage, "--every 0: want 1..1000000"},
		{"anchors no run", []string{"worldmodel", "anchors"}, exitUsage, "anchors: requires at least 1 arg(s), only received 0"},
		{"bench seeds zero", []string{"bench", "reproduce", "--seeds", "0", db}, exitUsage, "--seeds 0: want 1..1000"},
		{"bench seeds huge", []string{"bench", "reproduce", "--seeds", "1000000000", db}, exitUsage, "--seeds 1000000000: want 1..1000"},
		{"bench steps negative", []string{"bench", "reproduce", "--steps", "-1", db}, exitUsage, "--steps -1: want 0..1000000"},
		{"bench poll tiny", []string{"bench", "reproduce", "--poll", "1ns", db}, exitUsage, "--poll 1ns: want 100ms..1h0m0s"},
		{"bench modes", []string{"bench", "reproduce", "--modes", "wmrl,bogus", db}, exitUsage, "--modes:"},
		{"bench preset", []string{"bench", "reproduce", "--preset", "huge", db}, exitUsage, "--preset:"},
		{"bench config /dev/zero", []string{"bench", "reproduce", "--config", "/dev/zero", db}, exitRuntime, "--config: /dev/zero: larger than 1048576 bytes"},
		{"fit samples zero", []string{"worldmodel", "fit", "--samples-per-task", "0"}, exitUsage, "--samples-per-task 0: want 1..10000"},
		{"fit lambda NaN", []string{"worldmodel", "fit", "--lambda", "NaN"}, exitUsage, "--lambda NaN: want a number in [0, 1e+06]"},
		{"eval samples huge", []string{"worldmodel", "eval", "--samples-per-task", "2147483648"}, exitUsage, "--samples-per-task 2147483648: want 1..10000"},
		{"eval split", []string{"worldmodel", "eval", "--split", "test"}, exitUsage, `--split must be train or heldout, got "test"`},
		{"eval model /dev/zero", []string{"worldmodel", "eval", "--model", "/dev/zero"}, exitRuntime, "read world model: /dev/zero: larger than 16777216 bytes"},
		{"exec no program", []string{"exec", "--task", "t"}, exitUsage, "--task and --program are required"},
		{"exec long task", []string{"exec", "--task", strings.Repeat("t", 300), "--program", "ridge"}, exitUsage, "--task: 300 bytes, want a task id of 1..256"},
		{"exec deadline", []string{"exec", "--task", "t", "--program", "ridge", "--deadline", "-1s"}, exitUsage, "sandbox limits (--memory, --cpus, --pids, --deadline): "},
		{"exec memory", []string{"exec", "--task", "t", "--program", "ridge", "--memory", "-1"}, exitUsage, "sandbox limits"},
		{"suite show empty", []string{"suite", "show", ""}, exitUsage, "TASK: 0 bytes, want a task id of 1..256"},
		{"bench id", []string{"bench", "reproduce", "--id", "a b", db}, exitUsage, "--id: letters"},
		{"exec huge program", []string{"exec", "--task", "t", "--program", strings.Repeat("x", 1<<20)}, exitUsage, "--program: 1048576 bytes, want at most 65536"},
		// real tasks
		{"tasks import nothing", []string{"tasks", "import", data}, exitUsage, "import: requires at least 1 arg(s), only received 0"},
		{"tasks import missing", []string{"tasks", "import", dir + "/none", data}, exitRuntime, "task directory: stat"},
		{"tasks import a file", []string{"tasks", "import", "/dev/null", data}, exitRuntime, "task directory /dev/null: not a directory"},
		{"tasks import bad metric", []string{"tasks", "import", badMetric, data}, exitRuntime, `task.yaml: metric: line 4: unknown metric "f2"`},
		{"tasks import leaky test", []string{"tasks", "import", toyTask, leakyTest, data}, exitRuntime, "public/test.csv: label: line 1: the target column is the answer"},
		{"tasks import binary spec", []string{"tasks", "import", binarySpec, data}, exitRuntime, "task.yaml: not UTF-8"},
		{"tasks import twice", []string{"tasks", "import", toyTask, toyTask, data}, exitRuntime, "are both task toy-binary"},
		{"tasks show empty", []string{"tasks", "show", "", data}, exitUsage, "ID: must not be empty"},
		{"tasks show path", []string{"tasks", "show", "../../etc", data}, exitUsage, "ID: a-z, 0-9"},
		{"tasks show long", []string{"tasks", "show", strings.Repeat("t", 300), data}, exitUsage, "ID: at most 64 characters, got 300"},
		{"tasks show unknown", []string{"tasks", "show", "nothing", data}, exitRuntime, "task nothing: no such task"},
		{"tasks show two", []string{"tasks", "show", "a", "b", data}, exitUsage, "show: accepts 1 arg(s), received 2"},
		{"tasks list argument", []string{"tasks", "list", "x", data}, exitUsage, `unknown command "x" for "wmrl tasks list"`},
		{"tasks list no data dir", []string{"tasks", "list", "--data-dir="}, exitUsage, "--data-dir: must not be empty"},
		{"tasks grade no file", []string{"tasks", "grade", "toy-binary", data}, exitUsage, "grade: accepts 2 arg(s), received 1"},
		{"tasks grade bad id", []string{"tasks", "grade", "a/b", "x.csv", data}, exitUsage, "ID: a-z"},
		{"tasks grade unknown", []string{"tasks", "grade", "nothing", binary, data}, exitRuntime, "task nothing: no such task"},
		{"tasks grade /dev/zero", []string{"tasks", "grade", "toy-binary", "/dev/zero", withToy}, exitRuntime, "submission: /dev/zero: larger than 67108864 bytes"},
		{"tasks grade binary", []string{"tasks", "grade", "toy-binary", binary, withToy}, exitRuntime, "submission.csv: not UTF-8"},
		{"tasks grade missing", []string{"tasks", "grade", "toy-binary", dir + "/none.csv", withToy}, exitRuntime, "no such file"},
		{"tasks grade labels", []string{"tasks", "grade", "toy-binary", writeFile(t, "s.csv", "id,label\n3,no\n4,yes\n"), withToy}, exitRuntime,
			`submission.csv: label: line 2: "no": want the probability of "yes", in [0, 1]`},
		{"tasks unknown", []string{"tasks", "bogus"}, exitUsage, `unknown command "bogus" for "wmrl tasks"`},
		// run configurations
		{"run config /dev/zero", []string{"run", "--config", "/dev/zero", db}, exitRuntime, "read config: /dev/zero: larger than 1048576 bytes"},
		{"run config every field", []string{"run", "--config", badConfig, db}, exitRuntime,
			`mode: line 1: unknown mode "fast"`},
		{"run config steps 2.9", []string{"run", "--config", writeFile(t, "steps.yaml", "steps: 2.9\n"), db}, exitRuntime,
			"steps: line 1: 2.9 is not an integer"},
		{"run config memory 600.7", []string{"run", "--config", writeFile(t, "mem.yaml", "sandbox:\n  memory_mb: 600.7\n"), db}, exitRuntime,
			"sandbox.memory_mb: line 2: 600.7 is not an integer"},
		{"run config memory 1e30", []string{"run", "--config", writeFile(t, "mem30.yaml", "sandbox:\n  memory_mb: 1e30\n"), db}, exitRuntime,
			"sandbox.memory_mb: line 2: 1e30 is not an integer"},
		{"run config seed 2^64", []string{"run", "--config", writeFile(t, "seed.yaml", "seed: 18446744073709551616\n"), db}, exitRuntime,
			"seed: line 1: 18446744073709551616 is out of range [0,18446744073709551615]"},
		{"run config steps hex", []string{"run", "--config", writeFile(t, "hex.yaml", "steps: 0x10\n"), db}, exitRuntime,
			"steps: line 1: 0x10 is not a decimal integer"},
		{"run config groups binary", []string{"run", "--config", writeFile(t, "bin.yaml", "groups: 0b11\n"), db}, exitRuntime,
			"groups: line 1: 0b11 is not a decimal integer"},
		{"run config samples octal", []string{"run", "--config", writeFile(t, "oct.yaml", "samples: 010\n"), db}, exitRuntime,
			"samples: line 1: 010 is not a decimal integer (a leading 0 reads as octal)"},
		{"run config fraction garbage", []string{"run", "--config", writeFile(t, "frac.yaml", "anchors:\n  fraction: 0.5x\n"), db}, exitRuntime,
			"anchors.fraction: line 2: 0.5x is not a number"},
		{"run config cpus nan", []string{"run", "--config", writeFile(t, "cpus.yaml", "sandbox: {cpus: .nan}\n"), db}, exitRuntime,
			"sandbox.cpus: line 1: .nan is not a finite number"},
		{"run config missing", []string{"run", "--config", dir + "/none.yaml", db}, exitRuntime, "read config: open"},
		{"run neither", []string{"run", db}, exitUsage, "give --config FILE or --preset NAME"},
		{"run preset", []string{"run", "--preset", "huge", db}, exitUsage, `--preset: unknown preset "huge"`},
		{"run name", []string{"run", "--preset", "tiny", "--name", "", db}, exitUsage, "--name: must not be empty"},
		{"run seed", []string{"run", "--preset", "tiny", "--seed", "-1", db}, exitUsage, `invalid argument "-1" for "--seed"`},
		{"run seed hex", []string{"run", "--preset", "tiny", "--seed", "0x10", db}, exitUsage, `invalid argument "0x10" for "--seed" flag: want decimal digits in [0,18446744073709551615]`},
		{"run seed 2^64", []string{"run", "--preset", "tiny", "--seed", "18446744073709551616", db}, exitUsage, `invalid argument "18446744073709551616" for "--seed"`},
		// the command line itself
		{"unknown command", []string{"bogus"}, exitUsage, `unknown command "bogus" for "wmrl"`},
		{"unknown subcommand", []string{"suite", "bogus"}, exitUsage, `unknown command "bogus" for "wmrl suite"`},
		{"unknown bench subcommand", []string{"bench", "bogus"}, exitUsage, `unknown command "bogus" for "wmrl bench"`},
		{"unknown flag", []string{"list", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{"unknown shorthand", []string{"status", "-x", "r1"}, exitUsage, "unknown shorthand flag: 'x' in -x"},
		{"flag without value", []string{"list", "--limit"}, exitUsage, "flag needs an argument: --limit"},
		{"newline in flag", []string{"list", "--a\nb"}, exitUsage, "unknown flag: --a; b"},
		{"suite show two", []string{"suite", "show", "a", "b"}, exitUsage, "show: accepts 1 arg(s), received 2"},
		{"migrate argument", []string{"migrate", "now"}, exitUsage, `unknown command "now" for "wmrl migrate"`},
		// failures past the checks
		{"list unreachable", []string{"list", db}, exitRuntime, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			start := time.Now()
			got := run(newRootCmd, tt.give, &out, &errOut)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			stderr := errOut.String()
			if got != tt.want {
				t.Errorf("exit status %d, want %d (stderr %q)", got, tt.want, stderr)
			}
			if out.Len() > 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || !strings.HasPrefix(stderr, "wmrl: ") {
				t.Errorf("stderr %q, want one line starting wmrl: ", stderr)
			}
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "goroutine ") {
				t.Errorf("panic: %q", stderr)
			}
			if !strings.Contains(stderr, tt.msg) {
				t.Errorf("stderr %q lacks %q", stderr, tt.msg)
			}
		})
	}
}

func TestRunRecovers(t *testing.T) {
	tests := []struct {
		give func() error
		want int
		msg  string
	}{
		{func() error { panic("boom\nat line 2") }, exitRuntime, "wmrl: internal error: boom; at line 2\n"},
		{func() error { return errors.New("failed:\n  a\n  b") }, exitRuntime, "wmrl: failed: a; b\n"},
		{func() error { return usagef("--x 3: want 1..2") }, exitUsage, "wmrl: --x 3: want 1..2\n"},
		{func() error { return nil }, exitOK, ""},
	}
	for _, tt := range tests {
		newRoot := func() *cobra.Command {
			return &cobra.Command{Use: "wmrl", SilenceErrors: true, SilenceUsage: true,
				RunE: func(*cobra.Command, []string) error { return tt.give() }}
		}
		var out, errOut bytes.Buffer
		if got := run(newRoot, nil, &out, &errOut); got != tt.want || errOut.String() != tt.msg || out.Len() > 0 {
			t.Errorf("run = %d, stderr %q, stdout %q; want %d, %q", got, errOut.String(), out.String(), tt.want, tt.msg)
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if got := run(newRootCmd, []string{"--version"}, &out, &errOut); got != exitOK || errOut.Len() > 0 {
		t.Fatalf("--version: %d, stderr %q", got, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "wmrl version ") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("--version printed %q", out.String())
	}
}

func TestBuildVersion(t *testing.T) {
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "2bf594f98060e6f06c5a7970304b99aa8d079151"}
	tests := []struct {
		give debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{}, "(devel)"},
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{rev}}, "(devel) 2bf594f98060"},
		{debug.BuildInfo{Settings: []debug.BuildSetting{rev, {Key: "vcs.modified", Value: "true"}}}, "(devel) 2bf594f98060 (modified)"},
	}
	for _, tt := range tests {
		if got := cmdline.BuildVersion(&tt.give); got != tt.want {
			t.Errorf("BuildVersion(%+v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestParseWithNumbers(t *testing.T) {
	tests := []struct {
		give     []string
		want     []string
		wantJSON bool
		wantHelp bool
	}{
		{give: []string{"r1", "-1"}, want: []string{"r1", "-1"}},
		{give: []string{"r1", "-1e-3", "--json"}, want: []string{"r1", "-1e-3"}, wantJSON: true},
		{give: []string{"--json", "r1", "-.5"}, want: []string{"r1", "-.5"}, wantJSON: true},
		{give: []string{"--address", "-1", "r1", "0.5"}, want: []string{"r1", "0.5"}},
		{give: []string{"--address=127.0.0.1:1", "r1", "-Inf"}, want: []string{"r1", "-Inf"}},
		{give: []string{"--", "-r1", "--json"}, want: []string{"-r1", "--json"}},
		{give: []string{"-h"}, wantHelp: true},
		{give: []string{"r1", "-", "1"}, want: []string{"r1", "-", "1"}},
	}
	for _, tt := range tests {
		cmd, _, err := newRootCmd().Find([]string{"set-anchor-fraction"})
		if err != nil {
			t.Fatal(err)
		}
		cmd.InitDefaultHelpFlag()
		got, help, err := parseWithNumbers(cmd, tt.give)
		if err != nil {
			t.Errorf("parseWithNumbers(%q): %v", tt.give, err)
			continue
		}
		asJSON, _ := cmd.Flags().GetBool("json")
		if !slices.Equal(got, tt.want) || help != tt.wantHelp || asJSON != tt.wantJSON {
			t.Errorf("parseWithNumbers(%q) = %q, help %v, json %v; want %q, %v, %v", tt.give, got, help, asJSON, tt.want, tt.wantHelp, tt.wantJSON)
		}
	}
}
