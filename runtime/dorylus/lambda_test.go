package main

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// lambdaEmulators starts n aws-lambda-rie emulators running `dorylus function` with flags and
// env, and returns the backend options that invoke them, one call at a time each, for every
// tensor task (--placement remote). The graph servers the test starts sign their calls with
// static credentials from the environment.
func lambdaEmulators(t *testing.T, n int, env []string, flags ...string) backends.Options {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	eps := remotetest.Emulators(t, n, remotetest.Tool(t, "aws-lambda-rie"), dorylusBin, env, flags...)
	return backends.Options{Kind: "lambda", LambdaFunction: "function", LambdaRegion: "us-east-1",
		LambdaEndpoints: strings.Join(eps, ","), PerEndpoint: 1, Placement: jobconfig.PlacementRemote}
}

// TestLambdaTrainsCora trains Cora through `dorylus train --graph-servers 2 --backend lambda
// --staleness 1` on four Lambda emulators and expects no more than one point below the test
// accuracy of synchronous training on the cpu backend. One asynchronous run is not
// reproducible, and lands above the synchronous one as often as below (0.831 against 0.820
// seen): what bounded staleness must not do is lose accuracy.
func TestLambdaTrainsCora(t *testing.T) {
	if testing.Short() {
		t.Skip("trains Cora twice")
	}
	b := lambdaEmulators(t, 4, nil)
	common := []string{"train", "--graph-servers", "2", "--intervals", "2", "--output", "json", "--eval-every", "200"}
	base := runCLI(t, append(common, "--staleness", "sync")...)
	lam := runCLI(t, append(append(common, "--staleness", "1"), b.Args()...)...)
	t.Logf("sync cpu: test accuracy %.4f, median epoch %.1f ms; lambda S=1: %.4f, median epoch %.1f ms",
		base.TestAccuracy, 1e3*base.EpochSecondsMedian, lam.TestAccuracy, 1e3*lam.EpochSecondsMedian)
	if lam.TestAccuracy < base.TestAccuracy-0.01 {
		t.Errorf("lambda S=1 test accuracy %.4f, sync cpu %.4f: more than one point below", lam.TestAccuracy, base.TestAccuracy)
	}
	// The cost reports price the Lambda calls (at least 16 a epoch: 4 intervals, 2 layers,
	// forward and backward) and only the servers of the cpu run.
	items := func(rep trainReport) map[string]float64 {
		m := map[string]float64{}
		if rep.Cost != nil {
			for _, it := range rep.Cost.Items {
				m[it.Name] = it.Quantity
			}
		}
		return m
	}
	lc, bc := items(lam), items(base)
	if lam.CostUSD <= 0 || lc["lambda requests"] < 16*200 || lc["lambda duration (3008 MB)"] <= 0 || lc["graph servers (2 × c5n.2xlarge)"] <= 0 {
		t.Errorf("lambda run's cost $%g: %v", lam.CostUSD, lc)
	}
	if base.CostUSD <= 0 || len(bc) != 2 {
		t.Errorf("cpu run's cost $%g: %v, want graph and parameter servers only", base.CostUSD, bc)
	}
}

// TestFunctionBackendsTrainModels trains a GAT and a GraphSAGE network on Cora synchronously
// through `dorylus train --graph-servers 2` with every tensor task a function call, and expects
// the final loss and test accuracy of the cpu backend: the GAT on Lambda emulators (AV, AE and
// their backward passes), the GraphSAGE network (two GCN ops a layer, one per half of
// [W_self; W_neigh]) on Lambda emulators and through `dorylus function` over HTTP (the knative
// backend), each on the push and the pull data path.
func TestFunctionBackendsTrainModels(t *testing.T) {
	creds := jobCredentials(t) // the servers' credentials, whose certificate the knative functions serve
	token := filepath.Join(creds, pki.TokenFile)
	lambda := func(flags ...string) func(*testing.T) backends.Options {
		return func(t *testing.T) backends.Options { return lambdaEmulators(t, 4, nil, flags...) }
	}
	knative := func(flags ...string) func(*testing.T) backends.Options {
		return func(t *testing.T) backends.Options {
			url, _ := remotetest.HTTPFunctionOf(t, dorylusBin, creds, append([]string{"--token-file", token}, flags...)...)
			return backends.Options{Kind: "knative", KnativeURLs: url, KnativeTokenFile: token, Placement: jobconfig.PlacementRemote}
		}
	}
	// the pull data path's functions refuse any request over 2 KiB: only descriptors pass
	pull := []string{"--max-request-bytes", "2048", remotetest.PullLoopback}
	fns := map[string]func(*testing.T) backends.Options{
		"lambda": lambda(), "knative": knative(),
		"lambda-pull": pullMode(lambda(pull...)), "knative-pull": pullMode(knative(pull...)),
	}
	for _, m := range []struct {
		model    string
		backends []string // keys of fns
	}{
		{"gat", []string{"lambda"}},
		{"sage", []string{"lambda", "knative", "lambda-pull", "knative-pull"}},
	} {
		common := []string{"train", "--model", m.model, "--patience", "0", "--epochs", "15", "--graph-servers", "2", "--intervals", "2",
			"--output", "json", "--eval-every", "15", "--credentials-dir", creds}
		base := runCLI(t, common...)
		for _, name := range m.backends {
			t.Run(m.model+"/"+name, func(t *testing.T) {
				b := fns[name](t)
				got := runCLI(t, append(common, b.Args()...)...)
				t.Logf("cpu: loss %.6f, test accuracy %.4f; %s: loss %.6f, test accuracy %.4f",
					base.PerRun[0].FinalLoss, base.TestAccuracy, name, got.PerRun[0].FinalLoss, got.TestAccuracy)
				if math.Abs(got.PerRun[0].FinalLoss-base.PerRun[0].FinalLoss) > 1e-5 || got.TestAccuracy != base.TestAccuracy {
					t.Errorf("%s: loss %.6f, test accuracy %.4f; cpu %.6f, %.4f", name, got.PerRun[0].FinalLoss, got.TestAccuracy, base.PerRun[0].FinalLoss, base.TestAccuracy)
				}
				if got.Cost == nil || got.CostUSD <= 0 {
					t.Errorf("no cost report of the %s run", name)
				}
			})
		}
	}
}

// pullMode returns the options of backend with the pull data path.
func pullMode(backend func(*testing.T) backends.Options) func(*testing.T) backends.Options {
	return func(t *testing.T) backends.Options {
		b := backend(t)
		b.DataPath = jobconfig.DataPathPull
		return b
	}
}

// TestRemoteBackendsKeepResult trains Cora synchronously through `dorylus function` over HTTP
// (the knative backend) and through Lambda emulators whose function fails every third call,
// hangs past the function timeout, or exits mid-call, then on the pull data path through both,
// and expects every epoch to complete with the losses and accuracy of the cpu backend.
func TestRemoteBackendsKeepResult(t *testing.T) {
	o := coraOptions(6)
	o.evalEvery = 3
	dir := coraPartitions(t)
	creds := jobCredentials(t) // the servers' and the knative functions' token
	token := filepath.Join(creds, pki.TokenFile)
	train := func(t *testing.T, b backends.Options) (runResult, backends.Usage) {
		t.Helper()
		stats := serverStats{rss: map[string]int64{}}
		res, err := launchOnce(context.Background(), dorylusBin, dir, dir, o, distOptions{graphServers: 2, paramServers: 1, staleness: jobconfig.Sync, intervals: 2, backend: b, tlsDir: creds},
			1, newProgress(io.Discard, o.epochs), os.Stderr, &stats)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Curve) != o.epochs {
			t.Fatalf("%d epochs, want %d", len(res.Curve), o.epochs)
		}
		us, err := launcher.ReadUsage(dir, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		var sum backends.Usage
		for _, u := range us {
			sum.Tasks, sum.Tries, sum.Retries, sum.Failures = sum.Tasks+u.Tasks, sum.Tries+u.Tries, sum.Retries+u.Retries, sum.Failures+u.Failures
		}
		return res, sum
	}
	want, _ := train(t, backends.Options{Kind: "cpu"})
	lambdaFaults := func(env []string, flags ...string) func(*testing.T) backends.Options {
		return func(t *testing.T) backends.Options {
			return lambdaEmulators(t, 4, env, flags...)
		}
	}
	for _, c := range []struct {
		name    string
		backend func(*testing.T) backends.Options
		faulty  bool
	}{
		{"knative", func(t *testing.T) backends.Options {
			url, _ := remotetest.HTTPFunctionOf(t, dorylusBin, creds)
			return backends.Options{Kind: "knative", KnativeURLs: url, KnativeTokenFile: remotetest.TokenFile(t), Placement: jobconfig.PlacementRemote}
		}, false},
		{"lambda-error", lambdaFaults(nil, "--fault-every", "5", "--fault", "error"), true},
		{"lambda-hang", func(t *testing.T) backends.Options {
			b := lambdaFaults([]string{"AWS_LAMBDA_FUNCTION_TIMEOUT=1"}, "--fault-every", "7", "--fault", "hang")(t)
			b.CallTimeout, b.StragglerFactor = 5*time.Second, -1
			return b
		}, true},
		{"lambda-exit", lambdaFaults(nil, "--fault-every", "5", "--fault", "exit"), true},
		// the pull data path, with functions that have no credentials of their own and refuse
		// any request over 2 KiB: only descriptors pass, each emulator's function has the
		// graph server certify a key it made (one more call each), and the functions fetch
		// inputs and weights from the servers' advertised addresses over mutual TLS with it
		{"lambda-pull", pullMode(lambdaFaults(nil, "--max-request-bytes", "2048", remotetest.PullLoopback)), false},
		{"lambda-pull-exit", pullMode(lambdaFaults(nil, "--max-request-bytes", "2048", "--fault-every", "5", "--fault", "exit", remotetest.PullLoopback)), true},
		{"knative-pull", pullMode(func(t *testing.T) backends.Options {
			url, _ := remotetest.HTTPFunctionOf(t, dorylusBin, creds, "--max-request-bytes", "2048", "--token-file", token, remotetest.PullLoopback)
			return backends.Options{Kind: "knative", KnativeURLs: url, KnativeTokenFile: token, Placement: jobconfig.PlacementRemote}
		}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.backend(t)
			start := time.Now()
			got, u := train(t, b)
			t.Logf("%d epochs in %v: %d tasks, %d calls, %d failed, %d retried", o.epochs, time.Since(start).Round(time.Millisecond), u.Tasks, u.Tries, u.Failures, u.Retries)
			if c.faulty && (u.Failures == 0 || u.Retries == 0 || u.Tries <= u.Tasks) {
				t.Errorf("usage %+v: no failed and retried calls", u)
			}
			if u.Tasks == 0 || u.Tries < u.Tasks {
				t.Errorf("usage %+v: want the tasks counted", u)
			}
			for e := range got.Curve {
				if diff := math.Abs(got.Curve[e].Loss - want.Curve[e].Loss); diff > 1e-6 {
					t.Errorf("epoch %d: loss %.7f, cpu backend %.7f", e+1, got.Curve[e].Loss, want.Curve[e].Loss)
				}
			}
			if got.TestAcc != want.TestAcc {
				t.Errorf("test accuracy %.4f, cpu backend %.4f", got.TestAcc, want.TestAcc)
			}
		})
	}
}
