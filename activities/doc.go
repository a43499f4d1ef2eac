// Package activities holds the Temporal activities of a training run: one
// Activities struct whose methods do the work of a step (Generate,
// ScoreWorldModel, Execute, RecordAnchors, Calibrate, Fuse, Update, the
// held-out evaluation) and the run's bookkeeping (CreateRun, SetRunState,
// StartStep, FinishStep).
//
// Dependencies are injected once, by the worker: the Postgres store, the
// four ports of a step (internal/backend: the task source, the policy, the
// world model and the grader, whose adapters the worker picks; this package
// imports no adapter), the data directory that holds checkpoints and fused
// batches, and a logger. An error a port marks permanent
// (backend.IsPermanent) becomes ErrInvalidInput. Workflows schedule the
// activities through their typed contracts (contract.go:
// `activities.Generate.Execute(ctx, req).Result(ctx)`), never the methods, so
// they never touch the dependencies; the compiler checks each request and
// response, and Register binds each contract to its method under its
// stable name.
//
// Every method takes a Request and returns a Response, types of this
// package (the store's never cross into a workflow), small structs of ids
// and summaries: trajectories, checkpoints and maps stay in Postgres and the
// data directory and never travel through workflow history. A request that
// fails Validate is a non-retryable application error of type
// ErrInvalidInput; infrastructure errors (database, grader, file system)
// are plain errors that the retry policy retries.
//
// Per-run settings come by one of two routes (docs/design.md, "The step
// workflow"): those that pick or configure a backend from the run's
// recorded configuration (runConfig), everything else in the request.
//
// Idempotency. Every write is keyed by (run, step, group, sample) and every
// activity can run twice: Generate re-samples the same programs from the same
// seeds and the store skips rows it has; Execute returns a stored result
// instead of running again; RecordAnchors, Calibrate and Fuse recompute
// deterministic values the store accepts only when equal; Update returns
// checkpoint s+1 when it is recorded and otherwise recomputes it from
// checkpoint s (never from the live policy), so a retried Update never applies
// a gradient twice.
//
// Determinism. The outcome of a step depends only on the run seed and the
// executions' results, and the executions' results depend only on the
// program, the task and the execution seed, with one exception: a
// wall-clock deadline kill, which depends on the machine's speed and load.
// So a program whose estimated cost (tabular.EstimateCost) exceeds the run's
// sandbox budget is scored as a timeout without running, the same way on
// every machine (budget.OverBudget, in the built-in grader), and the sandbox deadline is a
// generous safety net far above what the budget admits. With that, two runs
// of the same seed give the same checkpoint hashes, crashed or not; should a
// deadline still fire, that one score is timing-dependent.
package activities
