package lambda_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/lambda"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/pulltest"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

var dorylus string

func TestMain(m *testing.M) { remotetest.MainWithDorylus(m, &dorylus) }

// emulators starts n aws-lambda-rie emulators running `dorylus function` with flags.
func emulators(t testing.TB, n int, env []string, flags ...string) []string {
	t.Helper()
	return remotetest.Emulators(t, n, remotetest.Tool(t, "aws-lambda-rie"), dorylus, env, flags...)
}

// newBackend returns a Lambda backend invoking `function` at the endpoints, one call at a
// time each (as the emulator serves), with static credentials (the emulator checks none).
func newBackend(t testing.TB, endpoints []string, tune remote.Options) *remote.Backend {
	t.Helper()
	if tune.MaxConcurrency == 0 {
		tune.MaxConcurrency = len(endpoints)
	}
	tune.PerEndpoint = 1
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		HTTPClient: emulatorClient{}}
	b, err := lambda.New(context.Background(), lambda.Options{Function: "function", Region: "us-east-1", Endpoints: endpoints, Config: &cfg, Tuning: tune})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// emulatorSettle is how long an emulator is left alone after it answers: it serves one
// invocation at a time, and one that arrives before its function has asked for the next
// (GET /next, just after posting its answer) fails to reserve it and resets the function,
// which costs the call a retry. Lambda itself never sends an execution environment a second
// invocation; the backend's retry covers the emulator's race, but these tests want every
// call to succeed the first time.
const emulatorSettle = 50 * time.Millisecond

// emulatorClient is the SDK's HTTP client, waiting emulatorSettle after every answer.
type emulatorClient struct{}

// Do implements aws.HTTPClient.
func (emulatorClient) Do(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultClient.Do(r)
	time.Sleep(emulatorSettle)
	return res, err
}

// TestEmulator runs every kind of task through three emulators and expects the results of
// dispatch.Execute bit for bit.
func TestEmulator(t *testing.T) {
	b := newBackend(t, emulators(t, 3, nil), remote.Options{})
	remotetest.RunAll(t, b, 4)
	if u := b.Usage(); u.Tasks != 20 || u.Tries != 20 || u.Failures != 0 {
		t.Errorf("usage %+v, want 20 tasks in 20 tries", u)
	}
}

// TestEmulatorGAT runs every GAT op (AV, ∇AV, AE, ∇AE) through two emulators and expects the
// results of dispatch.Execute bit for bit.
func TestEmulatorGAT(t *testing.T) {
	b := newBackend(t, emulators(t, 2, nil), remote.Options{})
	remotetest.RunTasks(t, b, remotetest.GATTasks(9, 40, 30, 8), 2)
	if u := b.Usage(); u.Tasks != 16 || u.Failures != 0 {
		t.Errorf("usage %+v, want 16 tasks without failures", u)
	}
}

// TestEmulatorPull runs every GCN task in pull mode through two emulators whose function
// refuses requests over 512 bytes: it fetches the inputs from a loopback task source and the
// weights by version from a real parameter-server shard, and the results equal
// dispatch.Execute's bit for bit. GAT tasks pull their inputs, weights included, too.
func TestEmulatorPull(t *testing.T) {
	store, reqs := pulltest.Source(t, remotetest.Tasks(7, 60, 50, 16), nil, nil)
	// --insecure: the task source and parameter server are plaintext
	b := newBackend(t, emulators(t, 2, nil, "--max-request-bytes", "512", "--insecure", remotetest.PullLoopback), remote.Options{Pull: store})
	remotetest.RunTasks(t, b, reqs, 2)
	remotetest.RunTasks(t, b, remotetest.GATTasks(9, 40, 30, 8), 1)
	if u := b.Usage(); u.Tasks != 18 || u.Failures != 0 {
		t.Errorf("usage %+v, want 18 tasks without failures", u)
	}
}

// TestEmulatorPullTLS runs GCN tasks in pull mode through an emulator whose function has no
// credentials of its own, from a task source and parameter server that speak mutual TLS only:
// the function answers the first descriptor with the public key it made, the graph server's
// store certifies it with the job's function issuer and sends the call again, and from then
// on every call is served at the first try with the results of dispatch.Execute. A store with
// another job's issuer gets the function certified by that job, whose CA the servers' do not
// chain to; a store without one (a plaintext job) is refused at once.
func TestEmulatorPullTLS(t *testing.T) {
	_, job, own := remotetest.NewJob(t)
	_, _, other := remotetest.NewJob(t)
	endpoints := emulators(t, 1, nil, "--max-request-bytes", "2048", remotetest.PullLoopback)
	tasks := remotetest.Tasks(7, 60, 50, 16)
	store, reqs := pulltest.Source(t, tasks, job, own)
	b := newBackend(t, endpoints, remote.Options{Pull: store})
	remotetest.RunTasks(t, b, reqs, 1)
	if u := b.Usage(); u.Tasks != int64(len(reqs)) || u.Failures != 0 || u.Tries != u.Tasks+1 {
		t.Errorf("usage %+v, want %d tasks without failures in one try each and one certification", u, len(reqs))
	}
	for _, c := range []struct {
		name   string
		issuer *pki.Issuer
		want   string
	}{
		{"another job's issuer", other, "authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"no issuer", nil, "the descriptor carries no CA certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, reqs := pulltest.Source(t, tasks, job, c.issuer)
			b := newBackend(t, endpoints, remote.Options{Pull: store, Attempts: 1})
			if _, err := b.Run(context.Background(), reqs[0]); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestSplitOverPayloadLimit sends a forward task whose request is over Lambda's 6 MB: the
// backend cuts it by rows, and the emulator (which would truncate it) sees only parts under
// the limit.
func TestSplitOverPayloadLimit(t *testing.T) {
	b := newBackend(t, emulators(t, 2, nil), remote.Options{})
	req := remotetest.Tasks(3, 4000, 1433, 16)[0] // ~1.4M non-zero features of 8 bytes each
	if n := len(lambda.EncodePayload(dispatch.EncodeRequest(&req))); n <= lambda.MaxPayloadBytes {
		t.Fatalf("test task of %d bytes fits Lambda's limit", n)
	}
	want, err := dispatch.Execute(&req, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if d := remotetest.Diff(got, want); d != 0 {
		t.Errorf("split task differs by %g", d)
	}
	if u := b.Usage(); u.Splits != 1 || u.Tries < 2 {
		t.Errorf("usage %+v, want one task split into several calls", u)
	}
}

// TestFunctionErrors: a request the function refuses fails at once with its message (the
// emulator reports it only in the payload), an unreachable endpoint is retried elsewhere.
func TestFunctionErrors(t *testing.T) {
	b := newBackend(t, emulators(t, 1, nil, "--max-request-bytes", "100"), remote.Options{})
	_, err := b.Run(context.Background(), remotetest.Tasks(1, 10, 20, 4)[0])
	if !errors.Is(err, dispatch.ErrRequest) || !strings.Contains(err.Error(), "over the limit of 100") {
		t.Fatalf("error %v, want the function's refusal", err)
	}
	if u := b.Usage(); u.Tries != 1 {
		t.Errorf("%d tries of a refused request, want 1", u.Tries)
	}

	bad := tensor.NewDense(3, 3)
	req := remotetest.Tasks(1, 10, 20, 4)[1]
	req.W = bad
	if _, err := b.Run(context.Background(), req); !errors.Is(err, dispatch.ErrRequest) {
		t.Errorf("bad shape: %v, want ErrRequest before any call", err)
	}
}

// TestFaults runs the tasks through emulators whose function fails every third call, hangs
// past the function timeout, or exits mid-call, and expects unchanged results.
func TestFaults(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		b := newBackend(t, emulators(t, 2, nil, "--fault-every", "3", "--fault", "error"), remote.Options{Backoff: time.Millisecond, Attempts: 12})
		remotetest.RunAll(t, b, 3)
		if u := b.Usage(); u.Retries < 4 {
			t.Errorf("usage %+v: want retries of the failed calls", u)
		}
	})
	t.Run("hang", func(t *testing.T) {
		// The emulator ends an invocation at the function timeout (1 s) with an error, which
		// is retried; the call timeout stays above it, so no call is abandoned mid-flight.
		eps := emulators(t, 2, []string{"AWS_LAMBDA_FUNCTION_TIMEOUT=1"}, "--fault-every", "4", "--fault", "hang")
		b := newBackend(t, eps, remote.Options{Backoff: time.Millisecond, CallTimeout: 5 * time.Second, StragglerFactor: -1, Attempts: 8})
		remotetest.RunAll(t, b, 2)
		if u := b.Usage(); u.Retries < 1 {
			t.Errorf("usage %+v: want retries of the timed-out calls", u)
		}
	})
	t.Run("exit", func(t *testing.T) {
		eps := emulators(t, 2, nil, "--fault-every", "4", "--fault", "exit")
		b := newBackend(t, eps, remote.Options{Backoff: time.Millisecond, Attempts: 8})
		remotetest.RunAll(t, b, 3)
		if u := b.Usage(); u.Failures < 1 {
			t.Errorf("usage %+v: want the lost calls counted", u)
		}
	})
}
