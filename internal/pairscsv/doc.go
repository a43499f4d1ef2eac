// Package pairscsv reads the CSV files of wmrl calibrate: anchor pairs
// (columns wm and env, in any order, and an optional group) and one-column
// files of world-model scores (column wm) to map through a calibration.
//
// The reader is strict, because a calibration audit built on a silently
// misread file is worse than none: unknown or duplicate columns are rejected,
// every value must be a finite number in [0,1], a group name must not be
// empty, and a file without data rows is an error. Every error is an *Error
// naming the line (1-based; the header is line 1) and, for a bad value, the
// column, for example `line 7: env: "abc" is not a number`. Blank lines are
// skipped, a trailing newline and CRLF line ends are fine, quoted fields
// follow RFC 4180, and a leading UTF-8 byte-order mark is ignored.
//
// The input is bounded: a line of at most MaxLineBytes, at most MaxRows data
// rows and MaxBytes in all. Past a bound the read stops with an *Error naming
// the line, so that /dev/zero or a huge binary fails at once instead of
// filling memory.
package pairscsv
