package budget

import (
	"fmt"

	"github.com/wmrl/wmrl/internal/executor"
	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/tabular"
)

// DefaultBudget is the default execution budget in tabular.EstimateCost
// work units. On the default suite it admits every reference program and
// refuses only the largest programs of the grammar (for example 400 trees of
// depth 6 on many features, or a k-nearest-neighbours search through
// polynomial features), which would take seconds each.
const DefaultBudget = 2e9

// DefaultDeadlineSeconds is the default safety deadline of one execution.
const DefaultDeadlineSeconds = 120

// OverBudget reports whether job's program is refused by a budget: its
// estimated cost on the job's data exceeds budget (> 0). A program that
// does not parse is never over budget (it is scored as invalid).
func OverBudget(job *executor.Job, budget float64) (est float64, over bool) {
	if budget <= 0 || job.Data == nil || job.Data.XTrain == nil || job.Data.XTest == nil {
		return 0, false
	}
	p, err := program.Parse(job.Program)
	if err != nil {
		return 0, false
	}
	n, c := job.Data.XTrain.Dims()
	m, _ := job.Data.XTest.Dims()
	est = tabular.EstimateCost(p, n, m, c)
	return est, est > budget
}

// Refusal is the result of a program refused by the budget: a timeout,
// with a detail that gives the estimate and the budget.
func Refusal(est, budget float64) executor.Result {
	return executor.Failed(executor.StatusTimeout,
		fmt.Sprintf("estimated cost %.3g work units exceeds the budget of %.3g", est, budget))
}
