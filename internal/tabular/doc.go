// Package tabular is the execution engine of the built-in suite: it fits a
// pipeline program (package program) on a dataset's train split and predicts
// its test split, and scores predictions.
//
// Every preprocessing step is fitted on the train rows only and then applied
// unchanged to the test rows, so a test row's prediction never depends on
// other test rows. Models are implemented directly on gonum: ridge by a
// Cholesky solve of the normal equations, logistic regression by Newton
// (IRLS) iterations, k-nearest neighbours by brute force, gradient-boosted
// trees with exact level-wise split finding, and random Fourier features
// followed by ridge. Their cost grows with their size (trees × depth,
// features, iterations), as a real execution's does.
//
// Errors that are the solution's fault wrap ErrInvalidProgram, ErrWrongKind,
// ErrResources or ErrNumerical (see IsSolutionError); anything else is a bug
// or a cancelled context. Non-finite predictions are returned as they are;
// Metric refuses them.
package tabular
