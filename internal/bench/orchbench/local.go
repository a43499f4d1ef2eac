package main

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// LocalSpan is a local activity's running interval. A local activity runs
// inside its workflow's task, so the history holds only a marker of it:
// without these spans its work would count as workflow-task overhead.
type LocalSpan struct {
	Name string
	Interval
}

// localSpans records the local activities' spans by workflow ID, through a
// worker interceptor (interceptor).
type localSpans struct {
	mu         sync.Mutex
	byWorkflow map[string][]LocalSpan
}

func (l *localSpans) add(workflowID string, s LocalSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byWorkflow == nil {
		l.byWorkflow = map[string][]LocalSpan{}
	}
	l.byWorkflow[workflowID] = append(l.byWorkflow[workflowID], s)
}

// of returns the spans recorded for a workflow.
func (l *localSpans) of(workflowID string) []LocalSpan {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LocalSpan(nil), l.byWorkflow[workflowID]...)
}

// interceptor times every local activity the worker runs.
func (l *localSpans) interceptor() interceptor.WorkerInterceptor { return &localWorker{spans: l} }

type localWorker struct {
	interceptor.WorkerInterceptorBase
	spans *localSpans
}

func (w *localWorker) InterceptActivity(ctx context.Context,
	next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &localActivity{spans: w.spans}
	i.Next = next
	return i
}

type localActivity struct {
	interceptor.ActivityInboundInterceptorBase
	spans *localSpans
}

func (a *localActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	if !info.IsLocalActivity {
		return a.Next.ExecuteActivity(ctx, in)
	}
	start := time.Now()
	res, err := a.Next.ExecuteActivity(ctx, in)
	a.spans.add(info.WorkflowExecution.ID, LocalSpan{Name: info.ActivityType.Name, Interval: Interval{start, time.Now()}})
	return res, err
}
