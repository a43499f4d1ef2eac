package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// pollEvery is the pause between attempts while waiting for a server.
const pollEvery = 250 * time.Millisecond

// frontendClient talks to a Temporal frontend over gRPC, plain or TLS.
type frontendClient struct {
	conn     *grpc.ClientConn
	workflow workflowservice.WorkflowServiceClient
	operator operatorservice.OperatorServiceClient
}

// dial connects to address over TLS with tlsConf, or in plain text when it is nil.
func dial(address string, tlsConf *tls.Config) (*frontendClient, error) {
	creds := insecure.NewCredentials()
	if tlsConf != nil {
		creds = credentials.NewTLS(tlsConf)
	}
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	return &frontendClient{
		conn:     conn,
		workflow: workflowservice.NewWorkflowServiceClient(conn),
		operator: operatorservice.NewOperatorServiceClient(conn),
	}, nil
}

func (c *frontendClient) Close() error { return c.conn.Close() }

// permanentError marks an error that waiting cannot cure; retry returns it at once.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// retry calls f every pollEvery until it succeeds, fails permanently or ctx ends, and then
// returns the last error of f, so a timeout says what was still failing.
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(callCtx)
		cancel()
		if err == nil {
			return nil
		}
		if errors.As(err, new(permanentError)) {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (gave up: %v)", what, err, context.Cause(ctx))
		case <-time.After(pollEvery):
		}
	}
}

// waitNamespace waits until the frontend describes the namespace.
func (c *frontendClient) waitNamespace(ctx context.Context, namespace string) error {
	return retry(ctx, "namespace "+namespace, func(ctx context.Context) error {
		_, err := c.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		return err
	})
}

// missingSearchAttributes lists the attributes the namespace lacks. An attribute that
// exists with another type is an error: wmrl cannot use it and Temporal cannot retype it.
func (c *frontendClient) missingSearchAttributes(ctx context.Context, namespace string, want []searchAttribute) ([]searchAttribute, error) {
	resp, err := c.operator.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes: %w", err)
	}
	have := resp.GetCustomAttributes()
	var missing []searchAttribute
	for _, a := range want {
		t, ok := have[a.Name]
		if !ok {
			if st, sys := resp.GetSystemAttributes()[a.Name]; sys {
				return nil, permanentError{fmt.Errorf("search attribute %s is a system attribute (%s)", a.Name, typeName(st))}
			}
			missing = append(missing, a)
			continue
		}
		if t != a.Type {
			return nil, permanentError{fmt.Errorf("search attribute %s is registered as %s, want %s", a.Name, typeName(t), typeName(a.Type))}
		}
	}
	return missing, nil
}

// ensureSearchAttributes adds the attributes the namespace lacks and waits until all are
// listed. It returns the names it added.
func (c *frontendClient) ensureSearchAttributes(ctx context.Context, namespace string, want []searchAttribute) ([]string, error) {
	var missing []searchAttribute
	err := retry(ctx, "search attributes of "+namespace, func(ctx context.Context) error {
		var err error
		missing, err = c.missingSearchAttributes(ctx, namespace, want)
		return err
	})
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	req := &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: make(map[string]enumspb.IndexedValueType, len(missing)),
	}
	added := make([]string, len(missing))
	for i, a := range missing {
		req.SearchAttributes[a.Name] = a.Type
		added[i] = a.Name
	}
	if _, err := c.operator.AddSearchAttributes(ctx, req); err != nil {
		return nil, fmt.Errorf("add search attributes %s to %s: %w", strings.Join(added, ", "), namespace, err)
	}
	err = retry(ctx, "search attributes of "+namespace, func(ctx context.Context) error {
		still, err := c.missingSearchAttributes(ctx, namespace, want)
		if err == nil && len(still) > 0 {
			err = fmt.Errorf("%d not listed yet", len(still))
		}
		return err
	})
	return added, err
}

// typeName is the short name of an indexed value type, as accepted on the command line.
func typeName(t enumspb.IndexedValueType) string {
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
		return "Keyword"
	case enumspb.INDEXED_VALUE_TYPE_TEXT:
		return "Text"
	case enumspb.INDEXED_VALUE_TYPE_INT:
		return "Int"
	case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		return "Double"
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		return "Bool"
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		return "Datetime"
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		return "KeywordList"
	}
	return t.String()
}

// check waits until the frontend answers for the namespace and, with --search-attributes,
// until those attributes are registered with their types.
func check(args []string, stdout, stderr io.Writer) error {
	o, err := parseClient("check", args, stderr, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	c, err := dial(o.Address, o.TLS)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.waitNamespace(ctx, o.Namespace); err != nil {
		return err
	}
	if len(o.SearchAttributes) > 0 {
		err := retry(ctx, "search attributes of "+o.Namespace, func(ctx context.Context) error {
			missing, err := c.missingSearchAttributes(ctx, o.Namespace, o.SearchAttributes)
			if err == nil && len(missing) > 0 {
				names := make([]string, len(missing))
				for i, a := range missing {
					names[i] = a.Name
				}
				err = fmt.Errorf("not registered: %s", strings.Join(names, ", "))
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "temporal-dev: %s answers for namespace %s\n", o.Address, o.Namespace)
	return nil
}

// register adds the search attributes a namespace of a running cluster lacks, so wmrl can
// use a cluster it did not start.
func register(args []string, stdout, stderr io.Writer) error {
	o, err := parseClient("register", args, stderr, DefaultSearchAttributes)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	c, err := dial(o.Address, o.TLS)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.waitNamespace(ctx, o.Namespace); err != nil {
		return err
	}
	added, err := c.ensureSearchAttributes(ctx, o.Namespace, o.SearchAttributes)
	if err != nil {
		return err
	}
	if len(added) == 0 {
		fmt.Fprintf(stdout, "temporal-dev: %s/%s already has every search attribute\n", o.Address, o.Namespace)
		return nil
	}
	fmt.Fprintf(stdout, "temporal-dev: added to %s/%s: %s\n", o.Address, o.Namespace, strings.Join(added, ", "))
	return nil
}

// ensureNamespace registers the namespace with the given retention unless the frontend
// already describes it (a Postgres-backed cluster starts with none).
func (c *frontendClient) ensureNamespace(ctx context.Context, namespace string, retention time.Duration) error {
	return retry(ctx, "register namespace "+namespace, func(ctx context.Context) error {
		_, err := c.workflow.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if err == nil {
			return nil
		}
		if status.Code(err) != codes.NotFound {
			return err
		}
		_, err = c.workflow.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(retention),
		})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	})
}
