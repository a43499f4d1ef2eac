// Package isotonic fits monotone non-decreasing maps by weighted isotonic
// least squares, the calibration behind wmrl's Online Debiasing.
//
// Given pairs (x_i, y_i) with positive weights w_i, Fit finds the
// non-decreasing values f_i that minimise sum w_i (y_i - f_i)^2. Points with
// equal x are first pooled into one point (weighted mean of y, summed weight);
// the pooled points, sorted by x, are then merged by pool adjacent violators:
// whenever a block's mean is not below the next block's, the two are replaced
// by one block at their weighted mean. The sort dominates; Fit sorts by a
// radix sort on the bit patterns of x, so a fit takes linear time.
//
// The result is a Map: knots strictly increasing in X and non-decreasing in Y.
// Each constant block keeps only its first and last x, which does not change
// any prediction. Map.Apply interpolates linearly between knots and clamps to
// the first or last knot outside the fitted range, the behaviour of
// scikit-learn's IsotonicRegression(out_of_bounds="clip"). A Map without knots
// is the identity, used before enough pairs exist.
//
// FitBinned is the binned variant kept for parity with published code: x is
// cut into equal-width bins on [0,1], each bin becomes one point at its mean
// (x, y) weighted by its count, and those points are fitted as above.
//
// Map is a plain value with JSON tags so Postgres can store it (the
// calibration map of every step) and `wmrl inspect` can print it.
package isotonic
