// Package store is wmrl's Postgres persistence: runs, steps, trajectories,
// anchor pairs, calibration maps, fusion states, checkpoints and held-out
// evaluations. Activities write here and pass keys through workflows, so
// workflow histories stay small.
//
// Every write is idempotent by its key, because Temporal retries activities:
//
//   - Deterministic data (programs, world-model scores, anchor flags, anchor
//     pairs, calibration maps, fusion states, checkpoints, evaluations) is
//     inserted once. Writing a key again with the same values is a no-op;
//     writing it with different values fails with an error wrapping
//     ErrConflict that names the key, since the same seeds must give the
//     same data and a difference is a bug that must not pass silently.
//   - Measured data (the result of a real execution: status, score, CPU and
//     wall time) is first-write-wins: a retried execution cannot reproduce
//     its timings, so a later write of the same key is ignored and the
//     stored result is returned for the caller to use.
//   - Mutable state (a run's state, a running step) is updated in place;
//     a completed step is final.
//
// A batch travels as one array per column (unnest in SQL), is merged with
// INSERT ... ON CONFLICT DO NOTHING (or an UPDATE of unset columns), then
// compared with the stored rows, all in one transaction. Migrate applies the embedded migrations (package migrations)
// under a Postgres advisory lock, so many processes may call it at once.
package store
