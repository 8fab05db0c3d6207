package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/knative"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/lambda"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// backendOptions select and configure a graph server's tensor backend (DESIGN.md section 6):
// the flags of `dorylus train --graph-servers`, which it writes into the run config of its
// graph servers (toConfig), and what a graph server reads from its run config (fromConfig).
type backendOptions struct {
	kind string // jobconfig.BackendCPU, BackendLambda or BackendKnative

	workers int           // cpu: concurrent tasks (0: one per interval and epoch in flight)
	latency time.Duration // cpu: added to every task
	wire    bool          // cpu: tasks through the remote backends' wire encoding

	lambdaFunction, lambdaRegion, lambdaQualifier string
	lambdaEndpoints                               string // comma-separated endpoint overrides
	lambdaCredentials                             string // folder of a mounted Secret
	knativeURLs                                   string // comma-separated
	knativeTokenFile                              string // the function's bearer token

	maxConcurrency  int // calls in flight per graph server (0: the number of intervals)
	perEndpoint     int // calls one endpoint serves at once (0: any)
	callTimeout     time.Duration
	stragglerFactor float64
	stragglerFloor  time.Duration

	dataPath string // jobconfig.DataPathInline or DataPathPull (empty: inline)
}

// addFlags registers the backend flags.
func (b *backendOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&b.kind, "backend", jobconfig.BackendCPU, "tensor backend: cpu (a goroutine pool in each graph server), lambda (AWS Lambda Invoke) or knative (HTTP POST)")
	f.StringVar(&b.lambdaFunction, "lambda-function", "", "lambda: name or ARN of the function running `dorylus function`")
	f.StringVar(&b.lambdaRegion, "lambda-region", os.Getenv("AWS_REGION"), "lambda: the function's AWS region (default $AWS_REGION)")
	f.StringVar(&b.lambdaQualifier, "lambda-qualifier", "", "lambda: version or alias to invoke (default $LATEST)")
	f.StringVar(&b.lambdaEndpoints, "lambda-endpoints", "", "lambda: comma-separated endpoint overrides (a VPC endpoint, or aws-lambda-rie emulators with --endpoint-concurrency 1)")
	f.StringVar(&b.lambdaCredentials, "lambda-credentials-dir", "", "lambda: folder with accessKeyID, secretAccessKey and optionally sessionToken (default: the SDK's chain, e.g. IRSA)")
	f.StringVar(&b.knativeURLs, "knative-urls", "", "knative: comma-separated URLs of the Service running `dorylus function`")
	f.StringVar(&b.knativeTokenFile, "knative-token-file", "", "knative: file of the bearer token the function requires (its --token-file); not needed with --insecure")
	f.IntVar(&b.maxConcurrency, "max-concurrency", 0, "lambda, knative: most calls in flight per graph server, which the autotuner stays under (0: the number of intervals)")
	f.IntVar(&b.perEndpoint, "endpoint-concurrency", 0, "lambda, knative: calls one endpoint serves at once (0: any; aws-lambda-rie serves 1). dorylus train deals such endpoints out among its graph servers")
	f.DurationVar(&b.callTimeout, "call-timeout", 0, "lambda, knative: time limit of one call, above the function's own timeout (0: 60s)")
	f.StringVar(&b.dataPath, "data-path", jobconfig.DataPathInline, "lambda, knative: inline (the tensors travel in the requests) or pull (a request is a small descriptor: the function fetches the inputs from the graph server and the weights by version from the parameter server over gRPC, so both must be reachable from it)")
	f.Float64Var(&b.stragglerFactor, "straggler-factor", 0, "lambda, knative: relaunch a call slower than this many times the median of its kind, and --straggler-floor (0: 5; negative: never)")
	f.DurationVar(&b.stragglerFloor, "straggler-floor", 0, "lambda, knative: relaunch no call before this long (0: 500ms)")
}

// remote reports whether the backend calls functions (an empty kind is cpu).
func (b *backendOptions) remote() bool { return b.kind != jobconfig.BackendCPU && b.kind != "" }

// validate checks the flags of the chosen backend.
func (b *backendOptions) validate() error {
	if b.dataPath != "" && b.dataPath != jobconfig.DataPathInline && b.dataPath != jobconfig.DataPathPull {
		return fmt.Errorf("--data-path %q: want %s or %s", b.dataPath, jobconfig.DataPathInline, jobconfig.DataPathPull)
	}
	switch b.kind {
	case jobconfig.BackendCPU, "":
		if b.pull() {
			return fmt.Errorf("--data-path %s: the cpu backend runs its tasks in the graph server; pull is for --backend lambda or knative", jobconfig.DataPathPull)
		}
		return nil
	case jobconfig.BackendLambda:
		if b.lambdaFunction == "" || b.lambdaRegion == "" {
			return fmt.Errorf("--backend lambda: --lambda-function %q and --lambda-region %q are both required", b.lambdaFunction, b.lambdaRegion)
		}
	case jobconfig.BackendKnative:
		if b.knativeURLs == "" {
			return fmt.Errorf("--backend knative: --knative-urls is required")
		}
	default:
		return fmt.Errorf("--backend %q: want cpu, lambda or knative", b.kind)
	}
	switch {
	case b.maxConcurrency < 0:
		return fmt.Errorf("--max-concurrency %d: want 0 (the number of intervals) or more", b.maxConcurrency)
	case b.perEndpoint < 0:
		return fmt.Errorf("--endpoint-concurrency %d: want 0 (any) or more", b.perEndpoint)
	case b.callTimeout < 0:
		return fmt.Errorf("--call-timeout %v: want 0 (the default) or more", b.callTimeout)
	case b.stragglerFloor < 0:
		return fmt.Errorf("--straggler-floor %v: want 0 (the default) or more", b.stragglerFloor)
	}
	return nil
}

// pull reports whether the pull data path is chosen.
func (b *backendOptions) pull() bool { return b.dataPath == jobconfig.DataPathPull }

// endpoints returns the endpoint list of the chosen backend.
func (b *backendOptions) endpoints() []string {
	if b.kind == jobconfig.BackendKnative {
		return splitList(b.knativeURLs)
	}
	return splitList(b.lambdaEndpoints)
}

// forGraphServer returns the options of graph server q of n: endpoints that serve a limited
// number of calls (--endpoint-concurrency) are dealt out round robin, so that no two graph
// servers overload one; others are shared.
func (b backendOptions) forGraphServer(q, n int) (backendOptions, error) {
	eps := b.endpoints()
	if !b.remote() || b.perEndpoint == 0 || len(eps) == 0 {
		return b, nil
	}
	if len(eps) < n {
		return b, fmt.Errorf("--endpoint-concurrency %d with %d endpoints for %d graph servers: each graph server needs an endpoint of its own", b.perEndpoint, len(eps), n)
	}
	var own []string
	for i := q; i < len(eps); i += n {
		own = append(own, eps[i])
	}
	if b.kind == jobconfig.BackendKnative {
		b.knativeURLs = strings.Join(own, ",")
	} else {
		b.lambdaEndpoints = strings.Join(own, ",")
	}
	return b, nil
}

// toConfig returns the run config's backend of these options for graph servers with the given
// intervals (a remote backend's default concurrency) and, for the cost model, a Lambda
// function of memoryMB.
func (b *backendOptions) toConfig(intervals, memoryMB int) jobconfig.Backend {
	var calls *jobconfig.Calls
	if b.perEndpoint != 0 || b.callTimeout != 0 || b.stragglerFactor != 0 || b.stragglerFloor != 0 {
		calls = &jobconfig.Calls{EndpointConcurrency: b.perEndpoint, Timeout: jobconfig.Duration(b.callTimeout),
			StragglerFactor: b.stragglerFactor, StragglerFloor: jobconfig.Duration(b.stragglerFloor)}
	}
	mc := b.maxConcurrency
	if mc == 0 {
		mc = intervals
	}
	switch b.kind {
	case jobconfig.BackendLambda:
		dp := b.dataPath
		if dp == "" {
			dp = jobconfig.DataPathInline
		}
		return jobconfig.Backend{Kind: b.kind, Lambda: &jobconfig.Lambda{FunctionName: b.lambdaFunction, Region: b.lambdaRegion,
			MemoryMB: memoryMB, MaxConcurrency: mc, DataPath: dp, Endpoint: b.lambdaEndpoints,
			CredentialsDir: b.lambdaCredentials, Qualifier: b.lambdaQualifier, Calls: calls}}
	case jobconfig.BackendKnative:
		return jobconfig.Backend{Kind: b.kind, Knative: &jobconfig.Knative{URL: b.knativeURLs, MaxConcurrency: mc,
			DataPath: b.dataPath, Calls: calls, TokenFile: b.knativeTokenFile}}
	}
	return jobconfig.Backend{Kind: jobconfig.BackendCPU, CPU: &jobconfig.CPU{Workers: b.workers,
		InjectLatency: jobconfig.Duration(b.latency), Wire: b.wire}}
}

// fromConfig sets the options from a run config's backend (validated by jobconfig.Load).
func (b *backendOptions) fromConfig(c jobconfig.Backend) {
	*b = backendOptions{kind: c.Kind}
	var calls *jobconfig.Calls
	switch c.Kind {
	case jobconfig.BackendCPU:
		if c.CPU == nil {
			break
		}
		b.workers, b.latency, b.wire = c.CPU.Workers, time.Duration(c.CPU.InjectLatency), c.CPU.Wire
	case jobconfig.BackendLambda:
		l := c.Lambda
		b.lambdaFunction, b.lambdaRegion, b.lambdaEndpoints = l.FunctionName, l.Region, l.Endpoint
		b.lambdaCredentials, b.maxConcurrency, b.lambdaQualifier = l.CredentialsDir, l.MaxConcurrency, l.Qualifier
		b.dataPath, calls = l.DataPath, l.Calls
		if l.Endpoint != "" {
			// an override is one endpoint (an emulator serves one call at a time): never more
			// than MaxConcurrency calls on it, relaunches included
			b.perEndpoint = l.MaxConcurrency
		}
	case jobconfig.BackendKnative:
		b.knativeURLs, b.maxConcurrency, b.dataPath, calls = c.Knative.URL, c.Knative.MaxConcurrency, c.Knative.DataPath, c.Knative.Calls
		b.knativeTokenFile = c.Knative.TokenFile
	}
	if calls != nil {
		if calls.EndpointConcurrency > 0 {
			b.perEndpoint = calls.EndpointConcurrency
		}
		b.callTimeout, b.stragglerFactor, b.stragglerFloor = time.Duration(calls.Timeout), calls.StragglerFactor, time.Duration(calls.StragglerFloor)
	}
}

// build returns the backend of a graph server with the given intervals; cpuOpts configure the
// cpu backend; pull is the store of the pull data path (nil: inline).
func (b *backendOptions) build(ctx context.Context, intervals int, cpuOpts cpu.Options, pull *remote.Store) (dispatch.Backend, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	if !b.remote() {
		return cpu.New(cpuOpts)
	}
	if b.pull() != (pull != nil) {
		return nil, fmt.Errorf("--data-path %q with a task store %v: the pull data path needs the graph server's store, inline none", b.dataPath, pull != nil)
	}
	tune := remote.Options{MaxConcurrency: b.maxConcurrency, PerEndpoint: b.perEndpoint, CallTimeout: b.callTimeout,
		StragglerFactor: b.stragglerFactor, StragglerFloor: b.stragglerFloor, Pull: pull}
	if tune.MaxConcurrency == 0 {
		tune.MaxConcurrency = intervals
	}
	if b.kind == jobconfig.BackendKnative {
		var token string
		if b.knativeTokenFile != "" {
			var err error
			if token, err = pki.LoadToken(b.knativeTokenFile); err != nil {
				return nil, fmt.Errorf("knative backend: %w", err)
			}
		}
		return knative.New(knative.Options{URLs: b.endpoints(), Token: token, Tuning: tune})
	}
	return lambda.New(ctx, lambda.Options{Function: b.lambdaFunction, Region: b.lambdaRegion, Qualifier: b.lambdaQualifier,
		Endpoints: b.endpoints(), CredentialsDir: b.lambdaCredentials, Tuning: tune})
}

// backendUsage is what a graph server's tensor backend did, as --usage-file holds it.
type backendUsage struct {
	Backend    string `json:"backend"`
	Tasks      int64  `json:"tasks"`
	Tries      int64  `json:"tries"` // calls sent, retries and relaunches included (remote backends)
	Retries    int64  `json:"retries"`
	Relaunches int64  `json:"relaunches"`
	Failures   int64  `json:"failures"`
	Splits     int64  `json:"splits"`
	// BilledSeconds sums the time of every call, each rounded up to a millisecond, measured by
	// the caller (remote backends); BusySeconds sums the time of the tasks.
	BilledSeconds float64 `json:"billed_seconds"`
	BusySeconds   float64 `json:"busy_seconds"`
}

// usageOf returns the counts of a backend.
func usageOf(b dispatch.Backend, kind string) backendUsage {
	u := backendUsage{Backend: kind}
	if s, ok := b.(dispatch.StatsReporter); ok {
		st := s.Stats()
		u.Tasks, u.BusySeconds = st.Calls, st.Busy.Seconds()
	}
	if r, ok := b.(*remote.Backend); ok {
		ru := r.Usage()
		u.Tries, u.Retries, u.Relaunches, u.Failures, u.Splits = ru.Tries, ru.Retries, ru.Relaunches, ru.Failures, ru.Splits
		u.BilledSeconds = ru.Billed.Seconds()
	}
	return u
}

// closeBackend closes a backend that holds resources and writes its usage to path (if set);
// failures are logged: the run's result does not depend on them.
func closeBackend(b dispatch.Backend, kind, path string, log io.Writer) {
	if c, ok := b.(dispatch.Closer); ok {
		if err := c.Close(); err != nil {
			fmt.Fprintf(log, "dorylus graph-server: close the %s backend: %v\n", kind, err)
		}
	}
	if path == "" {
		return
	}
	data, err := json.Marshal(usageOf(b, kind))
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(log, "dorylus graph-server: --usage-file: %v\n", err)
	}
}

// usagePath is the --usage-file of graph server q in a run of dorylus train.
func usagePath(dir string, seed uint64, q int) string {
	return filepath.Join(dir, fmt.Sprintf("usage-%d-%d.json", seed, q))
}

// readUsage reads the usage files of the n graph servers of a run of dorylus train.
func readUsage(dir string, seed uint64, n int) ([]backendUsage, error) {
	out := make([]backendUsage, n)
	for q := range out {
		data, err := os.ReadFile(usagePath(dir, seed, q))
		if err != nil {
			return nil, fmt.Errorf("usage of graph server %d: %w", q, err)
		}
		if err := json.Unmarshal(data, &out[q]); err != nil {
			return nil, fmt.Errorf("usage of graph server %d: %s: %w", q, usagePath(dir, seed, q), err)
		}
	}
	return out, nil
}
