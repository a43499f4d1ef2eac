// Package program is the solution language of the built-in suite: a small
// pipeline of preprocessing steps followed by exactly one model.
//
// The text form separates elements with '|'; each element is an operation
// name followed by key=value parameters, for example
//
//	standardize | clip z=3 | poly degree=2 | select k=8 | gbt trees=100 depth=3 lr=0.1
//
// Grammar (at most MaxSteps steps; parameters in any order, each at most
// once, omitted ones take their defaults):
//
//	program = { step "|" } model
//	step    = "standardize" | "log1p" | "clip" ["z=" num] | "poly" ["degree=" int]
//	        | "select" ["k=" int] | "pca" ["k=" int]
//	model   = "mean" | "ridge" ["alpha=" num] | "logistic" ["alpha=" num] ["iters=" int]
//	        | "knn" ["k=" int] | "gbt" ["trees=" int] ["depth=" int] ["lr=" num]
//	        | "rff" ["features=" int] ["gamma=" num] ["alpha=" num]
//
// What the operations do (package tabular runs them, fitting every step on
// the train split only):
//
//	standardize        centre and scale each feature to unit variance
//	log1p              sign(x)·log(1+|x|) of each feature
//	clip z             clamp each feature to median ± z robust SDs (1.4826·MAD)
//	poly degree        all products of up to degree features (2 or 3)
//	select k           keep the k features most correlated with the target
//	pca k              project on the top k principal components
//	mean               predict the train mean (base rate for classification)
//	ridge alpha        L2-penalised least squares (regression only)
//	logistic alpha iters  L2-penalised logistic regression by Newton steps (classification only)
//	knn k              average target of the k nearest train rows
//	gbt trees depth lr gradient-boosted regression trees
//	rff features gamma alpha  random Fourier features (kernel exp(−gamma/d·‖x−y‖²)) then ridge
//
// [Parse] reports errors with the 1-based column of the offending word.
// Whether a model suits the task's kind (ridge on a classification task) is
// not the parser's business: the engine reports it at run time.
//
// A second form serves autoregressive policies: a finite vocabulary in which
// every operation name and every key=value pair drawn from a small grid is
// one token ("gbt.trees=100"), framed by BOS and EOS, with every parameter
// spelled out in canonical order. [Legal] is the grammar mask, [Decode] and
// [Encode] convert between tokens and programs. Every program built from
// tokens is valid; programs with off-grid values have no token form.
package program
