// Package function is the one tensor-task handler of the serverless backends: it decodes a
// request in the dispatch wire format, runs it with dispatch.Execute and encodes the result.
// A pull-mode request (a dispatch.Descriptor) names the task instead: the handler fetches its
// inputs from the graph server (rpc.TaskSource) and its weight by version from the parameter
// server over gRPC, over mutual TLS with a certificate of the job's CA, which the descriptor
// names: the function certificate of a mounted credentials Secret (UseCredentials), or one the
// job's function issuer signed for a key the function made and keeps in memory, which it asks
// for by answering a descriptor with its public key (remote.ErrorTypeNeedCertificate). No
// request carries a private key. It keeps no state between calls but those connections, its
// key and its certificates. Serve runs it as an AWS Lambda handler (aws-lambda-go)
// when the Lambda runtime API is in its environment, and otherwise as an HTTP service for
// Knative: POST / takes a request and answers the result, GET /healthz and /readyz answer
// 200 (readyz 503 once shutdown began), and cancelling Serve's context (SIGTERM) drains the
// calls in flight before it returns.
//
// A request it cannot serve (another wire version, a bad shape, too many bytes) gets an error
// of type remote.ErrorTypeBadRequest; a task that fails gets remote.ErrorTypeFailed.
// remote.ErrorTypeNeedCertificate is HTTP 403.
//
// For fault tests, Faults makes every Nth call slow, fail, hang or kill the process.
package function

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// Fault modes.
const (
	FaultDelay = "delay" // wait Faults.Delay, then answer
	FaultError = "error" // answer an error of type remote.ErrorTypeFailed
	FaultHang  = "hang"  // never answer (until the call's context ends)
	FaultExit  = "exit"  // exit the process mid-call, as if killed
)

// Faults injects failures into every Every-th call (counted from 1 in this process).
type Faults struct {
	Every int
	Mode  string
	Delay time.Duration
}

// Validate checks the fault settings.
func (f Faults) Validate() error {
	switch {
	case f.Every < 0:
		return fmt.Errorf("fault every %d calls: want 0 (off) or more", f.Every)
	case f.Every == 0:
		return nil
	case f.Mode == FaultDelay && f.Delay <= 0:
		return fmt.Errorf("fault %s: want a positive delay, got %v", f.Mode, f.Delay)
	case f.Mode != FaultDelay && f.Mode != FaultError && f.Mode != FaultHang && f.Mode != FaultExit:
		return fmt.Errorf("fault mode %q: want %s, %s, %s or %s", f.Mode, FaultDelay, FaultError, FaultHang, FaultExit)
	}
	return nil
}

// Error is a failed call, with the error type the caller branches on.
type Error struct {
	Type string // remote.ErrorTypeBadRequest, ErrorTypeNeedCertificate or ErrorTypeFailed
	Err  error
}

// Error returns the message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Handler runs encoded tasks; it is safe for concurrent use.
type Handler struct {
	faults     Faults
	maxRequest int
	calls      atomic.Int64
	pull       fetcher
	inFlight   atomic.Int64
	failures   atomic.Int64
	seconds    prometheus.Histogram
}

// NewHandler returns a handler that refuses requests over maxRequest bytes (0: no limit) and
// injects faults.
func NewHandler(faults Faults, maxRequest int) (*Handler, error) {
	if err := faults.Validate(); err != nil {
		return nil, err
	}
	if maxRequest < 0 {
		return nil, fmt.Errorf("max request bytes %d: want 0 (no limit) or more", maxRequest)
	}
	return &Handler{faults: faults, maxRequest: maxRequest, seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "dorylus_function_call_seconds", Help: "Time of the calls the function handled, from request to result.",
		Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10)})}, nil
}

// MaxHTTPRequest is the largest body the HTTP service reads when the handler has no limit of its
// own: the largest message of the data plane.
const MaxHTTPRequest = rpc.MaxMessage

// bodyLimit returns the largest request body the HTTP service reads.
func (h *Handler) bodyLimit() int {
	if h.maxRequest > 0 {
		return h.maxRequest
	}
	return MaxHTTPRequest
}

// Prometheus series of a handler beside its call-time histogram.
var (
	descCalls    = prometheus.NewDesc("dorylus_function_calls_total", "Calls the function received.", nil, nil)
	descFailures = prometheus.NewDesc("dorylus_function_failures_total", "Calls the function answered with an error.", nil, nil)
	descInFlight = prometheus.NewDesc("dorylus_function_calls_in_flight", "Calls the function is handling now.", nil, nil)
)

// Describe sends the handler's series descriptions; a Handler is a prometheus.Collector.
func (h *Handler) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCalls
	ch <- descFailures
	ch <- descInFlight
	h.seconds.Describe(ch)
}

// Collect sends the handler's series.
func (h *Handler) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descCalls, prometheus.CounterValue, float64(h.calls.Load()))
	ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(h.failures.Load()))
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(h.inFlight.Load()))
	h.seconds.Collect(ch)
}

// Calls returns the number of calls handled so far.
func (h *Handler) Calls() int64 { return h.calls.Load() }

// Handle runs one encoded request and returns the encoded result.
func (h *Handler) Handle(ctx context.Context, body []byte) ([]byte, error) {
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	start := time.Now()
	res, err := h.handle(ctx, body, h.calls.Add(1))
	h.seconds.Observe(time.Since(start).Seconds())
	if err != nil {
		h.failures.Add(1)
	}
	return res, err
}

// handle runs call n.
func (h *Handler) handle(ctx context.Context, body []byte, n int64) ([]byte, error) {
	if f := h.faults; f.Every > 0 && n%int64(f.Every) == 0 {
		if err := h.inject(ctx, n); err != nil {
			return nil, err
		}
	}
	if h.maxRequest > 0 && len(body) > h.maxRequest {
		return nil, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %d bytes, over the limit of %d", dispatch.ErrRequest, len(body), h.maxRequest)}
	}
	var req dispatch.TaskRequest
	var err error
	if dispatch.IsDescriptor(body) {
		if req, err = h.pull.request(ctx, body); err != nil {
			return nil, err
		}
	} else if req, err = dispatch.DecodeRequest(body); err != nil {
		return nil, &Error{remote.ErrorTypeBadRequest, err}
	}
	res, err := dispatch.Execute(&req, nil)
	if errors.Is(err, dispatch.ErrRequest) {
		return nil, &Error{remote.ErrorTypeBadRequest, err}
	}
	if err != nil {
		return nil, &Error{remote.ErrorTypeFailed, fmt.Errorf("%v layer %d: %w", req.Op, req.Layer, err)}
	}
	return dispatch.EncodeResult(req.Op, res), nil
}

// inject applies the fault to call n.
func (h *Handler) inject(ctx context.Context, n int64) error {
	switch h.faults.Mode {
	case FaultDelay:
		t := time.NewTimer(h.faults.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return &Error{remote.ErrorTypeFailed, ctx.Err()}
		}
	case FaultError:
		return &Error{remote.ErrorTypeFailed, fmt.Errorf("injected fault on call %d", n)}
	case FaultHang:
		<-ctx.Done()
		return &Error{remote.ErrorTypeFailed, ctx.Err()}
	case FaultExit:
		fmt.Fprintf(os.Stderr, "dorylus function: injected exit on call %d\n", n)
		os.Exit(3)
	}
	return nil
}
