// Package worldmodel is the frozen world model of the built-in suite: it
// predicts a program's execution score r_wm in [0, 1] from the task's data
// card and the program, without running it.
//
// # Features
//
// Features(card, program) is a fixed-length vector computed from the card
// vector (suite.Card.Vector) and the program text alone: the card entries;
// the model family (one-hot) and its hyperparameters on a log scale (with
// squares, so that an optimum in the middle of a range can be expressed);
// the preprocessing steps present and their parameters; the feature width
// the steps leave for the model and whether it exceeds the engine's size
// limits (poly on many features); and products of card statistics with
// program choices (task kind × family, rows × family, k relative to rows,
// polynomial degree × feature count, curvature and interaction hints ×
// family). A prediction costs a few microseconds; an execution tens to
// hundreds of milliseconds.
//
// That layout is FeaturesV1, the stored model's. FeaturesV2 appends terms
// that put each family's hyperparameters against the card (the ridge
// penalty against rows, input scale and a noise proxy; the boosting budget
// and tree depth against rows, noise and curvature; k against noise and
// width; ...), so that a hyperparameter's best value can move from task to
// task (v2.go). A model records its set (Model.Features, absent for v1);
// default-v2.json is the stored v2 model, fitted on default.json's
// executions. FitWeighted and Refit's run-example weights let a refresh
// count recent executions more.
//
// # Model
//
// A ridge regression on the standardised features, fitted in the space of a
// link and read back through its inverse (Model.Link). The stored model uses
// the log link: it regresses log(score) and predicts min(1, exp(z)), a
// multiplicative model in which each choice scales the score by a factor.
// Parameters are plain JSON (the artefact, sealed by a sha256 checksum and
// tied to the feature layout by the feature names); Load refuses corrupted,
// edited or stale artefacts.
//
// # Training
//
// Fit logs executions of random valid programs (uniform legal tokens of the
// program grammar, seeds derived from the fit seed, task and sample) on the
// suite's training tasks only, executed in-process by executor.Run, and fits
// the regression. The same suite and configuration give the same artefact
// byte for byte; default.json, embedded and returned by Default, is rebuilt
// by `wmrl worldmodel fit --out internal/worldmodel/default.json`.
//
// # Why it is biased
//
// The model is useful but imperfect in the way learned world models are,
// from modelling choices rather than any added offset:
//
//   - Least squares in log space estimates the conditional geometric mean
//     of the score, which lies below its arithmetic mean whenever the
//     outcome varies given the features (Jensen's inequality). Where a
//     program may run or fail (0.1 on the ladder) the spread in log space is
//     large, so valid-looking programs are underestimated most: the mean
//     bias is negative and the calibration curve is non-affine.
//   - The ridge penalty pulls every weight toward zero, hence every
//     prediction toward the mean log-score, compressing the curve's slope
//     in the middle and stretching relative errors at the ends.
//   - The features are limited and hand-made: the model never sees the data
//     itself, only the card's summaries, so how well a pipeline fits a
//     task's particular structure is guessed, not known.
//   - It is trained on training tasks only and evaluated on held-out tasks.
//
// `wmrl worldmodel eval` measures the result on held-out tasks: the
// within-group (per task) Spearman correlation with real scores, the mean
// bias mean(r_wm − r_env) and the binned calibration curve.
package worldmodel
