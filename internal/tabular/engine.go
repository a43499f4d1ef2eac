package tabular

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/wmrl/wmrl/internal/program"
)

// Check reports whether d is a well-formed dataset: both splits non-empty
// with the same number of columns, targets matching the rows (YTest may be
// nil, as it is where test labels are hidden), 0/1 train labels for
// classification.
func (d *Dataset) Check() error {
	if d == nil || d.XTrain == nil || d.XTest == nil {
		return fmt.Errorf("missing matrices")
	}
	if d.Kind != Regression && d.Kind != Classification {
		return fmt.Errorf("unknown kind %q", d.Kind)
	}
	rtr, ctr := d.XTrain.Dims()
	rte, cte := d.XTest.Dims()
	switch {
	case rtr == 0 || rte == 0 || ctr == 0:
		return fmt.Errorf("empty split")
	case ctr != cte:
		return fmt.Errorf("train has %d columns, test %d", ctr, cte)
	case rtr != len(d.YTrain):
		return fmt.Errorf("train has %d rows, %d targets", rtr, len(d.YTrain))
	case d.YTest != nil && rte != len(d.YTest):
		return fmt.Errorf("test has %d rows, %d targets", rte, len(d.YTest))
	}
	if !allFinite(d.XTrain.RawMatrix().Data) || !allFinite(d.XTest.RawMatrix().Data) || !allFinite(d.YTrain) {
		return fmt.Errorf("non-finite values")
	}
	if d.Kind == Classification {
		for _, v := range d.YTrain {
			if v != 0 && v != 1 {
				return fmt.Errorf("classification label %v is not 0 or 1", v)
			}
		}
	}
	return nil
}

// FitPredict fits program p on d's train split and predicts its test split:
// targets for regression, probabilities of class 1 for classification.
// Every step is fitted on the train rows only. The same inputs and seed give
// bit-identical predictions. Errors that are the program's fault satisfy
// IsSolutionError; non-finite predictions are returned as they are.
func FitPredict(ctx context.Context, p program.Program, d *Dataset, seed uint64) ([]float64, error) {
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidProgram, err)
	}
	m := p.Model
	if err := checkKind(m.Name, d.Kind); err != nil {
		return nil, err
	}
	xtr, xte := mat.DenseCopyOf(d.XTrain), mat.DenseCopyOf(d.XTest)
	for i, s := range p.Steps {
		var err error
		xtr, xte, err = fitStep(ctx, s, xtr, xte, d.YTrain)
		if err != nil {
			return nil, fmt.Errorf("step %d %s: %w", i+1, s.Name, err)
		}
	}
	pred, err := fitModel(ctx, m, xtr, d.YTrain, xte, d.Kind == Classification, seed)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	return pred, nil
}

func checkKind(model string, kind Kind) error {
	switch {
	case model == "ridge" && kind == Classification:
		return fmt.Errorf("%w: ridge is a regression model, the task is classification", ErrWrongKind)
	case model == "logistic" && kind == Regression:
		return fmt.Errorf("%w: logistic is a classification model, the task is regression", ErrWrongKind)
	}
	return nil
}

func fitModel(ctx context.Context, m program.Op, xtr *mat.Dense, y []float64, xte *mat.Dense, classify bool, seed uint64) ([]float64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch m.Name {
	case "mean":
		var s float64
		for _, v := range y {
			s += v
		}
		r, _ := xte.Dims()
		pred := make([]float64, r)
		for i := range pred {
			pred[i] = s / float64(len(y))
		}
		return pred, nil
	case "ridge":
		l, err := fitRidge(xtr, y, m.Param("alpha"))
		if err != nil {
			return nil, err
		}
		return l.scores(xte), nil
	case "logistic":
		l, err := fitLogistic(ctx, xtr, y, m.Param("alpha"), m.Int("iters"))
		if err != nil {
			return nil, err
		}
		pred := l.scores(xte)
		for i, s := range pred {
			pred[i] = sigmoid(s)
		}
		return pred, nil
	case "knn":
		return knnPredict(ctx, xtr, y, xte, m.Int("k"))
	case "gbt":
		return gbtPredict(ctx, xtr, y, xte, classify, m.Int("trees"), m.Int("depth"), m.Param("lr"))
	case "rff":
		return rffPredict(ctx, xtr, y, xte, classify, m.Int("features"), m.Param("gamma"), m.Param("alpha"), seed)
	}
	panic(fmt.Sprintf("tabular: unhandled model %q", m.Name))
}
