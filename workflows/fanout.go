package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/wmrl/wmrl/activities"
)

// forEach starts start(i), an activity of response Resp, for i in [0, n)
// with at most limit futures pending, and calls done(i, f) as each future
// completes. After the first
// error from done it starts nothing new, waits for the pending futures and
// returns that error. Completion order is recorded in history, so replay
// calls done in the same order; callers that aggregate should still store
// results by index and reduce in index order.
func forEach[Resp any](ctx workflow.Context, n, limit int, start func(i int) activities.Future[Resp],
	done func(i int, f activities.Future[Resp]) error) error {
	limit = max(limit, 1)
	sel := workflow.NewSelector(ctx)
	next, pending := 0, 0
	var first error
	launch := func() {
		i := next
		next++
		pending++
		f := start(i)
		sel.AddFuture(f.Future, func(workflow.Future) { // the SDK's own future: a selector takes no other
			pending--
			if err := done(i, f); err != nil && first == nil {
				first = err
			}
		})
	}
	for next < n && pending < limit {
		launch()
	}
	for pending > 0 {
		sel.Select(ctx)
		if first == nil && next < n {
			launch()
		}
	}
	return first
}
