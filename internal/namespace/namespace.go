// Package namespace prepares a Temporal namespace for wmrl: registered,
// with the custom search attributes its workflows set. It is
// administration, run once by a worker at start (and by tests and
// benchmarks), never by workflow code.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Ensure registers namespace ns (with the given retention) unless it
// exists, adds the search attributes of attrs it lacks, and waits until the
// namespace lists them all or ctx ends. It is idempotent.
func Ensure(ctx context.Context, c client.Client, ns string, retention time.Duration,
	attrs map[string]enums.IndexedValueType) error {
	_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(retention)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", ns, err)
	}
	for {
		missing := map[string]enums.IndexedValueType{}
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err == nil {
			for k, v := range attrs {
				if _, ok := resp.GetCustomAttributes()[k]; !ok {
					missing[k] = v
				}
			}
			if len(missing) == 0 {
				return nil
			}
			// A namespace just registered may not accept attributes yet:
			// errors here are retried until ctx ends.
			_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
				Namespace: ns, SearchAttributes: missing})
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not ready: %w (last error: %v)", ns, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
