// Package backends builds a graph server's tensor backend (pkg/dispatch: cpu, lambda, knative)
// from its options: the flags of dorylus train, or the backend section of a run config
// (pkg/jobconfig), which the options are written into and read from. It also keeps the usage a
// graph server reports of its backend when it stops.
package backends

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
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
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// Options select and configure a graph server's tensor backend (package dispatch):
// the flags of `dorylus train --graph-servers` (AddFlags), which it writes into the run config
// of its graph servers (ToConfig), and what a graph server reads from its run config
// (FromConfig) and builds (Build).
type Options struct {
	Kind string // jobconfig.BackendCPU, BackendLambda or BackendKnative

	Workers int           // cpu: concurrent tasks (0: one per interval and epoch in flight)
	Latency time.Duration // cpu: added to every task
	Wire    bool          // cpu: tasks through the remote backends' wire encoding

	LambdaFunction, LambdaRegion, LambdaQualifier string
	LambdaEndpoints                               string // comma-separated endpoint overrides
	LambdaCredentials                             string // folder of a mounted Secret
	KnativeURLs                                   string // comma-separated
	KnativeTokenFile                              string // the function's bearer token

	MaxConcurrency  int // calls in flight per graph server (0: the number of intervals)
	PerEndpoint     int // calls one endpoint serves at once (0: any)
	CallTimeout     time.Duration
	StragglerFactor float64
	StragglerFloor  time.Duration

	DataPath string // jobconfig.DataPathInline or DataPathPull (empty: inline)
	// Placement is jobconfig.PlacementAuto (empty too) or PlacementRemote (Placing).
	Placement string
}

// AddFlags registers the backend flags.
func (b *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&b.Kind, "backend", jobconfig.BackendCPU, "tensor backend: cpu (a goroutine pool in each graph server), lambda (AWS Lambda Invoke) or knative (HTTP POST)")
	f.StringVar(&b.LambdaFunction, "lambda-function", "", "lambda: name or ARN of the function running `dorylus function`")
	f.StringVar(&b.LambdaRegion, "lambda-region", os.Getenv("AWS_REGION"), "lambda: the function's AWS region (default $AWS_REGION)")
	f.StringVar(&b.LambdaQualifier, "lambda-qualifier", "", "lambda: version or alias to invoke (default $LATEST)")
	f.StringVar(&b.LambdaEndpoints, "lambda-endpoints", "", "lambda: comma-separated endpoint overrides (a VPC endpoint, or aws-lambda-rie emulators with --endpoint-concurrency 1)")
	f.StringVar(&b.LambdaCredentials, "lambda-credentials-dir", "", "lambda: folder with accessKeyID, secretAccessKey and optionally sessionToken (default: the SDK's chain, e.g. IRSA)")
	f.StringVar(&b.KnativeURLs, "knative-urls", "", "knative: comma-separated URLs of the Service running `dorylus function`")
	f.StringVar(&b.KnativeTokenFile, "knative-token-file", "", "knative: file of the bearer token the function requires (its --token-file); not needed with --insecure")
	f.IntVar(&b.MaxConcurrency, "max-concurrency", 0, "lambda, knative: most calls in flight per graph server, which the autotuner stays under (0: the number of intervals)")
	f.IntVar(&b.PerEndpoint, "endpoint-concurrency", 0, "lambda, knative: calls one endpoint serves at once (0: any; aws-lambda-rie serves 1). dorylus train deals such endpoints out among its graph servers")
	f.DurationVar(&b.CallTimeout, "call-timeout", 0, "lambda, knative: time limit of one call, above the function's own timeout (0: 60s)")
	f.StringVar(&b.DataPath, "data-path", jobconfig.DataPathInline, "lambda, knative: inline (the tensors travel in the requests) or pull (a request is a small descriptor: the function fetches the inputs from the graph server and the weights by version from the parameter server over gRPC, so both must be reachable from it)")
	f.Float64Var(&b.StragglerFactor, "straggler-factor", 0, "lambda, knative: relaunch a call slower than this many times the median of its kind, and --straggler-floor (0: 5; negative: never)")
	f.DurationVar(&b.StragglerFloor, "straggler-floor", 0, "lambda, knative: relaunch no call before this long (0: 500ms)")
	f.StringVar(&b.Placement, "placement", "", "lambda, knative, and cpu with --inject-latency: auto, the default (a kind of tensor task whose call costs more than computing it in the graph server, by the planner's calibrated model, runs there) or remote (every task is a call)")
}

// Remote reports whether the backend calls functions (an empty kind is cpu).
func (b *Options) Remote() bool { return b.Kind != jobconfig.BackendCPU && b.Kind != "" }

// Validate checks the flags of the chosen backend.
func (b *Options) Validate() error {
	if b.DataPath != "" && b.DataPath != jobconfig.DataPathInline && b.DataPath != jobconfig.DataPathPull {
		return fmt.Errorf("--data-path %q: want %s or %s", b.DataPath, jobconfig.DataPathInline, jobconfig.DataPathPull)
	}
	if b.Placement != "" && b.Placement != jobconfig.PlacementAuto && b.Placement != jobconfig.PlacementRemote {
		return fmt.Errorf("--placement %q: want %s or %s", b.Placement, jobconfig.PlacementAuto, jobconfig.PlacementRemote)
	}
	switch b.Kind {
	case jobconfig.BackendCPU, "":
		if b.Pull() {
			return fmt.Errorf("--data-path %s: the cpu backend runs its tasks in the graph server; pull is for --backend lambda or knative", jobconfig.DataPathPull)
		}
		return nil
	case jobconfig.BackendLambda:
		if b.LambdaFunction == "" || b.LambdaRegion == "" {
			return fmt.Errorf("--backend lambda: --lambda-function %q and --lambda-region %q are both required", b.LambdaFunction, b.LambdaRegion)
		}
	case jobconfig.BackendKnative:
		if b.KnativeURLs == "" {
			return fmt.Errorf("--backend knative: --knative-urls is required")
		}
	default:
		return fmt.Errorf("--backend %q: want cpu, lambda or knative", b.Kind)
	}
	c := jobconfig.Limits.Concurrency
	switch {
	case b.MaxConcurrency != 0 && !c.Contains(b.MaxConcurrency):
		return fmt.Errorf("--max-concurrency %d: want 0 (the number of intervals) or %d to %d", b.MaxConcurrency, c.Min, c.Max)
	case b.PerEndpoint != 0 && !c.Contains(b.PerEndpoint):
		return fmt.Errorf("--endpoint-concurrency %d: want 0 (any) or %d to %d", b.PerEndpoint, c.Min, c.Max)
	}
	return errors.Join(jobconfig.CheckDuration("--call-timeout", b.CallTimeout, 0, jobconfig.MaxCallTimeout),
		jobconfig.CheckDuration("--straggler-floor", b.StragglerFloor, 0, jobconfig.MaxCallTimeout))
}

// Pull reports whether the pull data path is chosen.
func (b *Options) Pull() bool { return b.DataPath == jobconfig.DataPathPull }

// Endpoints returns the endpoint list of the chosen backend.
func (b *Options) Endpoints() []string {
	if b.Kind == jobconfig.BackendKnative {
		return split(b.KnativeURLs)
	}
	return split(b.LambdaEndpoints)
}

// ForGraphServer returns the options of graph server q of n: endpoints that serve a limited
// number of calls (--endpoint-concurrency) are dealt out round robin, so that no two graph
// servers overload one; others are shared.
func (b Options) ForGraphServer(q, n int) (Options, error) {
	eps := b.Endpoints()
	if !b.Remote() || b.PerEndpoint == 0 || len(eps) == 0 {
		return b, nil
	}
	if len(eps) < n {
		return b, fmt.Errorf("--endpoint-concurrency %d with %d endpoints for %d graph servers: each graph server needs an endpoint of its own", b.PerEndpoint, len(eps), n)
	}
	var own []string
	for i := q; i < len(eps); i += n {
		own = append(own, eps[i])
	}
	if b.Kind == jobconfig.BackendKnative {
		b.KnativeURLs = strings.Join(own, ",")
	} else {
		b.LambdaEndpoints = strings.Join(own, ",")
	}
	return b, nil
}

// ToConfig returns the run config's backend of these options for graph servers with the given
// intervals (a remote backend's default concurrency) and, for the cost model, a Lambda
// function of memoryMB.
func (b *Options) ToConfig(intervals, memoryMB int) jobconfig.Backend {
	var calls *jobconfig.Calls
	if b.PerEndpoint != 0 || b.CallTimeout != 0 || b.StragglerFactor != 0 || b.StragglerFloor != 0 {
		calls = &jobconfig.Calls{EndpointConcurrency: b.PerEndpoint, Timeout: jobconfig.Duration(b.CallTimeout),
			StragglerFactor: b.StragglerFactor, StragglerFloor: jobconfig.Duration(b.StragglerFloor)}
	}
	mc := b.MaxConcurrency
	if mc == 0 {
		mc = intervals
	}
	c := jobconfig.Backend{Kind: b.Kind}
	if b.Placement != jobconfig.PlacementAuto {
		c.Placement = b.Placement
	}
	switch b.Kind {
	case jobconfig.BackendLambda:
		dp := b.DataPath
		if dp == "" {
			dp = jobconfig.DataPathInline
		}
		c.Lambda = &jobconfig.Lambda{FunctionName: b.LambdaFunction, Region: b.LambdaRegion,
			MemoryMB: memoryMB, MaxConcurrency: mc, DataPath: dp, Endpoint: b.LambdaEndpoints,
			CredentialsDir: b.LambdaCredentials, Qualifier: b.LambdaQualifier, Calls: calls}
	case jobconfig.BackendKnative:
		c.Knative = &jobconfig.Knative{URL: b.KnativeURLs, MaxConcurrency: mc,
			DataPath: b.DataPath, Calls: calls, TokenFile: b.KnativeTokenFile}
	default:
		c.Kind, c.CPU = jobconfig.BackendCPU, &jobconfig.CPU{Workers: b.Workers, InjectLatency: jobconfig.Duration(b.Latency), Wire: b.Wire}
	}
	return c
}

// FromConfig returns the options of a run config's backend (validated by jobconfig.Load).
func FromConfig(c jobconfig.Backend) Options {
	b := Options{Kind: c.Kind, Placement: c.Placement}
	var calls *jobconfig.Calls
	switch c.Kind {
	case jobconfig.BackendCPU:
		if c.CPU == nil {
			break
		}
		b.Workers, b.Latency, b.Wire = c.CPU.Workers, time.Duration(c.CPU.InjectLatency), c.CPU.Wire
	case jobconfig.BackendLambda:
		l := c.Lambda
		b.LambdaFunction, b.LambdaRegion, b.LambdaEndpoints = l.FunctionName, l.Region, l.Endpoint
		b.LambdaCredentials, b.MaxConcurrency, b.LambdaQualifier = l.CredentialsDir, l.MaxConcurrency, l.Qualifier
		b.DataPath, calls = l.DataPath, l.Calls
		if l.Endpoint != "" {
			// an override is one endpoint (an emulator serves one call at a time): never more
			// than MaxConcurrency calls on it, relaunches included
			b.PerEndpoint = l.MaxConcurrency
		}
	case jobconfig.BackendKnative:
		b.KnativeURLs, b.MaxConcurrency, b.DataPath, calls = c.Knative.URL, c.Knative.MaxConcurrency, c.Knative.DataPath, c.Knative.Calls
		b.KnativeTokenFile = c.Knative.TokenFile
	}
	if calls != nil {
		if calls.EndpointConcurrency > 0 {
			b.PerEndpoint = calls.EndpointConcurrency
		}
		b.CallTimeout, b.StragglerFactor, b.StragglerFloor = time.Duration(calls.Timeout), calls.StragglerFactor, time.Duration(calls.StragglerFloor)
	}
	return b
}

// Build returns the backend of a graph server with the given intervals; cpuOpts configure the
// cpu backend; pull is the store of the pull data path (nil: inline); creds are the job's TLS
// credentials (nil: an insecure run), whose CA a knative function's https certificate must
// chain to.
func (b *Options) Build(ctx context.Context, intervals int, cpuOpts cpu.Options, pull *remote.Store, creds *pki.Credentials) (dispatch.Backend, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	place := b.placement(intervals, cpuOpts.Latency)
	if !b.Remote() {
		cpuOpts.Placement = place
		return cpu.New(cpuOpts)
	}
	if b.Pull() != (pull != nil) {
		return nil, fmt.Errorf("--data-path %q with a task store %v: the pull data path needs the graph server's store, inline none", b.DataPath, pull != nil)
	}
	tune := remote.Options{MaxConcurrency: b.MaxConcurrency, PerEndpoint: b.PerEndpoint, CallTimeout: b.CallTimeout,
		StragglerFactor: b.StragglerFactor, StragglerFloor: b.StragglerFloor, Pull: pull, Placement: place}
	if tune.MaxConcurrency == 0 {
		tune.MaxConcurrency = intervals
	}
	if place != nil {
		var err error
		if tune.Local, err = cpu.New(cpu.Options{Workers: cpuOpts.Workers}); err != nil {
			return nil, err
		}
	}
	if b.Kind == jobconfig.BackendKnative {
		o, err := b.knative(creds)
		if err != nil {
			return nil, err
		}
		o.Tuning = tune
		return knative.New(o)
	}
	return lambda.New(ctx, lambda.Options{Function: b.LambdaFunction, Region: b.LambdaRegion, Qualifier: b.LambdaQualifier,
		Endpoints: b.Endpoints(), CredentialsDir: b.LambdaCredentials, Tuning: tune})
}

// placement returns the placement of a graph server with the given intervals whose cpu
// backend adds latency to every task: nil (every task remote) with --placement remote, or on a
// cpu backend without latency, which runs every task in the graph server anyway; else the
// planner's choice at its shipped calibration (plan.Placing).
func (b *Options) placement(intervals int, latency time.Duration) *dispatch.Placement {
	if b.Placement == jobconfig.PlacementRemote || !b.Remote() && latency == 0 {
		return nil
	}
	p := plan.Placing{Cal: plan.Default(), Function: b.Remote(), Intervals: intervals, Cores: float64(runtime.GOMAXPROCS(0))}
	if !b.Remote() {
		p.Latency = latency
	}
	return dispatch.NewPlacement(func(req *dispatch.TaskRequest) bool {
		t, ok := placeTask(req)
		return ok && p.Local(t)
	})
}

// placeTask returns the shape of a GCN task (a GraphSAGE's half included) for placement; false
// for the others (a GAT's), which stay remote.
func placeTask(req *dispatch.TaskRequest) (plan.Task, bool) {
	if (req.Op != dispatch.OpForward && req.Op != dispatch.OpBackward) || req.W == nil {
		return plan.Task{}, false
	}
	t := plan.Task{Rows: float64(req.NumRows()), In: req.W.Rows, Out: req.W.Cols, Backward: req.Op == dispatch.OpBackward, First: req.Layer == 0}
	if f := req.Features.Sparse; t.First && f != nil {
		t.FeatureEntries = float64(len(f.ColIdx))
	}
	return t, true
}

// knative returns the options of the knative backend but its tuning.
func (b *Options) knative(creds *pki.Credentials) (knative.Options, error) {
	o := knative.Options{URLs: b.Endpoints()}
	if creds != nil {
		o.TLS = creds.FunctionClientConfig()
	}
	if b.KnativeTokenFile != "" {
		var err error
		if o.Token, err = pki.LoadToken(b.KnativeTokenFile); err != nil {
			return o, fmt.Errorf("knative backend: %w", err)
		}
	}
	return o, nil
}

// ReadyTimeout is how long WaitReady waits for the knative functions: a function that mounts
// the job's credentials starts once the job has issued them, and serves a new period's a
// minute or so after they rotate (the kubelet's refresh of a mounted Secret).
const ReadyTimeout = 3 * time.Minute

// WaitReady waits up to ReadyTimeout until the knative functions answer their readiness
// probe over TLS verified with creds (knative.WaitReady); it returns at once for the other
// backends.
func (b *Options) WaitReady(ctx context.Context, creds *pki.Credentials) error {
	if b.Kind != jobconfig.BackendKnative {
		return nil
	}
	o, err := b.knative(creds)
	if err != nil {
		return err
	}
	return knative.WaitReady(ctx, o, ReadyTimeout)
}

// Usage is what a graph server's tensor backend did, as --usage-file holds it.
type Usage struct {
	Backend string `json:"backend"`
	Tasks   int64  `json:"tasks"`
	// LocalTasks of Tasks ran in the graph server (placement by cost); Placed says which kinds.
	LocalTasks int64             `json:"local_tasks"`
	Placed     []dispatch.Placed `json:"placed,omitempty"`
	Tries      int64             `json:"tries"` // calls sent, retries and relaunches included (remote backends)
	Retries    int64             `json:"retries"`
	Relaunches int64             `json:"relaunches"`
	Failures   int64             `json:"failures"`
	Splits     int64             `json:"splits"`
	// BilledSeconds sums the time of every call, each rounded up to a millisecond, measured by
	// the caller (remote backends); BusySeconds sums the time of the tasks.
	BilledSeconds float64 `json:"billed_seconds"`
	BusySeconds   float64 `json:"busy_seconds"`
}

// UsageOf returns the counts of a backend.
func UsageOf(b dispatch.Backend, kind string) Usage {
	u := Usage{Backend: kind}
	if s, ok := b.(dispatch.StatsReporter); ok {
		st := s.Stats()
		u.Tasks, u.BusySeconds = st.Calls, st.Busy.Seconds()
	}
	if p, ok := b.(dispatch.Placer); ok {
		u.Placed = p.Placement().Kinds()
		u.LocalTasks, _ = p.Placement().Counts()
	}
	if c, ok := b.(*cpu.Backend); ok && !c.StandsForCalls() {
		u.LocalTasks = u.Tasks
	}
	if r, ok := b.(*remote.Backend); ok {
		ru := r.Usage()
		u.Tries, u.Retries, u.Relaunches, u.Failures, u.Splits = ru.Tries, ru.Retries, ru.Relaunches, ru.Failures, ru.Splits
		u.BilledSeconds = ru.Billed.Seconds()
	}
	return u
}

// Close closes a backend that holds resources and writes its usage to path (if set);
// failures are logged: the run's result does not depend on them.
func Close(b dispatch.Backend, kind, path string, log io.Writer) {
	if c, ok := b.(dispatch.Closer); ok {
		if err := c.Close(); err != nil {
			fmt.Fprintf(log, "dorylus graph-server: close the %s backend: %v\n", kind, err)
		}
	}
	if path == "" {
		return
	}
	data, err := json.Marshal(UsageOf(b, kind))
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(log, "dorylus graph-server: --usage-file: %v\n", err)
	}
}

// Args returns the flags of dorylus train that give these options: AddFlags parses them back
// into the same options, but for a cpu backend's, whose --workers and --inject-latency the
// command registers.
func (b *Options) Args() []string {
	if !b.Remote() {
		return []string{"--backend", jobconfig.BackendCPU, "--workers", strconv.Itoa(b.Workers), "--inject-latency", b.Latency.String(),
			"--placement", b.Placement}
	}
	a := []string{"--backend", b.Kind}
	if b.Kind == jobconfig.BackendLambda {
		a = append(a, "--lambda-function", b.LambdaFunction, "--lambda-region", b.LambdaRegion, "--lambda-qualifier", b.LambdaQualifier,
			"--lambda-endpoints", b.LambdaEndpoints, "--lambda-credentials-dir", b.LambdaCredentials)
	} else {
		a = append(a, "--knative-urls", b.KnativeURLs, "--knative-token-file", b.KnativeTokenFile)
	}
	return append(a, "--max-concurrency", strconv.Itoa(b.MaxConcurrency), "--endpoint-concurrency", strconv.Itoa(b.PerEndpoint),
		"--call-timeout", b.CallTimeout.String(), "--straggler-factor", strconv.FormatFloat(b.StragglerFactor, 'g', -1, 64),
		"--straggler-floor", b.StragglerFloor.String(), "--data-path", b.DataPath, "--placement", b.Placement)
}

// split returns the items of a comma-separated list; none of an empty one.
func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Placed counts the tensor tasks of graph servers by where they ran: Remote on the backend's
// workers (a function call, or the cpu backend's pool with its injected latency), Local in the
// graph server (placement by cost); Kinds sums each kind of task over the servers.
type Placed struct {
	Remote int64             `json:"remote"`
	Local  int64             `json:"local"`
	Kinds  []dispatch.Placed `json:"kinds,omitempty"`
}

// PlacedOf sums the usage of graph servers.
func PlacedOf(usage []Usage) *Placed {
	p := &Placed{}
	for _, u := range usage {
		p.Remote += u.Tasks - u.LocalTasks
		p.Local += u.LocalTasks
		for _, k := range u.Placed {
			i := slices.IndexFunc(p.Kinds, func(o dispatch.Placed) bool { return o.Task == k.Task && o.Layer == k.Layer && o.Local == k.Local })
			if i < 0 {
				p.Kinds = append(p.Kinds, k)
			} else {
				p.Kinds[i].Tasks += k.Tasks
			}
		}
	}
	return p
}

// String says where the tasks ran, and which kinds ran locally.
func (p *Placed) String() string {
	s := fmt.Sprintf("%d remote, %d in the graph servers", p.Remote, p.Local)
	var local []string
	for _, k := range p.Kinds {
		if k.Local {
			local = append(local, fmt.Sprintf("%s layer %d", k.Task, k.Layer))
		}
	}
	if len(local) > 0 {
		s += " (" + strings.Join(slices.Compact(local), ", ") + ")"
	}
	return s
}
