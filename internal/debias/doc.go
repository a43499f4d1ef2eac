// Package debias is the online debiaser of WMRL: it learns, from anchor pairs
// (x = world-model score, y = real-execution score), a monotone non-decreasing
// map f̂ and replaces every world-model score r_wm by f̂(r_wm).
//
// The map is an isotonic least-squares fit (pool adjacent violators, package
// isotonic) or its binned variant, refitted at each training step on the pair
// window: every pair of the run, or only the most recent Window pairs (a FIFO
// cap). Until MinPairs pairs exist the map is the identity (no knots), so an
// early step never trusts a fit made from a handful of points.
//
// Why a monotone, non-affine map: GRPO standardises rewards within a group,
// which cancels any affine distortion of the world model; what is left is the
// non-affine part, and a monotone map corrects it without ever reordering the
// trajectories of a group.
//
// Diagnostics: Bias measures the within-group centred residual, the root mean
// square over pairs of (x - mean_g x) - (y - mean_g y), where g is the pair's
// group, x the raw world-model score (before) or its calibrated value (after)
// and y the real score. This is the part of the error that survives group
// standardisation. MeanBias is the plain mean of x - y before and after.
//
// Everything here is pure and deterministic: no I/O, no clock, no map
// iteration where order matters. Debiaser, the in-process state, is a plain
// JSON-serialisable struct.
package debias
