package workflows

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

// SearchAttributes are the custom search attributes wmrl's workflows set, by
// name and type. A namespace must have them before a run starts.
func SearchAttributes() map[string]enums.IndexedValueType {
	return map[string]enums.IndexedValueType{
		AttrRunName:      enums.INDEXED_VALUE_TYPE_KEYWORD,
		AttrMode:         enums.INDEXED_VALUE_TYPE_KEYWORD,
		AttrStep:         enums.INDEXED_VALUE_TYPE_INT,
		AttrHeldOutScore: enums.INDEXED_VALUE_TYPE_DOUBLE,
	}
}

// EnsureNamespace registers namespace ns (with the given retention) unless it
// exists, adds the missing search attributes of SearchAttributes, and waits
// until the namespace lists them all or ctx ends. It is idempotent.
func EnsureNamespace(ctx context.Context, c client.Client, ns string, retention time.Duration) error {
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
			for k, v := range SearchAttributes() {
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
