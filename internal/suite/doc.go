// Package suite generates the built-in AutoResearch suite: deterministic
// tabular ML research tasks on which a policy proposes pipeline programs
// (package program) that the engine (package tabular) really fits and
// scores.
//
// A suite is a pure function of its Options, chiefly the suite seed
// (DefaultSeed unless --suite-seed says otherwise). Task i gets its own seed
// by hashing (suite seed, i), so tasks never depend on each other or on
// iteration order. Training and held-out tasks each cycle through the same
// fixed list of (kind, family) pairs: regression and binary classification,
// with linear, sparse, interactions, nonlinear, outliers, imbalance
// (classification only) and irrelevant-feature structure, drawn with a few
// hundred to a few thousand rows and 4 to 64 features whose scales, offsets,
// correlations and skews differ.
//
// Each Task carries a research question, a data Card computed from the train
// split only (the agent's view; Card.Vector is its fixed-length numeric
// form), the Data with the hidden test labels, the metric (R² or ROC AUC,
// higher is better) and a Leaderboard: the scores of a fixed panel of 44
// reference pipelines of deliberately varied quality (a reference that fails
// numerically is left off; at most 4 may), best first, whose best
// program is the task's ExampleProgram. Position places a score on that
// leaderboard as (N − rank + 1)/N.
//
// Building the leaderboards takes a few thousand real fits (about a minute
// on one core for the default suite), so Loader caches a built suite on disk
// with its content hash (Suite.Hash, a sha256 over a canonical encoding of
// every task, its data and its leaderboard), verifies it on every load and
// rebuilds it when it is missing, corrupt or stale.
package suite
