package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wmrl/wmrl/internal/cmdline"
	"github.com/wmrl/wmrl/internal/runconfig"
)

// Exit statuses of wmrl (cmdline's).
const (
	exitOK      = cmdline.ExitOK
	exitRuntime = cmdline.ExitFailure // the command failed
	exitUsage   = cmdline.ExitUsage   // the command line is wrong
)

// usageError is a wrong command line: an unknown command or flag, a wrong
// number of arguments, an invalid flag or argument value. wmrl exits with
// exitUsage on it.
type usageError = cmdline.UsageError

func usagef(format string, args ...any) error { return cmdline.Usagef(format, args...) }

// exitStatus is the exit status for err.
func exitStatus(err error) int { return cmdline.ExitStatus(err) }

// oneLine makes a message one line, so that every error is one line on
// stderr.
func oneLine(msg string) string { return cmdline.OneLine(msg) }

// guardArgs makes every command of the tree under c report its argument
// errors as usage errors, refuse invalid run names before doing anything
// (a command whose usage line takes RUN checks its first argument, RUN...
// all of them), and refuse unknown subcommands of a command group.
func guardArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardArgs(sub)
	}
	if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
		// A group would print its help and succeed on any argument.
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", clipArg(args[0]), cmd.CommandPath())
			}
			return cmd.Help()
		}
		return
	}
	check := c.Args
	if check == nil {
		return
	}
	runs := 0 // how many leading arguments are run names (-1: all)
	switch words := strings.Fields(c.Use); {
	case len(words) > 1 && words[1] == "RUN":
		runs = 1
	case len(words) > 1 && words[1] == "RUN...":
		runs = -1
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usagef("%s: %v (usage: %s)", cmd.Name(), err, cmd.UseLine())
		}
		for i, a := range args {
			if runs >= 0 && i >= runs {
				break
			}
			if err := checkRunName(a); err != nil {
				return err
			}
		}
		return nil
	}
}

// checkRunName refuses what cannot be a run name, before any network call.
func checkRunName(name string) error {
	if err := runconfig.CheckName(name); err != nil {
		return usagef("run name: %v", err)
	}
	return nil
}

// clipArg shortens a value quoted in an error message.
func clipArg(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// intIn refuses an integer flag outside [lo, hi].
func intIn(name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return usagef("--%s %d: want %d..%d", name, v, lo, hi)
	}
	return nil
}

// durationIn refuses a duration flag outside [lo, hi].
func durationIn(name string, v, lo, hi time.Duration) error {
	if v < lo || v > hi {
		return usagef("--%s %v: want %v..%v", name, v, lo, hi)
	}
	return nil
}

// floatIn refuses a float flag that is not finite or outside [lo, hi].
func floatIn(name string, v, lo, hi float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		return usagef("--%s %v: want a number in [%v, %v]", name, v, lo, hi)
	}
	return nil
}

// Bounds of the polling interval of the commands that follow a run.
const (
	minPoll = 100 * time.Millisecond
	maxPoll = time.Hour
)

// parseWithNumbers parses cmd's flags out of args for a command with
// DisableFlagParsing, so that a negative number ("-1") is a positional
// argument: pflag would read it as the shorthand flag "1". It returns the
// positional arguments and whether --help was asked for.
func parseWithNumbers(cmd *cobra.Command, args []string) ([]string, bool, error) {
	fs := cmd.Flags()
	fs.AddFlagSet(cmd.InheritedFlags()) // the persistent connection flags
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if _, err := strconv.ParseFloat(a, 64); err == nil || !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		if strings.Contains(a, "=") {
			continue
		}
		var f *pflag.Flag
		if name, ok := strings.CutPrefix(a, "--"); ok {
			f = fs.Lookup(name)
		} else if len(a) == 2 {
			f = fs.ShorthandLookup(a[1:])
		}
		if f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, false, &usageError{Err: err}
	}
	help, _ := fs.GetBool("help")
	return pos, help, nil
}

// Bounds of the step and row flags: a run has at most a million steps
// (runconfig's steps), and a table is not printed past a million rows.
const (
	maxStep = 1_000_000
	maxRows = 1_000_000
)

// readFileMax reads a file of at most max bytes: a larger one, or an
// endless one such as /dev/zero, is refused after max bytes.
func readFileMax(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, nil
}

// decimalUint64 is a flag's uint64 as a run configuration writes it:
// decimal digits (pflag's Uint64 would read 0x10 as 16 and 010 as 8).
type decimalUint64 struct{ v *uint64 }

var _ pflag.Value = decimalUint64{}

func (d decimalUint64) String() string {
	if d.v == nil {
		return "0"
	}
	return strconv.FormatUint(*d.v, 10)
}

func (d decimalUint64) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want decimal digits in [0,%d]", uint64(math.MaxUint64))
	}
	*d.v = v
	return nil
}

func (decimalUint64) Type() string { return "uint64" }
