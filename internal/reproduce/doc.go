// Package reproduce is the result model of `wmrl bench reproduce` and its
// report writers: the paper's table (execution cost, held-out score and
// cost reduction per mode), the ablation table, the goal checks, and plots.
//
// Input is one Record per (mode, seed): the run's per-step records as read
// from Postgres (training executions and their sandbox CPU and wall seconds,
// world-model calls, anchor groups, ρ, the calibration bias before and after
// the map, and the held-out evaluations, counted apart from training).
// Build turns them into Results, the content of results.json; Summarise
// aggregates the seeds of each mode (mean and sample standard deviation) and
// evaluates the goals from the numbers; WriteAll writes results.json,
// results.md and the PNG plots to a directory.
//
// BuildFrontier reads several such results, one labelled point each (the
// seeds of one mode of one results.json), for `wmrl bench frontier`: held-out
// score against training sandbox CPU, each point paired by seed with a grpo
// and an anchor reference; WriteFrontier writes frontier.json, frontier.md
// and frontier.png.
//
// The package is pure apart from writing those files: the caller supplies
// the header (command, date, machine), so the same records always give the
// same report.
package reproduce
