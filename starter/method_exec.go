package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/sandbox"
	"github.com/wmrl/wmrl/internal/suite"
)

// execReport is wmrl exec --json.
type execReport struct {
	Task        string  `json:"task"`
	Program     string  `json:"program"`
	Sandbox     string  `json:"sandbox"`
	Status      string  `json:"status"`
	Score       float64 `json:"score"`
	Metric      float64 `json:"metric"`
	MetricName  string  `json:"metric_name"`
	Position    float64 `json:"position"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	Detail      string  `json:"detail,omitempty"`
}

func newExecCmd() *cobra.Command { return newExecCmdWith(suite.DefaultOptions) }

func newExecCmdWith(options suiteOptionsFunc) *cobra.Command {
	var (
		taskID, text, kind, binary string
		suiteSeed, seed            uint64
		limits                     = sandbox.DefaultLimits()
		asJSON                     bool
	)
	cmd := &cobra.Command{
		Use:   "exec --task TASK --program PROGRAM [--sandbox docker|process] [--json]",
		Short: "Execute one program on a suite task in a sandbox and print its reward",
		Long: `exec really runs a pipeline program on a task of the built-in suite, inside
a sandbox, and prints what training would record: the status, the reward
(the ladder: invalid program 0.0; runtime error, timeout or memory kill 0.1;
no valid output 0.2; valid 0.5 + 0.5·leaderboard position), the task's metric
on its hidden test split, and the CPU and wall seconds the sandbox measured.

--sandbox docker (the default) runs it in a throw-away container of a
FROM-scratch image built locally from the executor binary (no pull);
--sandbox process runs it as a limited child process. The executor binary is
found with --executor, $WMRL_EXECUTOR, next to wmrl, or on the PATH.

A failing program is a result, not an error; the command fails only when the
sandbox itself does.

--json prints one object: task, program, sandbox, status, score, metric,
metric_name, position, cpu_seconds, wall_seconds, detail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if taskID == "" || text == "" {
				return usagef("--task and --program are required")
			}
			if len(text) > maxProgramBytes {
				return usagef("--program: %d bytes, want at most %d", len(text), maxProgramBytes)
			}
			if err := checkTaskID("--task", taskID); err != nil {
				return err
			}
			if err := limits.Check(); err != nil {
				return &usageError{Err: fmt.Errorf("sandbox limits (--memory, --cpus, --pids, --deadline): %w", err)}
			}
			path, err := sandbox.FindExecutor(binary)
			if err != nil {
				return err
			}
			s, err := loadSuiteForCmd(cmd, options(suiteSeed))
			if err != nil {
				return err
			}
			t, err := s.Task(taskID)
			if err != nil {
				return err
			}
			req, err := sandbox.NewRequest(executor.NewJob(t, text, seed), limits)
			if err != nil {
				return err
			}
			sb, closeSandbox, err := sandbox.Open(cmd.Context(), kind, path)
			if err != nil {
				return err
			}
			defer closeSandbox()
			res, err := sb.Execute(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("%s sandbox: %w", kind, err)
			}
			rep := execReport{
				Task: t.ID, Program: text, Sandbox: kind, Status: string(res.Status), Score: res.Score,
				Metric: res.Metric, MetricName: t.Metric, Position: res.Position,
				CPUSeconds: res.CPUSeconds, WallSeconds: res.WallSeconds, Detail: res.Detail,
			}
			return writeExec(cmd.OutOrStdout(), rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&taskID, "task", "", "task id (see wmrl suite list)")
	f.StringVar(&text, "program", "", "pipeline program, e.g. 'standardize | ridge alpha=1'")
	f.StringVar(&kind, "sandbox", sandbox.KindDocker, "sandbox: docker or process")
	f.StringVar(&binary, "executor", "", "path of the wmrl-executor binary")
	f.Uint64Var(&seed, "seed", 1, "seed of the pipeline's random choices")
	f.Int64Var(&limits.MemoryBytes, "memory", limits.MemoryBytes, "memory limit in bytes")
	f.Float64Var(&limits.CPUs, "cpus", limits.CPUs, "CPU limit in cores")
	f.Int64Var(&limits.Pids, "pids", limits.Pids, "process and thread limit (docker)")
	f.DurationVar(&limits.Deadline, "deadline", limits.Deadline, "wall-time limit")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	addSuiteSeedFlag(cmd, &suiteSeed)
	return cmd
}

// maxProgramBytes bounds --program: a pipeline is a few words.
const maxProgramBytes = 64 << 10

func writeExec(w io.Writer, r execReport, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	fmt.Fprintf(w, "task      %s (%s sandbox)\n", r.Task, r.Sandbox)
	fmt.Fprintf(w, "program   %s\n", r.Program)
	fmt.Fprintf(w, "status    %s\n", r.Status)
	fmt.Fprintf(w, "score     %.4f\n", r.Score)
	if r.Status == string(executor.StatusOK) {
		fmt.Fprintf(w, "metric    %s %.4f, leaderboard position %.3f\n", r.MetricName, r.Metric, r.Position)
	}
	if r.Detail != "" {
		fmt.Fprintf(w, "detail    %s\n", r.Detail)
	}
	_, err := fmt.Fprintf(w, "time      %.3f s cpu, %.3f s wall\n", r.CPUSeconds, r.WallSeconds)
	return err
}
