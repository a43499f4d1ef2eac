package tabular

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Metric scores predictions against true targets; higher is better.
// Regression: R² = 1 − SS_res/SS_tot (negative when worse than predicting
// the test mean). Classification: ROC AUC of the predicted scores, tied
// scores counted by average rank. It fails on a length mismatch, on
// non-finite predictions (ErrNonFinite), on constant regression targets and
// on classification targets without both classes.
func Metric(kind Kind, yTrue, pred []float64) (float64, error) {
	if len(yTrue) != len(pred) {
		return 0, fmt.Errorf("metric: %d targets, %d predictions", len(yTrue), len(pred))
	}
	if len(yTrue) == 0 {
		return 0, fmt.Errorf("metric: no rows")
	}
	if !allFinite(pred) {
		return 0, fmt.Errorf("metric: %w", ErrNonFinite)
	}
	switch kind {
	case Regression:
		return r2(yTrue, pred)
	case Classification:
		return auc(yTrue, pred)
	}
	return 0, fmt.Errorf("metric: unknown kind %q", kind)
}

func r2(y, pred []float64) (float64, error) {
	var m float64
	for _, v := range y {
		m += v
	}
	m /= float64(len(y))
	var res, tot float64
	for i, v := range y {
		res += (v - pred[i]) * (v - pred[i])
		tot += (v - m) * (v - m)
	}
	if !(tot > 0) {
		return 0, fmt.Errorf("metric: constant targets, R² undefined")
	}
	return 1 - res/tot, nil
}

func auc(y, pred []float64) (float64, error) {
	n := len(y)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(pred[a], pred[b]) })
	var pos, neg int
	var rankSum float64
	for start := 0; start < n; {
		end := start + 1
		for end < n && pred[idx[end]] == pred[idx[start]] {
			end++
		}
		avg := float64(start+end+1) / 2 // mean of 1-based ranks start+1..end
		for _, i := range idx[start:end] {
			switch y[i] {
			case 1:
				pos++
				rankSum += avg
			case 0:
				neg++
			default:
				return 0, fmt.Errorf("metric: classification label %v is not 0 or 1", y[i])
			}
		}
		start = end
	}
	if pos == 0 || neg == 0 {
		return 0, fmt.Errorf("metric: AUC needs both classes, got %d positive and %d negative", pos, neg)
	}
	p := float64(pos)
	v := (rankSum - p*(p+1)/2) / (p * float64(neg))
	return math.Max(0, math.Min(1, v)), nil
}
