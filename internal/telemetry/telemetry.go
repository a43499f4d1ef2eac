// Package telemetry is what a wmrl worker serves to Prometheus, on one
// registry at /metrics: wmrl's own series (Recorder), which the activities
// record, labelled by run and mode; the Temporal SDK's own series (the
// client's and workers' requests, task latencies, slots, polls), through
// the SDK's tally integration (go.temporal.io/sdk/contrib/tally) and
// tally's Prometheus reporter; and the Go runtime's and the process's.
//
// The worker creates one Exporter in main (wmrl-worker --metrics-addr),
// passes Recorder to the activities and TemporalHandler to the Temporal
// client it dials. Workflow code never records a metric.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// Path is where an Exporter serves the metrics.
const Path = "/metrics"

// reportEvery is how often tally hands the Temporal SDK's metrics to the
// Prometheus registry.
const reportEvery = time.Second

// Exporter is a worker's registry of metrics and, once Listen is called,
// its HTTP server. A nil *Exporter (metrics off) has a nil Recorder and a
// nil TemporalHandler (the SDK's no-op).
type Exporter struct {
	reg      *prometheus.Registry
	rec      *Recorder
	temporal client.MetricsHandler
	scope    io.Closer
	srv      *http.Server
	ln       net.Listener
	served   chan error
	onError  func(error)
}

// New creates the registry with wmrl's series, the Temporal SDK's handler
// and the Go runtime's and process's collectors. onError receives the
// errors that cannot be returned: a Temporal SDK series that the registry
// refuses, a failure of the HTTP server (nil: dropped).
func New(onError func(error)) (*Exporter, error) {
	if onError == nil {
		onError = func(error) {}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	rec, err := NewRecorder(reg)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// The SDK's timers become Prometheus histograms (summaries cannot be
	// aggregated across workers); names and label names are sanitized and
	// named as the SDK's other integrations name them (temporal_..._total,
	// temporal_..._seconds). Label values are kept as they are: the
	// contrib's options would turn the namespace and queue names
	// (wmrl-control) into wmrl_control, which Temporal knows by no name.
	sanitize := sdktally.PrometheusSanitizeOptions
	sanitize.ValueCharacters = tally.ValidCharacters{Ranges: []tally.SanitizeRange{{0, unicode.MaxRune}}}
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError:  func(err error) { onError(fmt.Errorf("temporal sdk metric: %w", err)) },
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, reportEvery)
	return &Exporter{
		reg:      reg,
		rec:      rec,
		temporal: sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
		scope:    closer,
		onError:  onError,
	}, nil
}

// Recorder returns wmrl's series, for the activities (nil when e is nil).
func (e *Exporter) Recorder() *Recorder {
	if e == nil {
		return nil
	}
	return e.rec
}

// TemporalHandler returns the handler of the Temporal SDK's metrics, for
// client.Options.MetricsHandler (nil, the SDK's no-op, when e is nil).
func (e *Exporter) TemporalHandler() client.MetricsHandler {
	if e == nil {
		return nil
	}
	return e.temporal
}

// Registry returns the registry (for tests that gather it directly).
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Handler serves the registry in Prometheus's exposition formats.
func (e *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{Registry: e.reg})
}

// Listen starts serving Path on addr (host:port; port 0 picks a free one,
// see Addr) in the background, until Close. onError (New's) receives a
// failure of the server after it started.
func (e *Exporter) Listen(addr string) error {
	if e.srv != nil {
		return errors.New("metrics: already listening")
	}
	ln, err := net.Listen("tcp", addr) // its error names the address
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, e.Handler())
	e.ln, e.served = ln, make(chan error, 1)
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		err := e.srv.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			e.onError(fmt.Errorf("metrics server on %s: %w", ln.Addr(), err))
		}
		e.served <- err
	}()
	return nil
}

// Addr is the address Listen listens on (nil before Listen).
func (e *Exporter) Addr() net.Addr {
	if e == nil || e.ln == nil {
		return nil
	}
	return e.ln.Addr()
}

// Close stops the HTTP server (letting a scrape in flight finish, for at
// most 5 s) and the reporting of the Temporal SDK's metrics.
func (e *Exporter) Close() error {
	if e == nil {
		return nil
	}
	var errs []error
	if e.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		errs = append(errs, e.srv.Shutdown(ctx))
		<-e.served
	}
	errs = append(errs, e.scope.Close())
	return errors.Join(errs...)
}
