// Command wmrl is the command line of wmrl: durable training runs on
// Temporal (run, status, list, inspect, report, pause, resume, stop,
// set-anchor-fraction, continue, terminate), offline calibration audits,
// the built-in suite and its world model, the database schema (migrate),
// the benchmark (bench reproduce) and the built-in grader and world model
// as HTTP services (serve).
//
// Each command is one file named for its help group: runs_*.go (run,
// status, list, inspect, report, the run controls, continue, terminate),
// method_*.go (calibrate, suite, exec, worldmodel, tasks) and setup_*.go
// (migrate, bench, serve). What they share: args.go (argument checks and
// usage errors), conn.go (connection flags and clients), temporal.go
// (workflow queries), progress.go (the step display) and outage.go (waiting
// out a Temporal or Postgres outage).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/cmdline"
	"github.com/wmrl/wmrl/internal/deployenv"
)

// The command groups of the help.
const (
	groupRuns   = "runs"
	groupMethod = "method"
	groupSetup  = "setup"
)

// version is wmrl's version, set at build time with
// -ldflags "-X main.version=v1.2.3"; empty, it comes from the build info.
var version string

func main() {
	os.Exit(run(newRootCmd, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args on the command tree newRoot makes and
// returns the exit status: 0, 1 when the command failed, 2 when the command
// line is wrong. An error is one line on stderr; so is a panic, the last
// line of defence.
func run(newRoot func() *cobra.Command, args []string, stdout, stderr io.Writer) (status int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintln(stderr, "wmrl: internal error:", oneLine(fmt.Sprint(r)))
			status = exitRuntime
		}
	}()
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err != nil {
		fmt.Fprintln(stderr, "wmrl:", oneLine(err.Error()))
	}
	return exitStatus(err)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "wmrl",
		Short: "World-Model RL: GRPO post-training with a world model and an anchor stream",
		Long: `World-Model RL: GRPO post-training with a world model and an anchor stream.

Exit status: 0 on success; 1 when the command fails (a run that fails, a
service that does not answer, an invalid file); 2 for a usage error (an
unknown command or flag, a wrong number of arguments, an invalid flag or
argument value). Every error is one line on stderr, starting "wmrl: ".`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{Err: err} })
	cf := addConnFlags(root, deployenv.Read())
	help := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		help(cmd, args)
		connHelp(cmd.OutOrStdout(), cmd)
	})
	// Each subcommand lives in its own file and is added here, in its
	// group of the help.
	root.AddGroup(
		&cobra.Group{ID: groupRuns, Title: "Runs:"},
		&cobra.Group{ID: groupMethod, Title: "Method and suite:"},
		&cobra.Group{ID: groupSetup, Title: "Setup and benchmarks:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupRuns, newRunCmd(cf), newStatusCmd(cf), newListCmd(cf), newInspectCmd(cf), newReportCmd(cf))
	add(groupRuns, newSignalCmds(cf)...)
	add(groupRuns, newSetAnchorFractionCmd(cf), newContinueCmd(cf), newTerminateCmd(cf))
	add(groupMethod, newCalibrateCmd(), newSuiteCmd(), newExecCmd(), newWorldModelCmd(cf))
	add(groupMethod, newTasksCmd())
	add(groupSetup, newMigrateCmd(cf), newBenchCmd(cf), newServeCmd(cf))
	guardArgs(root)
	return root
}

// versionString is version, else the build's (cmdline.Version).
func versionString() string { return cmdline.Version(version) }
