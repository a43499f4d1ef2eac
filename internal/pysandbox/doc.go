// Package pysandbox runs agent-written Python solutions of real tasks
// (package tasks) in throw-away Docker containers of the wmrl-python image
// (deploy/pyimage.sh), and grades what they write on the paper's ladder.
//
// It is a package of its own, not a second implementation of
// sandbox.Sandbox: that interface runs the built-in executor on an encoded
// job and returns an executor.Result, while a Python solution is arbitrary
// code that reads files and leaves a file behind. What the two share (the
// engine connection, the locked-down container, creation, kill, removal
// retried in the background, the labels that let a sweep find leaked
// containers, the capped output) is package dockerrun's.
//
// # One execution
//
// A solution runs as the task contract says (tasks/doc.go): `python3
// solution.py` with the task's public/ at /data/public, description.md and
// task.json (the task's Spec as JSON) at /data, all read-only, and a
// writable /work, its working directory, where it writes submission.csv.
// The container is made for that one execution:
//
//   - no network (network mode none, networking disabled); read-only root
//     file system; /work and /tmp are size-limited tmpfs mounts, noexec,
//     nosuid and nodev (a dropped binary cannot be executed, nor loaded by
//     ld.so); all capabilities dropped, no-new-privileges, user 65534, core
//     dumps off;
//   - the only host paths mounted are the task's public/ and a staging
//     directory made for the execution (description.md, task.json and the
//     solution, copies, read-only) that is removed afterwards; private/ is
//     never mounted;
//   - memory: Limits.MemoryBytes for the cgroup, swap equal (none); the
//     tmpfs mounts are charged to it too. CPUs: a CFS quota (NanoCPUs),
//     and OMP/OpenBLAS/MKL thread counts of ceil(CPUs). Processes and
//     threads: PidsLimit;
//   - wall time: Limits.Deadline from the solution's start (not the
//     container's), measured here; at the deadline the container is killed;
//   - output: stdout and stderr are drained and of each the first and the
//     last OutputBytes/2 bytes kept (512 KiB + 512 KiB by default;
//     dockerrun.HeadTail: the memory held is bounded whatever the solution
//     writes, and the bytes cut between head and tail are counted); the
//     submission is copied out only if it is a regular file of at most
//     SubmissionBytes.
//
// The container's first process is /bin/sleep, a keeper that holds the
// tmpfs mounts alive; the solution runs beside it through an exec, so that
// /work/submission.csv can still be read out after the solution ends (a
// tmpfs dies with the container, and the engine cannot copy from one: the
// reader below does) and its exit code comes from the engine, which the
// solution cannot forge. The exec first compiles
// the source (the cheap equivalent of `python3 -m py_compile`) and reports a
// syntax error with a token the solution never sees, then replaces itself
// (execv) with `python3 /code/solution.py`. Whatever the solution leaves
// running (a background process, a fork bomb) dies when the container is
// killed and removed, on every path, also when the caller's context is
// cancelled. Containers carry dockerrun.LabelSandbox, LabelOwner and
// LabelDeadline, and the keeper exits on its own before the deadline
// label's time, so a worker that crashes leaks only stopped containers,
// which Sweep (and sandbox.Docker.Cleanup) remove.
//
// # The ladder
//
// Grade classifies the execution (Status, Reward):
//
//	malformed    no code: empty or only blanks, or too large        0
//	syntax_err   the source does not compile                        0
//	runtime_err  nonzero exit, killed at the deadline, or killed    0.1
//	             for memory (Failure says which)
//	ran_no_sub   exited 0 but wrote no submission.csv, or one that  0.2
//	             tasks.Grade refuses (wrong rows, columns, values)
//	valid        scored by tasks.Grade                              0.5 + 0.5·position
//
// position is the metric's place on the task's leaderboard.csv as the
// built-in suite computes it (suite.PositionIn), with the metric negated
// for a task whose direction is minimize; an empty leaderboard gives 0.
//
// A failure of the sandbox itself (engine unreachable, image missing, a
// stream cut short) is an error, never a status: the caller retries.
//
// # Feedback and request_info
//
// Result.Feedback (Grade.Feedback, FeedbackOf) is the agent's observation
// of the execution, as the reference's sandbox answers: the paper's status
// and what happened, the script's stdout and stderr (each's size, its
// first 1 KiB and last 3 KiB, the bytes cut between them counted: a
// traceback is the end of stderr), and for a valid submission its metric
// and leaderboard position; at most about 8 KiB. Detail stays the
// one-line summary the store keeps. A GradeItem whose Action is
// backend.ActionRequestInfo runs nothing: InfoGrade answers it from the
// task's public files (realtasks.Describe), status backend.StatusInfo,
// reward 0.
//
// The submission is read out by a second exec, the reader, started before
// the solution (so that a fork bomb the solution leaves cannot keep it from
// starting) and waiting on its stdin: told to go, it kills whatever the
// solution left running and writes the file on its stdout. A solution
// that kills every process it can (kill -1) kills the reader too, and
// gets ran_no_sub.
//
// # The reference panel
//
// RunPanel runs the panel of deploy/pytasks/panel (LoadPanel) on a task
// under the task's own limits and returns its leaderboard;
// WriteLeaderboard writes it into a prepared task directory (see package
// tasks).
//
// # Tests
//
// The tests run against the real Docker engine and the newest
// wmrl-python image (or $WMRL_PYTHON_IMAGE), and skip, saying why, when
// there is neither (build it with deploy/pyimage.sh):
//
//	go test ./internal/pysandbox/
//	go test ./internal/pysandbox/ -run '^$' -bench Grade -benchtime 5x
//	WMRL_PANEL_TEST=1 go test ./internal/pysandbox/ -run TestPanelAllTasks -v -timeout 60m
//
// The panel tests prepare real tasks with deploy/pytasks/prepare.py and
// skip when the host's Python lacks what it needs (deploy/pytasks.sh
// install).
package pysandbox
