package tabular

import "gonum.org/v1/gonum/mat"

// Kind is the learning problem of a dataset.
type Kind string

const (
	Regression     Kind = "regression"
	Classification Kind = "classification" // binary, labels 0 and 1
)

// Dataset is one task's data: a train split the pipeline is fitted on and a
// test split whose labels are hidden from the agent and used to score it.
// Rows of X are samples; XTrain and XTest have the same number of columns.
type Dataset struct {
	Kind   Kind
	XTrain *mat.Dense
	YTrain []float64
	XTest  *mat.Dense
	YTest  []float64
}
