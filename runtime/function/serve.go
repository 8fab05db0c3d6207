package function

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/lambda"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
)

// InLambda reports whether the process runs under a Lambda runtime API (AWS Lambda or its
// emulator).
func InLambda() bool { return os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" }

// ServeLambda serves h as a Lambda function until ctx ends; aws-lambda-go exits the process
// when the runtime API fails.
func ServeLambda(ctx context.Context, h *Handler) {
	awslambda.StartWithOptions(lambdaHandler{h}, awslambda.WithContext(ctx))
}

// lambdaHandler adapts a Handler to Lambda's JSON payloads.
type lambdaHandler struct{ h *Handler }

// Invoke implements awslambda.Handler.
func (l lambdaHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	body, err := lambda.DecodePayload(payload)
	if err != nil {
		return nil, messages.InvokeResponse_Error{Message: err.Error(), Type: remote.ErrorTypeBadRequest}
	}
	res, err := l.h.Handle(ctx, body)
	if err != nil {
		return nil, messages.InvokeResponse_Error{Message: err.Error(), Type: errorType(err)}
	}
	return lambda.EncodePayload(res), nil
}

func errorType(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Type
	}
	return remote.ErrorTypeFailed
}

// HTTPHandler returns the HTTP service of h; ready says whether /readyz answers 200, and GET
// /metrics serves h's Prometheus series. It reads a request body only up to the handler's
// limit (MaxHTTPRequest when it has none) and answers a larger one 400 without reading it.
func HTTPHandler(h *Handler, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		limit := int64(h.bodyLimit())
		if r.ContentLength > limit {
			w.Header().Set(remote.ErrorTypeHeader, remote.ErrorTypeBadRequest)
			http.Error(w, fmt.Sprintf("request of %d bytes, over the limit of %d", r.ContentLength, limit), http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			w.Header().Set(remote.ErrorTypeHeader, remote.ErrorTypeBadRequest)
			http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
			return
		}
		res, err := h.Handle(r.Context(), body)
		if err != nil {
			typ, status := errorType(err), http.StatusInternalServerError
			switch typ {
			case remote.ErrorTypeBadRequest:
				status = http.StatusBadRequest
			case remote.ErrorTypeNeedCertificate:
				status = http.StatusForbidden
			}
			w.Header().Set(remote.ErrorTypeHeader, typ)
			http.Error(w, err.Error(), status)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(res) // a caller gone mid-response has no one to hear of it
	})
	return mux
}

// RequireToken answers 401 to every request but GET /healthz and /readyz (the probes) that
// does not carry "Authorization: Bearer <token>", comparing in constant time, and passes the
// others to next. The token is never logged nor echoed.
func RequireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probe := r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
		if !probe && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dorylus function"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP serves h on lis until ctx ends, then stops taking calls, fails /readyz and waits
// up to grace for the calls in flight. With tlsConf it serves HTTPS only (a plaintext request
// is answered 400 by the TLS layer and never reaches h); without, plain HTTP (behind Knative's
// queue-proxy, which forwards only plain HTTP over the pod's loopback). A non-empty token is
// required of every call (RequireToken); an empty one serves without authentication (an
// insecure run).
func ServeHTTP(ctx context.Context, h *Handler, lis net.Listener, grace time.Duration, token string, tlsConf *tls.Config) error {
	var stopping atomic.Bool
	handler := HTTPHandler(h, func() bool { return !stopping.Load() })
	if token != "" {
		handler = RequireToken(token, handler)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConf}
	errc := make(chan error, 1)
	go func() {
		if tlsConf != nil {
			errc <- srv.ServeTLS(lis, "", "")
		} else {
			errc <- srv.Serve(lis)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
