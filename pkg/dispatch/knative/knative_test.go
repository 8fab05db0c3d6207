package knative_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/knative"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/pulltest"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

var dorylus string

func TestMain(m *testing.M) { remotetest.MainWithDorylus(m, &dorylus) }

func newBackend(t *testing.T, urls []string, tune remote.Options) *remote.Backend {
	t.Helper()
	if tune.MaxConcurrency == 0 {
		tune.MaxConcurrency = 4
	}
	b, err := knative.New(knative.Options{URLs: urls, Token: remotetest.Token, TLS: remotetest.ClientTLS(t), Tuning: tune})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestHTTPFunction runs every kind of task through `dorylus function` over HTTP and expects
// the results of dispatch.Execute bit for bit, with keep-alive connections reused.
func TestHTTPFunction(t *testing.T) {
	url, _ := remotetest.HTTPFunction(t, dorylus)
	b := newBackend(t, []string{url}, remote.Options{})
	remotetest.RunAll(t, b, 4)
	if u := b.Usage(); u.Tasks != 20 || u.Tries != 20 || u.Failures != 0 {
		t.Errorf("usage %+v, want 20 tasks in 20 tries", u)
	}
	for _, path := range []string{"healthz", "readyz"} {
		resp, err := remotetest.HTTPClient(t).Get(url + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("/%s: %v %v", path, resp, err)
		} else {
			resp.Body.Close()
		}
	}
}

// TestHTTPFunctionPull runs every GCN task in pull mode through `dorylus function` over HTTP,
// refusing requests over 512 bytes: each call fetches its inputs from a loopback task source
// and the weight by version from a real parameter-server shard, and the results equal
// dispatch.Execute's bit for bit. Under a result limit AV_0 is cut into row ranges, each call
// fetching its own rows.
func TestHTTPFunctionPull(t *testing.T) {
	url, _ := remotetest.HTTPFunction(t, dorylus, "--max-request-bytes", "512", "--insecure", remotetest.PullLoopback) // a plaintext task source
	store, reqs := pulltest.Source(t, remotetest.Tasks(7, 60, 50, 16), nil, nil)
	b := newBackend(t, []string{url}, remote.Options{Pull: store})
	remotetest.RunTasks(t, b, reqs, 2)
	if u := b.Usage(); u.Tasks != 10 || u.Splits != 0 || u.Failures != 0 {
		t.Errorf("usage %+v, want 10 tasks without failures", u)
	}
	small := newBackend(t, []string{url}, remote.Options{Pull: store, MaxResultBytes: 1000})
	remotetest.RunTasks(t, small, reqs[:1], 2)
	if u := small.Usage(); u.Tasks != 2 || u.Splits != 2 || u.Tries < 8 || u.Failures != 0 {
		t.Errorf("usage %+v, want 2 tasks, each cut into at least 4 row ranges, without failures", u)
	}
}

// TestHTTPFunctionPullTLS runs GCN tasks in pull mode through HTTPS functions from a task
// source and parameter server that speak mutual TLS only. A function whose mounted
// credentials are the job's fetches with its function certificate, every call at the first
// try; one whose mounted credentials are another job's (a mount not yet refreshed after a
// rotation) answers the first descriptor with a key of its own, which the store certifies:
// one more call, then the same results.
func TestHTTPFunctionPullTLS(t *testing.T) {
	job, err := remotetest.Bundle(t).Credentials()
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := remotetest.Bundle(t).Issuer()
	if err != nil {
		t.Fatal(err)
	}
	store, reqs := pulltest.Source(t, remotetest.Tasks(7, 60, 50, 16), job, issuer)
	other, err := pki.Issue("another job")
	if err != nil {
		t.Fatal(err)
	}
	otherDir := remotetest.WriteCredentials(t, other)
	for _, c := range []struct {
		name           string
		creds          string
		certifications int64
	}{{"mounted", remotetest.CredentialsDir(t), 0}, {"certified", otherDir, 1}} {
		t.Run(c.name, func(t *testing.T) {
			url, _ := remotetest.HTTPFunctionOf(t, dorylus, c.creds, "--max-request-bytes", "2048", remotetest.PullLoopback)
			// the other job's function serves that job's certificate: trust it to reach it
			tls := remotetest.ClientTLS(t)
			if c.certifications > 0 {
				oc, err := (&pki.Bundle{CA: other.CA, Cert: other.FunctionCert, Key: other.FunctionKey}).Credentials()
				if err != nil {
					t.Fatal(err)
				}
				tls = oc.FunctionClientConfig()
			}
			b, err := knative.New(knative.Options{URLs: []string{url}, Token: remotetest.Token, TLS: tls, Tuning: remote.Options{MaxConcurrency: 2, Pull: store}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			remotetest.RunTasks(t, b, reqs, 1)
			if u := b.Usage(); u.Tasks != int64(len(reqs)) || u.Failures != 0 || u.Tries != u.Tasks+c.certifications {
				t.Errorf("usage %+v, want %d tasks without failures in %d tries", u, len(reqs), int64(len(reqs))+c.certifications)
			}
		})
	}
}

// TestHTTPFunctionGAT runs every GAT op (AV, ∇AV, AE, ∇AE) through `dorylus function` over
// HTTP and expects the results of dispatch.Execute bit for bit.
func TestHTTPFunctionGAT(t *testing.T) {
	url, _ := remotetest.HTTPFunction(t, dorylus)
	b := newBackend(t, []string{url}, remote.Options{})
	remotetest.RunTasks(t, b, remotetest.GATTasks(9, 40, 30, 8), 2)
	if u := b.Usage(); u.Tasks != 16 || u.Failures != 0 {
		t.Errorf("usage %+v, want 16 tasks without failures", u)
	}
}

// TestBadRequest expects a request the function refuses to fail at once with its message.
func TestBadRequest(t *testing.T) {
	url, _ := remotetest.HTTPFunction(t, dorylus, "--max-request-bytes", "100")
	b := newBackend(t, []string{url}, remote.Options{})
	_, err := b.Run(context.Background(), remotetest.Tasks(1, 10, 20, 4)[0])
	if !errors.Is(err, dispatch.ErrRequest) || !contains(err, "over the limit of 100") {
		t.Fatalf("error %v, want the function's refusal", err)
	}
	if u := b.Usage(); u.Tries != 1 {
		t.Errorf("%d tries of a refused request, want 1", u.Tries)
	}
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// TestFaults runs the tasks against functions that fail every third call, exit mid-call, or
// delay every fifth call by two seconds, and expects unchanged results: failures retried,
// the dead function avoided, stragglers relaunched.
func TestFaults(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		url, _ := remotetest.HTTPFunction(t, dorylus, "--fault-every", "3", "--fault", "error")
		// a third of the calls fail: enough tries that no task meets a failure on each
		b := newBackend(t, []string{url}, remote.Options{Backoff: time.Millisecond, Attempts: 12})
		remotetest.RunAll(t, b, 3)
		if u := b.Usage(); u.Retries < 4 {
			t.Errorf("usage %+v: want retries of the failed calls", u)
		}
	})
	t.Run("exit", func(t *testing.T) {
		dying, p := remotetest.HTTPFunction(t, dorylus, "--fault-every", "4", "--fault", "exit")
		healthy, _ := remotetest.HTTPFunction(t, dorylus)
		b := newBackend(t, []string{dying, healthy}, remote.Options{Backoff: time.Millisecond})
		remotetest.RunAll(t, b, 3)
		if _, exited := p.Wait(5 * time.Second); !exited {
			t.Errorf("the dying function is still running: %s", p.Output())
		}
		if u := b.Usage(); u.Failures < 1 {
			t.Errorf("usage %+v: want the lost call counted", u)
		}
	})
	t.Run("straggler", func(t *testing.T) {
		// Every call to the second function takes 2 s more; a relaunch avoids the endpoint of
		// the straggler, so it lands on the first.
		healthy, _ := remotetest.HTTPFunction(t, dorylus)
		slow, _ := remotetest.HTTPFunction(t, dorylus, "--fault-every", "1", "--fault", "delay", "--fault-delay", "2s")
		b := newBackend(t, []string{healthy, slow}, remote.Options{StragglerFloor: 50 * time.Millisecond, Fixed: true})
		remotetest.RunAll(t, b, 6) // warms the latency statistics of every kind
		start := time.Now()
		remotetest.RunAll(t, b, 4)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Errorf("20 tasks, some sent to a function 2 s slow, took %v: stragglers not relaunched", took)
		}
		if u := b.Usage(); u.Relaunches < 1 {
			t.Errorf("usage %+v: want relaunches", u)
		}
	})
}

// TestGracefulShutdown sends SIGTERM during a slow call: the call is answered, /readyz turns
// 503 meanwhile, and the process exits cleanly.
func TestGracefulShutdown(t *testing.T) {
	url, p := remotetest.HTTPFunction(t, dorylus, "--fault-every", "1", "--fault", "delay", "--fault-delay", "1s")
	b := newBackend(t, []string{url}, remote.Options{StragglerFactor: -1})
	done := make(chan error, 1)
	go func() { _, err := b.Run(context.Background(), remotetest.Tasks(1, 10, 20, 4)[1]); done <- err }()
	time.Sleep(300 * time.Millisecond)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("call in flight at SIGTERM: %v", err)
	}
	if err, exited := p.Wait(10 * time.Second); !exited || err != nil {
		t.Errorf("exit after SIGTERM: exited %v, %v\n%s", exited, err, p.Output())
	}
}

// TestHTTPFunctionRequiresToken calls `dorylus function` without its token and with another
// one: each call is refused 401 and the function runs nothing; the probes answer without one.
func TestHTTPFunctionRequiresToken(t *testing.T) {
	url, p := remotetest.HTTPFunction(t, dorylus)
	for _, token := range []string{"", "other-token"} {
		b, err := knative.New(knative.Options{URLs: []string{url}, Token: token, TLS: remotetest.ClientTLS(t), Tuning: remote.Options{MaxConcurrency: 1}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Run(context.Background(), remotetest.Tasks(1, 10, 20, 4)[0])
		b.Close()
		if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "missing or wrong bearer token") {
			t.Errorf("token %q: %v, want 401 missing or wrong bearer token", token, err)
		}
	}
	for _, path := range []string{"healthz", "readyz"} {
		resp, err := remotetest.HTTPClient(t).Get(url + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("/%s without a token: %v %v", path, resp, err)
		} else {
			resp.Body.Close()
		}
	}
	if strings.Contains(p.Output(), remotetest.Token) {
		t.Errorf("the function logged its token: %s", p.Output())
	}
}

// TestHTTPFunctionNotOfTheJob calls functions that serve HTTPS with a certificate the job must
// not accept: one of another job's CA, and the job's server certificate (its CA's, but not
// named pki.FunctionServerName). Every call fails the TLS handshake before a byte of the task
// or the token is sent, and WaitReady reports the function not ready, naming why.
func TestHTTPFunctionNotOfTheJob(t *testing.T) {
	other, err := pki.Issue("another job")
	if err != nil {
		t.Fatal(err)
	}
	otherDir := remotetest.WriteCredentials(t, other)
	serverDir := remotetest.CredentialsDir(t) // the job's, with the servers' pair as the function's
	for from, to := range map[string]string{pki.CertFile: pki.FunctionCertFile, pki.KeyFile: pki.FunctionKeyFile} {
		b, err := os.ReadFile(filepath.Join(serverDir, from))
		if err == nil {
			err = os.WriteFile(filepath.Join(serverDir, to), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, dir, want string }{
		{"another job's CA", otherDir, "certificate signed by unknown authority"},
		{"the servers' certificate", serverDir, "not " + pki.FunctionServerName},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, p := remotetest.HTTPFunctionOf(t, dorylus, c.dir)
			b := newBackend(t, []string{url}, remote.Options{Attempts: 1})
			if _, err := b.Run(context.Background(), remotetest.Tasks(1, 10, 20, 4)[0]); !contains(err, c.want) {
				t.Errorf("call: %v, want %q", err, c.want)
			}
			err := knative.WaitReady(context.Background(), knative.Options{URLs: []string{url}, TLS: remotetest.ClientTLS(t)}, 3*time.Second)
			if !contains(err, "not ready after 3s") || !contains(err, c.want) {
				t.Errorf("WaitReady: %v, want not ready, %q", err, c.want)
			}
			if out := p.Output(); !strings.Contains(out, "TLS handshake error") {
				t.Errorf("the function did not see a failed handshake:\n%s", out)
			}
		})
	}
}

// TestHTTPFunctionRefusesPlaintext posts a task in plaintext HTTP to a function serving
// HTTPS: the TLS layer answers 400 and the function handles no call (its call counter, read
// over HTTPS with the token, stays at 0).
func TestHTTPFunctionRefusesPlaintext(t *testing.T) {
	url, _ := remotetest.HTTPFunction(t, dorylus)
	plain := "http://" + strings.TrimPrefix(url, "https://")
	req, err := http.NewRequest(http.MethodPost, plain, bytes.NewReader(dispatch.EncodeRequest(&remotetest.Tasks(1, 10, 20, 4)[0])))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+remotetest.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(msg, []byte("HTTP request to an HTTPS server")) {
		t.Errorf("plaintext POST: %d %q, want 400 from the TLS layer", resp.StatusCode, msg)
	}
	req, err = http.NewRequest(http.MethodGet, url+"metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+remotetest.Token)
	resp, err = remotetest.HTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte("\ndorylus_function_calls_total 0\n")) {
		t.Errorf("metrics after a plaintext call:\n%s", metrics)
	}
}
