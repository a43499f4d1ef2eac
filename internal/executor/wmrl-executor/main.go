// Command wmrl-executor evaluates one job of the built-in suite inside a
// sandbox: it applies the limits given by its flags to itself, reads one
// encoded executor.Job from stdin, runs it and writes one JSON result line to
// stdout, exiting 0. With -deadline it reports a timeout once the evaluation
// has run that long since it read its job (executor.Reporter). A crash or a
// memory kill ends it with another status, which the sandbox classifies;
// exit 3 means it refused its flags or job.
//
// Build it static: CGO_ENABLED=0 go build -o bin/wmrl-executor ./internal/executor/wmrl-executor
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/wmrl/wmrl/internal/executor"
)

func main() {
	os.Exit(run())
}

func run() int {
	setup, err := executor.ParseSetup("wmrl-executor", os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "wmrl-executor:", err)
		return executor.ExitRejected
	}
	if err := setup.Apply(); err != nil {
		fmt.Fprintln(os.Stderr, "wmrl-executor:", err)
		return executor.ExitRejected
	}
	job, err := executor.DecodeJob(bufio.NewReader(os.Stdin))
	if err != nil {
		fmt.Fprintln(os.Stderr, "wmrl-executor:", err)
		return executor.ExitRejected
	}
	rep := executor.NewReporter(os.Stdout, setup.Deadline, os.Exit)
	ctx, cancel := rep.Context(context.Background())
	defer cancel()
	res, err := executor.Run(ctx, job)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wmrl-executor:", err)
		return executor.ExitRejected
	}
	if err := rep.Report(res); err != nil {
		fmt.Fprintln(os.Stderr, "wmrl-executor:", err)
		return 1
	}
	return 0
}
