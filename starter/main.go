// Command wmrl is the command line of wmrl: durable training runs on
// Temporal (run, status, list, pause, resume, stop, set-anchor-fraction,
// inspect, resume-from), the database schema (migrate), offline calibration
// audits, the built-in suite and its world model.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "wmrl:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "wmrl",
		Short:         "World-Model RL: GRPO post-training with a world model and an anchor stream",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Each subcommand lives in its own file and is added here.
	root.AddCommand(newCalibrateCmd())
	root.AddCommand(newSuiteCmd())
	root.AddCommand(newExecCmd())
	root.AddCommand(newWorldModelCmd())
	root.AddCommand(newMigrateCmd())
	root.AddCommand(newRunCmd())
	root.AddCommand(newStatusCmd())
	root.AddCommand(newListCmd())
	root.AddCommand(newSignalCmds()...)
	root.AddCommand(newSetAnchorFractionCmd())
	root.AddCommand(newInspectCmd())
	root.AddCommand(newResumeFromCmd())
	root.AddCommand(newTerminateCmd())
	root.AddCommand(newBenchCmd())
	return root
}
