// Package knative is the Knative tensor backend: a remote.Backend whose transport POSTs the
// wire bytes of a task to a Knative Service running `dorylus function`, over keep-alive
// connections reused across calls. Throttling (429), 5xx answers, timeouts and lost
// connections are retried; a 4xx answer fails the task with the function's message.
package knative

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
)

// Options configures a Knative backend.
type Options struct {
	// URLs are the Service's addresses (usually one; more spread the calls).
	URLs []string
	// Token, when set, is sent as "Authorization: Bearer <token>" with every call: the job's
	// credential, which the function requires.
	Token string
	// Tuning holds concurrency, timeouts, retries and straggler settings; New sets its Name
	// and Endpoints.
	Tuning remote.Options
}

// New returns a backend that POSTs tasks to the URLs.
func New(o Options) (*remote.Backend, error) {
	if len(o.URLs) == 0 {
		return nil, fmt.Errorf("knative backend: no service URL")
	}
	conns := max(o.Tuning.MaxConcurrency, 1)
	t := &transport{client: &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConns: 4 * conns, MaxIdleConnsPerHost: conns,
		IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true,
	}}, token: o.Token}
	r := o.Tuning
	r.Name, r.Endpoints = "knative "+o.URLs[0], o.URLs
	return remote.New(t, r)
}

// transport POSTs tasks.
type transport struct {
	client *http.Client
	token  string
}

// Call POSTs body to url.
func (t *transport) Call(ctx context.Context, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("knative %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w: POST %s: %w", remote.ErrTransient, remote.ErrUnreachable, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %w: POST %s: reading the answer: %w", remote.ErrTransient, remote.ErrUnreachable, url, err)
	case resp.StatusCode == http.StatusOK:
		return b, nil
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, fmt.Errorf("%w: %w: POST %s: %s", remote.ErrTransient, remote.ErrThrottled, url, answer(resp, b))
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("%w: POST %s: %s", remote.ErrTransient, url, answer(resp, b))
	case resp.Header.Get(remote.ErrorTypeHeader) == remote.ErrorTypeBadRequest:
		return nil, fmt.Errorf("POST %s: function refused the request: %w: %s", url, dispatch.ErrRequest, answer(resp, b))
	}
	return nil, fmt.Errorf("POST %s: %s", url, answer(resp, b))
}

// Close closes the idle connections.
func (t *transport) Close() error {
	t.client.CloseIdleConnections()
	return nil
}

// answer describes a failed response: its status and the start of its body.
func answer(resp *http.Response, b []byte) string {
	if len(b) > 200 {
		b = append(b[:200:200], "…"...)
	}
	return fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(b))
}
