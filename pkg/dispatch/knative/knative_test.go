package knative_test

import (
	"context"
	"errors"
	"net/http"
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
	b, err := knative.New(knative.Options{URLs: urls, Token: remotetest.Token, Tuning: tune})
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
		resp, err := http.Get(url + path)
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
	url, _ := remotetest.HTTPFunction(t, dorylus, "--max-request-bytes", "512", "--insecure") // a plaintext task source
	store, reqs := pulltest.Source(t, remotetest.Tasks(7, 60, 50, 16), nil, pki.Identity{})
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
		b, err := knative.New(knative.Options{URLs: []string{url}, Token: token, Tuning: remote.Options{MaxConcurrency: 1}})
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
		resp, err := http.Get(url + path)
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
