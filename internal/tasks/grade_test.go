package tasks

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestGrade(t *testing.T) {
	task, err := Load(filepath.Join("testdata", "toy-binary"))
	if err != nil {
		t.Fatal(err)
	}
	// The answers: id 3 is no, id 4 is yes.
	tests := []struct {
		name string
		give string
		want float64
		err  string
	}{
		{"perfect", "id,label\n3,0.1\n4,0.9\n", 1, ""},
		{"any order", "id,label\n4,0.9\n3,0.1\n", 1, ""},
		{"reversed", "id,label\n3,0.9\n4,0.1\n", 0, ""},
		{"constant", "id,label\n3,0.5\n4,0.5\n", 0.5, ""},
		{"missing id", "id,label\n3,0.5\n", 0, `submission.csv: id: no row for test id "4"`},
		{"extra id", "id,label\n3,0.5\n4,0.5\n9,0.5\n", 0, `submission.csv: id: line 4: id "9" is not a test id`},
		{"repeated id", "id,label\n3,0.5\n3,0.5\n4,0.5\n", 0, `submission.csv: id: line 3: id "3" repeated`},
		{"columns", "id,prob\n3,0.5\n4,0.5\n", 0, "submission.csv: line 1: columns [id prob], want id,label"},
		{"label for a probability", "id,label\n3,no\n4,yes\n", 0, `submission.csv: label: line 2: "no": want the probability of "yes"`},
		{"NaN", "id,label\n3,NaN\n4,0.5\n", 0, `submission.csv: label: line 2: "NaN"`},
		{"empty", "", 0, "submission.csv: line 1: empty"},
		{"binary", "\x00\xff", 0, "submission.csv: not UTF-8"},
	}
	for _, tt := range tests {
		got, err := task.Grade([]byte(tt.give))
		var inv *Invalid
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%s: Grade = %v, %v; want %v", tt.name, got, err, tt.want)
		case tt.err != "" && (!errors.As(err, &inv) || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: Grade = %v, %v; want an *Invalid with %q", tt.name, got, err, tt.err)
		}
	}
}

func TestScore(t *testing.T) {
	cls := Spec{Kind: Classification, Labels: []string{"a", "b", "c"}}
	bin := Spec{Kind: Classification, Labels: []string{"no", "yes"}}
	reg := Spec{Kind: Regression}
	with := func(s Spec, m Metric) Spec { s.Metric = m; return s }
	tests := []struct {
		spec        Spec
		truth, pred string
		want        float64
	}{
		{with(cls, Accuracy), "a a b c", "a b b c", 0.75},
		// Recall: a 1/2, b 1, c 1.
		{with(cls, BalancedAccuracy), "a a b c", "a b b c", (0.5 + 1 + 1) / 3},
		// F1: a 2/3, b 2/3, c 1.
		{with(cls, MacroF1), "a a b c", "a b b c", (2.0/3 + 2.0/3 + 1) / 3},
		// A label predicted but never true counts, with F1 0.
		{with(cls, MacroF1), "a a", "a c", (2.0/3 + 0) / 2},
		{with(bin, ROCAUC), "no yes no yes", "0.1 0.4 0.45 0.8", 0.75},
		{with(bin, ROCAUC), "no yes", "0.5 0.5", 0.5},
		{with(bin, LogLoss), "no yes", "0.5 0.5", math.Ln2},
		{with(bin, LogLoss), "no yes", "0 1", -math.Log(1 - 1e-15)},
		{with(reg, RMSE), "1 2 3", "1 2 6", math.Sqrt(3)},
		{with(reg, MAE), "1 2 3", "2 2 1", 1},
		{with(reg, R2), "1 2 3", "1 2 3", 1},
		{with(reg, R2), "1 2 3", "2 2 2", 0},
		{with(reg, R2), "2 2", "2 2", 1},
		{with(reg, R2), "2 2", "2 3", 0},
	}
	for _, tt := range tests {
		got, err := Score(tt.spec, strings.Fields(tt.truth), strings.Fields(tt.pred))
		if err != nil || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s(%s; %s) = %v, %v; want %v", tt.spec.Metric, tt.truth, tt.pred, got, err, tt.want)
		}
	}
	if _, err := Score(with(bin, ROCAUC), []string{"yes", "yes"}, []string{"0.1", "0.2"}); err == nil {
		t.Error("ROC AUC of one label: no error")
	}
}

// TestScoreAgreesWithSklearn computes every metric on random data here and
// with scikit-learn.
func TestScoreAgreesWithSklearn(t *testing.T) {
	needPrepare(t)
	r := rand.New(rand.NewPCG(1, 2))
	type input struct {
		Metric string   `json:"metric"`
		Truth  []string `json:"truth"`
		Pred   []string `json:"pred"`
	}
	labels := []string{"a", "b", "c", "d"}
	var inputs []input
	var specs []Spec
	for round := 0; round < 5; round++ {
		n := 20 + r.IntN(50)
		for _, m := range []Metric{Accuracy, BalancedAccuracy, MacroF1, ROCAUC, LogLoss, RMSE, MAE, R2} {
			in := input{Metric: string(m)}
			s := Spec{Metric: m, Labels: labels}
			for i := 0; i < n; i++ {
				switch {
				case m == Accuracy || m == BalancedAccuracy || m == MacroF1:
					in.Truth = append(in.Truth, labels[r.IntN(4)])
					in.Pred = append(in.Pred, labels[r.IntN(4)])
				case m.Probability():
					s.Labels = []string{"no", "yes"}
					y := r.IntN(2)
					in.Truth = append(in.Truth, s.Labels[y])
					// Rounded, so that ties occur.
					in.Pred = append(in.Pred, strconv.FormatFloat(math.Round((0.3*float64(y)+0.7*r.Float64())*20)/20, 'g', -1, 64))
				default:
					y := r.NormFloat64() * 3
					in.Truth = append(in.Truth, strconv.FormatFloat(y, 'g', -1, 64))
					in.Pred = append(in.Pred, strconv.FormatFloat(y+r.NormFloat64(), 'g', -1, 64))
				}
			}
			inputs = append(inputs, in)
			specs = append(specs, s)
		}
	}
	b, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	const script = `
import json, sys
import numpy as np
from sklearn import metrics as M
out = []
for x in json.load(sys.stdin):
    m, t, p = x["metric"], x["truth"], x["pred"]
    if m == "accuracy": v = M.accuracy_score(t, p)
    elif m == "balanced_accuracy": v = M.balanced_accuracy_score(t, p)
    elif m == "macro_f1": v = M.f1_score(t, p, average="macro", zero_division=0)
    elif m == "roc_auc": v = M.roc_auc_score([s == "yes" for s in t], [float(s) for s in p])
    elif m == "log_loss": v = M.log_loss([s == "yes" for s in t], np.clip([float(s) for s in p], 1e-15, 1 - 1e-15), labels=[False, True])
    else:
        t, p = [float(s) for s in t], [float(s) for s in p]
        v = {"rmse": lambda: M.mean_squared_error(t, p) ** 0.5, "mae": lambda: M.mean_absolute_error(t, p), "r2": lambda: M.r2_score(t, p)}[m]()
    out.append(float(v))
print(json.dumps(out))
`
	cmd := exec.Command(python, "-I", "-W", "ignore", "-c", script)
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sklearn: %v", err)
	}
	var want []float64
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(inputs) {
		t.Fatalf("sklearn printed %q: %v", out, err)
	}
	for i, in := range inputs {
		got, err := Score(specs[i], in.Truth, in.Pred)
		if err != nil || math.Abs(got-want[i]) > 1e-9*math.Max(1, math.Abs(want[i])) {
			t.Errorf("%s on %d rows: %v, %v; sklearn %v", in.Metric, len(in.Truth), got, err, want[i])
		}
	}
}
