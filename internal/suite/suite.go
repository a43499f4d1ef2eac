package suite

import (
	"fmt"
	"slices"

	"github.com/wmrl/wmrl/internal/tabular"
)

// DefaultSeed is the suite seed every command uses unless --suite-seed says
// otherwise. Results reported for wmrl are measured on this suite; any other
// seed gives a fresh suite that nobody tuned on.
const DefaultSeed uint64 = 20260829

// Split says whether a task is used for training or kept for evaluation.
type Split string

const (
	Train   Split = "train"
	HeldOut Split = "heldout"
)

// Family is the structure that generated a task's target.
type Family string

const (
	Linear       Family = "linear"       // every feature contributes linearly
	Sparse       Family = "sparse"       // a few features matter, linearly
	Interactions Family = "interactions" // products of feature pairs
	Nonlinear    Family = "nonlinear"    // smooth and step non-linear terms
	Outliers     Family = "outliers"     // extreme feature values (and corrupted training targets)
	Imbalance    Family = "imbalance"    // classification with a rare positive class
	Irrelevant   Family = "irrelevant"   // a few relevant features among many noise features
)

// combo is one (kind, family) pair the generator cycles through.
type combo struct {
	kind   tabular.Kind
	family Family
}

// combos is the fixed cycle of task types: every family for both kinds,
// except imbalance, which only exists for classification.
var combos = [...]combo{
	{tabular.Regression, Linear},
	{tabular.Classification, Linear},
	{tabular.Regression, Sparse},
	{tabular.Classification, Sparse},
	{tabular.Regression, Interactions},
	{tabular.Classification, Interactions},
	{tabular.Regression, Nonlinear},
	{tabular.Classification, Nonlinear},
	{tabular.Regression, Outliers},
	{tabular.Classification, Outliers},
	{tabular.Classification, Imbalance},
	{tabular.Regression, Irrelevant},
	{tabular.Classification, Irrelevant},
}

// Metric names.
const (
	MetricR2  = "r2"      // coefficient of determination on the test split
	MetricAUC = "roc_auc" // area under the ROC curve on the test split
)

// MetricFor returns the metric name of a kind of task.
func MetricFor(k tabular.Kind) string {
	if k == tabular.Classification {
		return MetricAUC
	}
	return MetricR2
}

// Task is one research task: a question, the data card the agent sees, the
// data (the test labels are hidden from the agent and only used to score),
// and a leaderboard of reference scores.
type Task struct {
	ID       string       `json:"id"`
	Index    int          `json:"index"`
	Split    Split        `json:"split"`
	Kind     tabular.Kind `json:"kind"`
	Family   Family       `json:"family"`
	Seed     uint64       `json:"seed"`
	Question string       `json:"question"`
	Metric   string       `json:"metric"`
	Card     Card         `json:"card"`
	// Data holds the train split and the hidden test split. It is never
	// shown to the agent and not part of the JSON form. It is shared by
	// every user of the suite: treat it as read-only.
	Data *tabular.Dataset `json:"-"`
	// Leaderboard holds the scores of the reference panel on this task,
	// best first (higher is better): one per reference program that ran
	// (all of them, barring a rare numerical failure of at most a tenth).
	Leaderboard []float64 `json:"leaderboard"`
	// ExampleProgram is the text of the panel's best program on this task.
	ExampleProgram string `json:"example_program"`
}

// Suite is a generated set of tasks together with its content hash.
type Suite struct {
	Options Options `json:"options"`
	Tasks   []*Task `json:"tasks"`
	// Hash is the hex sha256 of the canonical encoding of the whole suite:
	// options, every task's fields, data and leaderboard.
	Hash string `json:"hash"`
}

// Task returns the task with the given id.
func (s *Suite) Task(id string) (*Task, error) {
	for _, t := range s.Tasks {
		if t.ID == id {
			return t, nil
		}
	}
	return nil, fmt.Errorf("unknown task %q (suite seed %d has %d tasks; see wmrl suite list)", id, s.Options.Seed, len(s.Tasks))
}

// Split returns the tasks of one split, in suite order.
func (s *Suite) Split(sp Split) []*Task {
	var out []*Task
	for _, t := range s.Tasks {
		if t.Split == sp {
			out = append(out, t)
		}
	}
	return out
}

// IDs returns every task id in suite order.
func (s *Suite) IDs() []string {
	ids := make([]string, len(s.Tasks))
	for i, t := range s.Tasks {
		ids[i] = t.ID
	}
	return ids
}

// Position is a score's place on a task's leaderboard, in (0, 1]:
//
//	rank     = 1 + number of leaderboard scores strictly greater than score
//	position = (N − min(rank, N) + 1) / N
//
// where N is the leaderboard length. A score at least as good as the best
// reference gets 1; a score tied with the worst reference, or worse than
// every reference, gets 1/N. A NaN score counts as worse than every
// reference. An empty leaderboard gives 0.
func Position(t *Task, score float64) float64 {
	return PositionIn(t.Leaderboard, score)
}

// PositionIn is Position against an explicit leaderboard (any order).
func PositionIn(leaderboard []float64, score float64) float64 {
	n := len(leaderboard)
	if n == 0 {
		return 0
	}
	better := n
	if score == score { // not NaN
		better = 0
		for _, v := range leaderboard {
			if v > score {
				better++
			}
		}
	}
	rank := min(1+better, n)
	return float64(n-rank+1) / float64(n)
}

// sortedDesc returns a copy of xs sorted best (largest) first.
func sortedDesc(xs []float64) []float64 {
	out := slices.Clone(xs)
	slices.SortFunc(out, func(a, b float64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	return out
}
