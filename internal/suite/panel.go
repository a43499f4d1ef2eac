package suite

import (
	"context"
	"fmt"

	"github.com/wmrl/wmrl/internal/program"
	"github.com/wmrl/wmrl/internal/seed"
	"github.com/wmrl/wmrl/internal/tabular"
)

// The reference panel: fixed pipelines of deliberately varied quality, from
// the constant model to tuned boosting, whose scores on a task form its
// leaderboard. The regression and classification panels mirror each other,
// with ridge in one where logistic stands in the other. Sizes are kept
// modest so that the default suite builds in about a minute. Every value is
// on the token grid of package program, so every reference program (and
// every task's ExampleProgram) has a token form a policy can encode.
var regressionPanel = [...]string{
	"mean",
	"select k=1 | knn k=50",
	"select k=1 | ridge alpha=1",
	"select k=2 | ridge alpha=1",
	"pca k=2 | ridge alpha=1",
	"knn k=1",
	"knn k=50",
	"ridge alpha=0.001",
	"ridge alpha=1",
	"standardize | ridge alpha=0.1",
	"standardize | ridge alpha=10",
	"standardize | ridge alpha=100",
	"standardize | clip z=3 | ridge alpha=1",
	"log1p | standardize | ridge alpha=1",
	"standardize | select k=4 | ridge alpha=1",
	"standardize | select k=8 | ridge alpha=1",
	"standardize | select k=16 | ridge alpha=1",
	"standardize | pca k=4 | ridge alpha=1",
	"standardize | pca k=8 | ridge alpha=1",
	"standardize | select k=4 | poly degree=2 | ridge alpha=10",
	"standardize | select k=8 | poly degree=2 | ridge alpha=1",
	"standardize | select k=4 | poly degree=3 | ridge alpha=10",
	"standardize | clip z=3 | select k=8 | poly degree=2 | ridge alpha=1",
	"standardize | knn k=1",
	"standardize | knn k=5",
	"standardize | knn k=20",
	"standardize | select k=4 | knn k=10",
	"standardize | select k=8 | knn k=10",
	"gbt trees=10 depth=1 lr=0.1",
	"gbt trees=25 depth=2 lr=0.1",
	"gbt trees=50 depth=3 lr=0.1",
	"gbt trees=100 depth=3 lr=0.1",
	"gbt trees=100 depth=2 lr=0.3",
	"gbt trees=50 depth=4 lr=0.1",
	"gbt trees=200 depth=1 lr=0.3",
	"gbt trees=25 depth=6 lr=0.3",
	"select k=8 | gbt trees=100 depth=3 lr=0.1",
	"standardize | rff features=64 gamma=0.1 alpha=1",
	"standardize | rff features=128 gamma=0.3 alpha=1",
	"standardize | rff features=128 gamma=1 alpha=0.1",
	"standardize | rff features=256 gamma=0.1 alpha=0.1",
	"standardize | select k=8 | rff features=128 gamma=0.3 alpha=1",
	"standardize | rff features=32 gamma=10 alpha=1",
	"standardize | clip z=2 | rff features=128 gamma=0.1 alpha=1",
}

var classificationPanel = [...]string{
	"mean",
	"select k=1 | knn k=50",
	"standardize | select k=1 | logistic alpha=1 iters=10",
	"standardize | select k=2 | logistic alpha=1 iters=10",
	"standardize | pca k=2 | logistic alpha=1 iters=10",
	"knn k=1",
	"knn k=50",
	"standardize | logistic alpha=0.001 iters=25",
	"standardize | logistic alpha=1 iters=5",
	"standardize | logistic alpha=0.1 iters=25",
	"standardize | logistic alpha=10 iters=25",
	"standardize | logistic alpha=100 iters=25",
	"standardize | clip z=3 | logistic alpha=1 iters=25",
	"log1p | standardize | logistic alpha=1 iters=25",
	"standardize | select k=4 | logistic alpha=1 iters=25",
	"standardize | select k=8 | logistic alpha=1 iters=25",
	"standardize | select k=16 | logistic alpha=1 iters=25",
	"standardize | pca k=4 | logistic alpha=1 iters=25",
	"standardize | pca k=8 | logistic alpha=1 iters=25",
	"standardize | select k=4 | poly degree=2 | logistic alpha=10 iters=10",
	"standardize | select k=8 | poly degree=2 | logistic alpha=1 iters=10",
	"standardize | select k=4 | poly degree=3 | logistic alpha=10 iters=10",
	"standardize | clip z=3 | select k=8 | poly degree=2 | logistic alpha=1 iters=10",
	"standardize | knn k=1",
	"standardize | knn k=5",
	"standardize | knn k=20",
	"standardize | select k=4 | knn k=10",
	"standardize | select k=8 | knn k=10",
	"gbt trees=10 depth=1 lr=0.1",
	"gbt trees=25 depth=2 lr=0.1",
	"gbt trees=50 depth=3 lr=0.1",
	"gbt trees=100 depth=3 lr=0.1",
	"gbt trees=100 depth=2 lr=0.3",
	"gbt trees=50 depth=4 lr=0.1",
	"gbt trees=200 depth=1 lr=0.3",
	"gbt trees=25 depth=6 lr=0.3",
	"select k=8 | gbt trees=100 depth=3 lr=0.1",
	"standardize | rff features=64 gamma=0.1 alpha=1",
	"standardize | rff features=128 gamma=0.3 alpha=1",
	"standardize | rff features=128 gamma=1 alpha=0.1",
	"standardize | rff features=256 gamma=0.1 alpha=0.1",
	"standardize | select k=8 | rff features=128 gamma=0.3 alpha=1",
	"standardize | rff features=32 gamma=10 alpha=1",
	"standardize | clip z=2 | rff features=128 gamma=0.1 alpha=1",
}

// panelLen is the number of reference programs per kind.
func panelLen() int { return min(len(regressionPanel), len(classificationPanel)) }

// Panel returns the reference programs of a kind in canonical text form:
// the first size of them, or all of them when size is 0.
func Panel(k tabular.Kind, size int) []string {
	src := regressionPanel[:]
	if k == tabular.Classification {
		src = classificationPanel[:]
	}
	if size > 0 && size < len(src) {
		src = src[:size]
	}
	out := make([]string, len(src))
	for i, text := range src {
		p, err := program.Parse(text)
		if err != nil {
			panic(fmt.Sprintf("suite: reference program %q: %v", text, err))
		}
		out[i] = p.String()
	}
	return out
}

// panelFor is Panel, named for its use in building leaderboards.
func panelFor(k tabular.Kind, size int) []string { return Panel(k, size) }

// panelIndex returns the position of text in the panel, or -1.
func panelIndex(k tabular.Kind, size int, text string) int {
	for i, p := range Panel(k, size) {
		if p == text {
			return i
		}
	}
	return -1
}

// panelSeed is the seed of reference program j on the task with seed ts.
func panelSeed(ts uint64, j int) uint64 { return seed.Derive(ts, purposePanel, uint64(j)) }

// engineScore parses and runs a program with the tabular engine and scores
// its test predictions with the task's metric.
func engineScore(ctx context.Context, text string, d *tabular.Dataset, s uint64) (float64, error) {
	p, err := program.Parse(text)
	if err != nil {
		return 0, err
	}
	pred, err := tabular.FitPredict(ctx, p, d, s)
	if err != nil {
		return 0, err
	}
	return tabular.Metric(d.Kind, d.YTest, pred)
}
