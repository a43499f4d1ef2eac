// Package executor evaluates one solution of the built-in suite: it parses the
// program, fits the pipeline on the task's train split, predicts the hidden
// test split, scores the predictions with the task's metric and places the
// score on the task's leaderboard.
//
// A Job is everything an evaluation needs, serialised compactly (gob; the
// matrices travel as gonum's binary encoding) so that it can cross a process
// or container boundary on stdin. Run is the pure evaluation; the
// wmrl-executor binary wraps it for the sandboxes and prints one JSON Result
// line.
//
// Reward is the reward ladder (docs/design.md, "Reward ladder"), the one
// place where a status and a leaderboard position become a score: invalid
// program 0.0; runtime error, timeout or memory kill 0.1; ran but produced no
// valid output 0.2; valid 0.5 + 0.5·position.
package executor
