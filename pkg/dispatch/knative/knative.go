// Package knative is the Knative tensor backend: a remote.Backend whose transport POSTs the
// wire bytes of a task to a Knative Service running `dorylus function`, over keep-alive
// connections reused across calls. An https URL is verified as Options.TLS says (the job's
// CA and pki.FunctionServerName for a function serving the job's certificate). Throttling
// (429), 5xx answers, timeouts and lost connections are retried; a 4xx answer fails the task
// with the function's message.
package knative

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	// TLS is the client TLS configuration of https URLs (pki.Credentials.FunctionClientConfig:
	// the job's CA, which the function's certificate must chain to); nil: the system's roots.
	TLS *tls.Config
	// Tuning holds concurrency, timeouts, retries and straggler settings; New sets its Name
	// and Endpoints.
	Tuning remote.Options
}

// New returns a backend that POSTs tasks to the URLs.
func New(o Options) (*remote.Backend, error) {
	if len(o.URLs) == 0 {
		return nil, fmt.Errorf("knative backend: no service URL")
	}
	t := &transport{client: o.client(), token: o.Token}
	r := o.Tuning
	r.Name, r.Endpoints = "knative "+o.URLs[0], o.URLs
	return remote.New(t, r)
}

// client returns the HTTP client of the options' calls.
func (o *Options) client() *http.Client {
	conns := max(o.Tuning.MaxConcurrency, 1)
	var tc *tls.Config
	if o.TLS != nil {
		tc = o.TLS.Clone()
	}
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConns: 4 * conns, MaxIdleConnsPerHost: conns,
		IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true, TLSClientConfig: tc,
	}}
}

// WaitReady waits until every URL answers GET /readyz with 200, over TLS verified as o.TLS
// says, asking every half second for at most timeout; its error names a URL that did not and
// its last answer that the deadline did not cut off (a certificate of another CA, a refused
// connection). A function deployed with the job's credentials starts only once the job has
// them, and serves the new ones a while after they rotate.
func WaitReady(ctx context.Context, o Options, timeout time.Duration) error {
	c := o.client()
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, raw := range o.URLs {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("knative backend: URL %q: %w", raw, err)
		}
		probe := u.ResolveReference(&url.URL{Path: "/readyz"}).String()
		var why error
		for {
			err := ready(ctx, c, probe)
			if err == nil {
				break
			}
			if why == nil || ctx.Err() == nil { // a probe the deadline cut off says less than the one before
				why = err
			}
			t := time.NewTimer(500 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("knative backend: the function at %s not ready after %v: %w", raw, timeout, why)
			}
		}
	}
	return nil
}

// ready asks probe once.
func ready(ctx context.Context, c *http.Client, probe string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", probe, answer(resp, b))
	}
	return nil
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
	case resp.Header.Get(remote.ErrorTypeHeader) == remote.ErrorTypeNeedCertificate:
		nc, err := remote.ParseNeedCertificate(string(b))
		if err != nil {
			return nil, fmt.Errorf("POST %s: %w", url, err)
		}
		return nil, nc
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
