// Package activities holds the Temporal activities of a training run: one
// Activities struct whose methods do the work of a step (Generate,
// ScoreWorldModel, Execute, RecordAnchors, Calibrate, Fuse, Update, the
// held-out evaluation) and the run's bookkeeping (CreateRun, SetRunState,
// StartStep, FinishStep).
//
// Dependencies are injected once, by the worker: the Postgres store, the
// suite, the world model, the sandbox, the data directory that holds
// checkpoints and fused batches, and a logger. Workflows call the methods
// through a nil *Activities (`workflow.ExecuteActivity(ctx, a.Generate,
// req)`), so they never touch the dependencies.
//
// Every method takes a Request and returns a Response, small structs of ids
// and summaries: trajectories, checkpoints and maps stay in Postgres and the
// data directory and never travel through workflow history. A request that
// fails Validate is a non-retryable application error of type
// ErrInvalidInput; infrastructure errors (database, sandbox, file system)
// are plain errors that the retry policy retries.
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
// executions' results. Wall-clock deadline kills are the one thing that is
// not reproducible across machines and loads, so the presets give the
// sandbox a deadline far above the built-in suite's execution times: a
// deadline only ends a program that is really stuck. With that, two runs of
// the same seed give the same checkpoint hashes, crashed or not.
package activities
