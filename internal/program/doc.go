// Package program is the solution language of the built-in suite: a small
// pipeline of preprocessing steps followed by exactly one model.
//
// The text form separates elements with '|'; each element is an operation
// name followed by key=value parameters, for example
//
//	standardize | clip z=3 | poly degree=2 | select k=8 | gbt trees=100 depth=3 lr=0.1
//
// Omitted parameters take their defaults. [Parse] reports errors with the
// 1-based column of the offending word. Whether a model suits the task's kind
// (a classifier on a regression task) is not the parser's business: the
// engine in package tabular reports it at run time.
//
// A second form serves autoregressive policies: a finite vocabulary in which
// every operation name and every key=value pair drawn from a small grid is
// one token, framed by BOS and EOS. [Legal] is the grammar mask, [Decode] and
// [Encode] convert between tokens and programs. Every program built from
// tokens is valid; programs with off-grid values have no token form.
package program
