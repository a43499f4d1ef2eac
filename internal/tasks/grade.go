package tasks

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
)

// FileSubmission is the name of a solution's submission in problems.
const FileSubmission = "submission.csv"

// Grade scores a submission (the contents of a solution's submission.csv)
// against the task's private answers, outside any sandbox. The submission
// must have the columns id_column,target and one row for each test id, in
// any order, with values of the metric's kind (as sample_submission.csv);
// otherwise Grade returns an *Invalid naming file submission.csv, the
// column and the line.
func (t *Task) Grade(submission []byte) (float64, error) {
	answers, err := os.ReadFile(t.Path(FileAnswers))
	if err != nil {
		return 0, fmt.Errorf("grade %s: %w", t.Spec.ID, err)
	}
	l := loader{data: map[string][]byte{FileAnswers: answers, FileSubmission: submission}}
	want := l.readTable(FileAnswers)
	if want == nil {
		return 0, fmt.Errorf("grade %s: %w", t.Spec.ID, &Invalid{Dir: t.Dir, Problems: l.problems})
	}
	s := t.Spec
	got := l.readTable(FileSubmission)
	if got == nil {
		return 0, &Invalid{Problems: l.problems}
	}
	if len(got.header) != 2 || got.header[0] != s.IDColumn || got.header[1] != s.Target {
		l.bad(FileSubmission, "", 1, "columns %s, want %s,%s", clip(fmt.Sprint(got.header)), s.IDColumn, s.Target)
		return 0, &Invalid{Problems: l.problems}
	}
	ids := l.ids(got, s.IDColumn)
	l.values(got, s, s.Target, true)
	if len(l.problems) > 0 {
		return 0, &Invalid{Problems: l.problems}
	}
	byID := make(map[string]string, len(ids))
	for i, id := range ids {
		byID[id] = got.rows[i][1]
	}
	truth := make([]string, len(want.rows))
	pred := make([]string, len(want.rows))
	for i, row := range want.rows {
		p, ok := byID[row[0]]
		if !ok {
			l.bad(FileSubmission, s.IDColumn, 0, "no row for test id %q (want one per row of %s)", clip(row[0]), FileTest)
			return 0, &Invalid{Problems: l.problems}
		}
		truth[i], pred[i] = row[1], p
		delete(byID, row[0])
	}
	if len(byID) > 0 {
		for i, id := range ids {
			if _, extra := byID[id]; extra {
				l.bad(FileSubmission, s.IDColumn, got.lines[i], "id %q is not a test id", clip(id))
				break
			}
		}
		return 0, &Invalid{Problems: l.problems}
	}
	return Score(s, truth, pred)
}

// Score computes the task's metric of predictions against true answers,
// both as written in the CSV files. The definitions are scikit-learn's:
// balanced accuracy averages recall over the labels present in truth;
// macro F1 averages F1 over the labels present in truth or predictions;
// ROC AUC counts ties as one half; log loss clips probabilities to
// [1e-15, 1-1e-15]; R² is 1 - SSE/SST (1 when SST = 0 = SSE, else 0 when
// SST = 0).
func Score(s Spec, truth, pred []string) (float64, error) {
	if len(truth) != len(pred) || len(truth) == 0 {
		return 0, fmt.Errorf("score: %d answers and %d predictions", len(truth), len(pred))
	}
	switch s.Metric {
	case Accuracy, BalancedAccuracy, MacroF1:
		return labelScore(s.Metric, truth, pred), nil
	}
	p, err := floats(pred)
	if err != nil {
		return 0, err
	}
	switch s.Metric {
	case ROCAUC, LogLoss:
		if len(s.Labels) != 2 {
			return 0, fmt.Errorf("score: %s needs 2 labels, the task has %d", s.Metric, len(s.Labels))
		}
		y := make([]bool, len(truth))
		for i, v := range truth {
			y[i] = v == s.Labels[1]
		}
		if s.Metric == ROCAUC {
			return rocAUC(y, p)
		}
		return logLoss(y, p), nil
	}
	y, err := floats(truth)
	if err != nil {
		return 0, err
	}
	switch s.Metric {
	case RMSE, MAE:
		var sum float64
		for i := range y {
			d := y[i] - p[i]
			if s.Metric == RMSE {
				sum += d * d
			} else {
				sum += math.Abs(d)
			}
		}
		if s.Metric == RMSE {
			return math.Sqrt(sum / float64(len(y))), nil
		}
		return sum / float64(len(y)), nil
	case R2:
		var mean float64
		for _, v := range y {
			mean += v
		}
		mean /= float64(len(y))
		var sse, sst float64
		for i := range y {
			sse += (y[i] - p[i]) * (y[i] - p[i])
			sst += (y[i] - mean) * (y[i] - mean)
		}
		if sst == 0 {
			if sse == 0 {
				return 1, nil
			}
			return 0, nil
		}
		return 1 - sse/sst, nil
	}
	return 0, fmt.Errorf("score: unknown metric %q", s.Metric)
}

func floats(vs []string) ([]float64, error) {
	out := make([]float64, len(vs))
	for i, v := range vs {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("score: %q is not a finite number", clip(v))
		}
		out[i] = f
	}
	return out, nil
}

func labelScore(m Metric, truth, pred []string) float64 {
	tp, trueN, predN := map[string]int{}, map[string]int{}, map[string]int{}
	right := 0
	for i := range truth {
		trueN[truth[i]]++
		predN[pred[i]]++
		if truth[i] == pred[i] {
			tp[truth[i]]++
			right++
		}
	}
	switch m {
	case Accuracy:
		return float64(right) / float64(len(truth))
	case BalancedAccuracy:
		var sum float64
		for _, l := range sortedKeys(trueN) {
			sum += float64(tp[l]) / float64(trueN[l])
		}
		return sum / float64(len(trueN))
	}
	labels := map[string]bool{}
	for l := range trueN {
		labels[l] = true
	}
	for l := range predN {
		labels[l] = true
	}
	var sum float64
	for _, l := range sortedKeys(labels) {
		// F1 = 2tp / (2tp + fp + fn) = 2tp / (true + predicted).
		if d := trueN[l] + predN[l]; d > 0 {
			sum += 2 * float64(tp[l]) / float64(d)
		}
	}
	return sum / float64(len(labels))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rocAUC is the Mann-Whitney statistic: the probability that a positive
// scores above a negative, ties counting one half.
func rocAUC(y []bool, p []float64) (float64, error) {
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	var pos, neg int
	var rankSum float64 // sum of the positives' ranks (1-based, ties averaged)
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && p[idx[j]] == p[idx[i]] {
			j++
		}
		rank := float64(i+j+1) / 2
		for k := i; k < j; k++ {
			if y[idx[k]] {
				pos++
				rankSum += rank
			} else {
				neg++
			}
		}
		i = j
	}
	if pos == 0 || neg == 0 {
		return 0, fmt.Errorf("score: ROC AUC needs both labels among the answers, got %d positive and %d negative", pos, neg)
	}
	return (rankSum - float64(pos)*float64(pos+1)/2) / (float64(pos) * float64(neg)), nil
}

func logLoss(y []bool, p []float64) float64 {
	const eps = 1e-15
	var sum float64
	for i := range y {
		q := math.Min(math.Max(p[i], eps), 1-eps)
		if y[i] {
			sum -= math.Log(q)
		} else {
			sum -= math.Log(1 - q)
		}
	}
	return sum / float64(len(y))
}
