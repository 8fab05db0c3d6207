package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/dorylus-gnn/dorylus/internal/gctune"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// serverFlags are the flags the graph-server and param-server commands share: the run config
// and how this process serves; everything about the run itself is in the config.
type serverFlags struct {
	config      string
	listen      string
	listenFD    int
	stopOnStdin bool
	metricsAddr string
	healthAddr  string
	advertise   string
}

func (f *serverFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", jobconfig.DefaultPath, "run config (JSON, the operator's "+jobconfig.ConfigMapKey+", or the file dorylus train writes)")
	fs.StringVar(&f.listen, "listen", "", "address to serve gRPC on (default: the run config's port on every interface)")
	fs.IntVar(&f.listenFD, "listen-fd", 0, "serve on this inherited listening socket instead of --listen")
	fs.BoolVar(&f.stopOnStdin, "stop-on-stdin-eof", false, "stop when standard input closes (set by dorylus train for its child processes)")
	fs.StringVar(&f.metricsAddr, "metrics-address", "", "serve Prometheus metrics on GET /metrics at this address, e.g. :9090 (empty: none)")
	fs.StringVar(&f.healthAddr, "health-address", "", "serve the gRPC health service alone, in plaintext, at this address for readiness probes, e.g. :5001 (empty: none)")
	fs.StringVar(&f.advertise, "advertise-address", os.Getenv(jobconfig.EnvPodIP), "pull data path: the host or host:port functions reach this server at (default $"+jobconfig.EnvPodIP+", the pod's IP, with the run config's port; empty: the run config's address of this server)")
}

// maxListenFD bounds --listen-fd: a file descriptor is a non-negative C int.
const maxListenFD = math.MaxInt32

// validate checks the numeric flags: --listen-fd 0 (none) or an inherited descriptor past
// standard input, output and error.
func (f *serverFlags) validate() error {
	return zeroOr(jobconfig.Range{Min: 3, Max: maxListenFD}, "--listen-fd", f.listenFD, "none")
}

// advertised returns --advertise-address, with port when it names a host alone; "" without it.
func (f *serverFlags) advertised(port int) (string, error) {
	a := f.advertise
	if a == "" {
		return "", nil
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		a = net.JoinHostPort(a, strconv.Itoa(port))
	}
	if host, p, err := net.SplitHostPort(a); err != nil || host == "" || p == "" || len(a) > dispatch.MaxAddress {
		return "", fmt.Errorf("--advertise-address %q: want a host or host:port of at most %d bytes", f.advertise, dispatch.MaxAddress)
	}
	return a, nil
}

// healthListener returns the socket of --health-address; nil without the flag.
func (f *serverFlags) healthListener() (net.Listener, error) {
	if f.healthAddr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", f.healthAddr)
	if err != nil {
		return nil, fmt.Errorf("--health-address: %w", err)
	}
	return lis, nil
}

// functionIssuer returns the function issuer of the run config's credentials, with which the
// pull data path certifies functions' keys: none for an insecure run.
func functionIssuer(s jobconfig.Security) (*pki.Issuer, error) {
	if s.Insecure {
		return nil, nil
	}
	return pki.LoadIssuer(s.TLSDir)
}

// tlsCredentials returns the TLS credentials the run config's security section names: nil for
// an insecure run.
func tlsCredentials(s jobconfig.Security) (*pki.Credentials, error) {
	if s.Insecure {
		return nil, nil
	}
	return pki.Load(s.TLSDir)
}

// metrics starts serving the process's Prometheus series at --metrics-address until ctx ends
// and returns their registry, which holds the Go runtime's and the process's; nil without the
// flag.
func (f *serverFlags) metrics(ctx context.Context, stderr io.Writer) (*prometheus.Registry, error) {
	if f.metricsAddr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", f.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "dorylus: metrics at %s: %v\n", lis.Addr(), err)
		}
	}()
	return reg, nil
}

// listener returns the socket to serve on: the inherited one, --listen, or port on every
// interface.
func (f *serverFlags) listener(port int) (net.Listener, error) {
	if f.listenFD > 0 {
		file := os.NewFile(uintptr(f.listenFD), "listener")
		defer file.Close()
		lis, err := net.FileListener(file)
		if err != nil {
			return nil, fmt.Errorf("--listen-fd %d: %w", f.listenFD, err)
		}
		return lis, nil
	}
	addr := f.listen
	if addr == "" {
		addr = fmt.Sprintf(":%d", port)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	return lis, nil
}

// context returns ctx, cancelled also when standard input closes if asked.
func (f *serverFlags) context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if f.stopOnStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	return ctx, cancel
}

// graphServerOptions are the flags of `dorylus graph-server` and what it takes from the run
// config (fromConfig).
type graphServerOptions struct {
	serverFlags
	partition int
	attempt   int
	startup   time.Duration
	usageFile string
	traceFile string

	run     *jobconfig.RunConfig
	backend backends.Options
	// the GNNTrainingJob of the run config, if it names one (a run of dorylus train does not)
	jobNamespace, jobName string
}

func newGraphServerCommand() *cobra.Command {
	o := graphServerOptions{}
	cmd := &cobra.Command{
		Use:   "graph-server",
		Short: "Serve one partition as a graph server",
		Long: `Graph-server holds one partition of the graph, runs the graph tasks of its intervals, hands
the tensor tasks to its tensor backend, exchanges ghost rows with the other graph servers and
talks to the parameter servers. What to train, on what and with whom comes from the run config
(pkg/jobconfig: the operator's ConfigMap, or the file dorylus train writes for its servers);
the flags say only which partition this process holds and how it serves. Graph server 0
coordinates the run and writes its progress to standard output as JSON lines. Inside a
GNNTrainingJob (named by $` + jobconfig.EnvNamespace + ` and $` + jobconfig.EnvJobName + `, or by
the run config) graph server 0 also reports the progress into the job's status, at most once a
second and the final result at once; a failed report is logged to standard error and training
goes on. It keeps serving after the last epoch until it is stopped.`,
		Example: `  dorylus graph-server --config /etc/dorylus/run.json --partition 1`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			gctune.LimitHeap(cmd.ErrOrStderr())
			gctune.CollectEarly(cmd.Context())
			if err := o.fromConfig(o.config); err != nil {
				return err
			}
			return runGraphServer(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.add(f)
	f.IntVar(&o.partition, "partition", envInt(jobconfig.EnvPartition), "partition this server holds, its ordinal (default $"+jobconfig.EnvPartition+")")
	f.IntVar(&o.attempt, "attempt", envInt(jobconfig.EnvAttempt), "the job's restart this server was started in: graph servers of different attempts refuse each other (default $"+jobconfig.EnvAttempt+")")
	f.DurationVar(&o.startup, "startup-timeout", 2*time.Minute, "how long to wait for the other servers to come up (0: as long as it takes)")
	f.StringVar(&o.usageFile, "usage-file", "", "write the tensor backend's call counts to this JSON file when stopping (for dorylus train's cost report)")
	f.StringVar(&o.traceFile, "trace", "", "write a timeline of the server's tasks and waits to this file when stopping (Chrome trace-event JSON; dorylus train --trace merges the servers')")
	return cmd
}

// maxStartupTimeout bounds --startup-timeout: servers of a run that do not all come up
// within a day will not.
const maxStartupTimeout = 24 * time.Hour

// validate checks the numeric flags against their ranges (jobconfig.Limits where a run config
// or a GNNTrainingJob sets the same thing) before the run config loads: --partition is an
// ordinal of at most Limits.GraphServers graph servers, --attempt a restart count (the job's
// status.restarts, an int32).
func (o *graphServerOptions) validate() error {
	return errors.Join(o.serverFlags.validate(),
		jobconfig.Range{Min: 0, Max: jobconfig.Limits.GraphServers.Max - 1}.Check("--partition", o.partition),
		jobconfig.Range{Min: 0, Max: math.MaxInt32}.Check("--attempt", o.attempt),
		jobconfig.CheckDuration("--startup-timeout", o.startup, 0, maxStartupTimeout),
		checkEnvInt(jobconfig.EnvPartition), checkEnvInt(jobconfig.EnvAttempt))
}

// envInt returns the integer in environment variable name, the default of its flag: 0 when it
// is unset or empty (as the downward API gives a missing label) or not an integer (which
// checkEnvInt refuses).
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// checkEnvInt refuses an environment variable that holds something other than an integer,
// which envInt would read as 0: a second graph server of partition 0.
func checkEnvInt(name string) error {
	v := os.Getenv(name)
	if _, err := strconv.Atoi(v); v != "" && err != nil {
		return fmt.Errorf("$%s=%q: not an integer", name, v)
	}
	return nil
}

// fromConfig loads the run config at path into the options.
func (o *graphServerOptions) fromConfig(path string) error {
	c, err := jobconfig.Load(path)
	if err != nil {
		return err
	}
	o.run = c
	if c.Job.UID != "" { // a GNNTrainingJob's, not dorylus train's
		o.jobNamespace, o.jobName = c.Job.Namespace, c.Job.Name
	}
	o.backend = backends.FromConfig(c.Backend)
	return nil
}

// statusReporter returns the reporter of graph server 0 inside a job, nil elsewhere or when
// the API server cannot be configured (which is logged: status reports are best effort).
func (o *graphServerOptions) statusReporter(stderr io.Writer) *jobstatus.Reporter {
	ns, name, ok := jobstatus.Target(o.jobNamespace, o.jobName)
	if o.partition != 0 || !ok {
		return nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		var r *jobstatus.Reporter
		if r, err = jobstatus.New(cfg, ns, name); err == nil {
			return r
		}
	}
	fmt.Fprintf(stderr, "dorylus graph-server: no status reports to GNNTrainingJob %s/%s: %v\n", ns, name, err)
	return nil
}

// costBefore reads the cost earlier launches of graph server 0 reported into the job's status.
func costBefore(ctx context.Context, r *jobstatus.Reporter) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.CostUSD(ctx)
}

func runGraphServer(ctx context.Context, o graphServerOptions, stdout, stderr io.Writer) error {
	started := time.Now()
	c := o.run
	cfg, err := graphserver.FromRunConfig(c, o.partition)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	var model *export.Model // an inference's
	if c.Inference != nil {
		if model, err = readInferenceModel(ctx, c); err != nil {
			return err
		}
	}
	b, err := o.backend.ForGraphServer(o.partition, cfg.Partitions)
	if err != nil {
		return err
	}
	workers := b.Workers
	if workers == 0 {
		workers = cfg.Intervals * graphserver.EpochsInFlight(cfg.Staleness, cfg.Heads)
	}
	var pull *remote.Store
	if b.Pull() {
		addr, err := o.advertised(c.GraphServers.Port)
		if err != nil {
			return err
		}
		if addr == "" {
			addr = cfg.Peers[o.partition]
		}
		issuer, err := functionIssuer(c.Security)
		if err != nil {
			return err
		}
		if pull, err = remote.NewStore(addr, issuer); err != nil {
			return err
		}
		cfg.Pull = pull
	}
	if cfg.TLS, err = tlsCredentials(c.Security); err != nil {
		return err
	}
	if cfg.Backend, err = b.Build(ctx, cfg.Intervals, cpu.Options{Workers: workers, Latency: b.Latency, Wire: b.Wire}, pull, cfg.TLS); err != nil {
		return err
	}
	defer backends.Close(cfg.Backend, b.Kind, o.usageFile, stderr)
	if cfg.Data, err = graphserver.LoadPartition(ctx, c.ServerDataset(), source.Options{}, o.partition, cfg.Partitions); err != nil {
		return err
	}
	if err := b.WaitReady(ctx, cfg.TLS); err != nil {
		return err
	}
	lis, err := o.listener(c.GraphServers.Port)
	if err != nil {
		return err
	}
	if cfg.Health, err = o.healthListener(); err != nil {
		lis.Close()
		return err
	}
	ctx, cancel := o.context(ctx)
	defer cancel()
	reg, err := o.metrics(ctx, stderr)
	if err != nil {
		return err
	}
	cfg.Startup, cfg.Attempt = o.startup, o.attempt
	if err := setExport(ctx, &cfg, c, model); err != nil {
		return err
	}
	if reg != nil {
		cfg.Metrics = reg
	}
	if o.partition == 0 {
		cfg.Events, cfg.Log, cfg.Started = stdout, stderr, started
		if r := o.statusReporter(stderr); r != nil {
			cfg.Status = r
			if cfg.CostBefore, err = costBefore(ctx, r); err != nil {
				fmt.Fprintf(stderr, "dorylus graph-server: the cost starts from 0: %v\n", err)
			}
		}
	}
	if o.traceFile == "" {
		return graphserver.Run(ctx, cfg, lis)
	}
	cfg.Trace = newRecorder(o.partition, cfg.Epochs, cfg.Intervals, cfg.Layers)
	err = graphserver.Run(ctx, cfg, lis)
	return errors.Join(err, writeTraceFile(o.traceFile, trace.FromRecorder(cfg.Trace)))
}
