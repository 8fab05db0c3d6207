package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// serverFlags are the flags the graph-server and param-server commands share.
type serverFlags struct {
	config      string
	listen      string
	listenFD    int
	stopOnStdin bool
}

func (f *serverFlags) add(fs *pflag.FlagSet, defaultPort int) {
	fs.StringVar(&f.config, "config", "", "run config (JSON, the operator's "+jobconfig.ConfigMapKey+"); flags given as well override it")
	fs.StringVar(&f.listen, "listen", fmt.Sprintf(":%d", defaultPort), "address to serve gRPC on")
	fs.IntVar(&f.listenFD, "listen-fd", 0, "serve on this inherited listening socket instead of --listen")
	fs.BoolVar(&f.stopOnStdin, "stop-on-stdin-eof", false, "stop when standard input closes (set by dorylus train for its child processes)")
}

// listener returns the socket to serve on.
func (f *serverFlags) listener() (net.Listener, error) {
	if f.listenFD > 0 {
		file := os.NewFile(uintptr(f.listenFD), "listener")
		defer file.Close()
		lis, err := net.FileListener(file)
		if err != nil {
			return nil, fmt.Errorf("--listen-fd %d: %w", f.listenFD, err)
		}
		return lis, nil
	}
	lis, err := net.Listen("tcp", f.listen)
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
			io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	return ctx, cancel
}

// overrideConfig applies cfg (through apply), then re-applies the flags set on the command
// line, so that they win over the config file.
func overrideConfig(fs *pflag.FlagSet, apply func() error) error {
	set := map[string]string{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = f.Value.String() })
	if err := apply(); err != nil {
		return err
	}
	for name, v := range set {
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
	}
	return nil
}

// graphServerOptions are the flags of `dorylus graph-server`.
type graphServerOptions struct {
	serverFlags
	partition, partitions int
	dataset               string
	peers, paramServers   string
	run                   string
	intervals, workers    int
	model                 string
	layers, hidden, heads int
	dropout, lr, wd       float64
	epochs                int
	seed                  uint64
	staleness             string
	target                float64
	evalEvery, patience   int
	latency               time.Duration
	wire                  bool
	startup, deadAfter    time.Duration
	backend               backendOptions
	usageFile             string
	fetch                 source.Options // how to fetch a remote dataset (from the run config)
	// the GNNTrainingJob of the run config, if one was given
	jobNamespace, jobName string
}

func newGraphServerCommand() *cobra.Command {
	o := graphServerOptions{}
	cmd := &cobra.Command{
		Use:   "graph-server",
		Short: "Serve one partition as a graph server",
		Long: `Graph-server holds one partition of the graph, runs the graph tasks of its intervals, hands
the tensor tasks to its tensor backend, exchanges ghost rows with the other graph servers and
talks to the parameter servers. Graph server 0 coordinates the run and writes its progress to
standard output as JSON lines. Inside a GNNTrainingJob (named by $` + jobconfig.EnvNamespace + ` and
$` + jobconfig.EnvJobName + `, or by the run config) graph server 0 also reports the progress into the
job's status, at most once a second and the final result at once; a failed report is logged to
standard error and training goes on. It keeps serving after the last epoch until it is stopped.`,
		Example: `  dorylus graph-server --config /etc/dorylus/run.json --partition 1
  dorylus graph-server --partition 0 --partitions 2 --dataset parts/ --peers h0:5000,h1:5000 --param-servers p0:5100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.config != "" {
				if err := overrideConfig(cmd.Flags(), func() error { return o.fromConfig(o.config) }); err != nil {
					return err
				}
			}
			return runGraphServer(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.add(f, jobconfig.GraphServerPort)
	f.IntVar(&o.partition, "partition", envInt(jobconfig.EnvPartition), "partition this server holds (default $"+jobconfig.EnvPartition+")")
	f.IntVar(&o.partitions, "partitions", 1, "number of partitions (graph servers)")
	f.StringVar(&o.dataset, "dataset", "cora", "a directory of partition files (dorylus prepare --partitions), or any dataset `dorylus train` takes, partitioned in memory")
	f.StringVar(&o.peers, "peers", "", "comma-separated addresses of the graph servers of every partition, in partition order")
	f.StringVar(&o.paramServers, "param-servers", "", "comma-separated addresses of the parameter-server shards, in shard order")
	f.StringVar(&o.run, "run", "dorylus", "identity of the run, the same on all its servers")
	f.IntVar(&o.intervals, "intervals", 0, "intervals of the partition (0: the tensor workers' number, or --max-concurrency of a remote backend)")
	f.IntVar(&o.workers, "workers", 0, "concurrent tensor tasks of the cpu backend (0: one per interval and epoch in flight — two with a GCN's overlapping passes at staleness ≥ 1)")
	f.StringVar(&o.model, "model", "gcn", "model to train: gcn or gat (the output layer of a gat has one head)")
	f.IntVar(&o.layers, "layers", 2, "number of graph-convolution (gcn) or attention (gat) layers")
	f.IntVar(&o.hidden, "hidden", 16, "width of each hidden layer (gat: features per head)")
	f.IntVar(&o.heads, "heads", 8, "gat: attention heads of each hidden layer, concatenated")
	f.Float64Var(&o.dropout, "dropout", 0.5, "dropout rate on the input of every layer (gat: and on the attention coefficients)")
	f.Float64Var(&o.lr, "lr", 0.01, "Adam learning rate")
	f.Float64Var(&o.wd, "weight-decay", 5e-4, "L2 weight decay on the first layer's weight (gat: on every parameter)")
	f.IntVar(&o.epochs, "epochs", 200, "training epochs")
	f.Uint64Var(&o.seed, "seed", 1, "seed of weights and dropout")
	f.StringVar(&o.staleness, "staleness", "sync", "sync, or the staleness bound S ≥ 0 of asynchronous training")
	f.Float64Var(&o.target, "target-accuracy", 0, "stop once the validation accuracy reaches this fraction (0: never)")
	f.IntVar(&o.evalEvery, "eval-every", 1, "evaluate every N epochs, and after the last")
	f.IntVar(&o.patience, "patience", 0, "select by validation as the GAT paper (with --eval-every 1): report the evaluation of the last epoch that reached both the best validation accuracy and the lowest validation loss so far, and stop after this many epochs without either (0: report the last epoch)")
	f.DurationVar(&o.latency, "inject-latency", 0, "latency added to every tensor task (cpu backend)")
	f.BoolVar(&o.wire, "tensor-wire", false, "send tensor tasks through the wire encoding of remote backends (cpu backend)")
	f.DurationVar(&o.startup, "startup-timeout", 2*time.Minute, "how long to wait for the other servers to come up")
	f.DurationVar(&o.deadAfter, "dead-after", rpc.DefaultDeadAfter, "how long a peer may fail its health checks before the run fails naming it (raise it on an overloaded machine)")
	f.StringVar(&o.usageFile, "usage-file", "", "write the tensor backend's call counts to this JSON file when stopping (for dorylus train's cost report)")
	o.backend.addFlags(f)
	return cmd
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// fromConfig sets the options from a run config.
func (o *graphServerOptions) fromConfig(path string) error {
	c, err := jobconfig.Load(path)
	if err != nil {
		return err
	}
	switch c.Model.Architecture {
	case jobconfig.ArchitectureGCN:
		o.model = "gcn"
	case jobconfig.ArchitectureGAT:
		o.model, o.heads = "gat", c.Model.Heads
	default:
		return fmt.Errorf("%s: model %s: this build trains GCN and GAT", path, c.Model.Architecture)
	}
	ds, fetch, err := configDataset(c.Dataset)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	o.dataset, o.fetch = ds, fetch
	o.partitions, o.peers = c.GraphServers.Replicas, strings.Join(c.GraphServers.Peers, ",")
	o.paramServers = strings.Join(c.ParameterServers.Shards, ",")
	o.listen = fmt.Sprintf(":%d", c.GraphServers.Port)
	o.run = c.Job.Namespace + "/" + c.Job.Name + "/" + c.Job.UID
	o.jobNamespace, o.jobName = c.Job.Namespace, c.Job.Name
	o.intervals = c.Training.Intervals
	if c.Backend.CPU != nil {
		o.workers = c.Backend.CPU.Workers
	}
	o.backend.fromConfig(c.Backend)
	o.layers, o.hidden, o.dropout = c.Model.Layers, c.Model.Hidden, c.Model.Dropout
	o.lr, o.wd, o.epochs, o.seed = c.Training.LearningRate, c.Training.WeightDecay, c.Training.Epochs, uint64(c.Training.Seed)
	o.target = c.Training.TargetAccuracy
	o.staleness = strconv.Itoa(c.Training.Staleness)
	if c.Training.Sync {
		o.staleness = "sync"
	}
	return nil
}

// configDataset returns the dataset spec of a run config's dataset and how to fetch it when
// it is remote (downloads go under /tmp, the pods' writable emptyDir).
func configDataset(d jobconfig.Dataset) (string, source.Options, error) {
	switch d.Source {
	case jobconfig.SourceBuiltin:
		return d.Name, source.Options{}, nil
	case jobconfig.SourcePVC:
		return jobconfig.DatasetMountPath + "/" + strings.TrimPrefix(d.Path, "/"), source.Options{}, nil
	case jobconfig.SourceS3:
		if d.S3 == nil {
			return "", source.Options{}, fmt.Errorf("dataset source s3 without a bucket")
		}
		s := d.S3
		return "s3://" + s.Bucket + "/" + strings.TrimPrefix(s.Prefix, "/"), source.Options{S3: objstore.Config{
			Region: s.Region, Endpoint: s.Endpoint, CredentialsDir: s.CredentialsDir}}, nil
	case jobconfig.SourceHTTP:
		return d.URL, source.Options{SHA256: d.SHA256}, nil
	}
	return "", source.Options{}, fmt.Errorf("dataset source %q: this build reads builtin, pvc, s3 and http datasets", d.Source)
}

// parseStaleness parses "sync" or a bound S ≥ 0.
func parseStaleness(s string) (sync bool, bound int, err error) {
	if s == "sync" {
		return true, 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return false, 0, fmt.Errorf("--staleness %q: want sync or a bound S ≥ 0", s)
	}
	return false, n, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// loadPartition reads partition p of parts: its own file from a partitioned directory (of a
// remote dataset, only that file is downloaded), or the whole dataset cut in memory by the
// default plan (deterministic: every server computes the same cut).
func loadPartition(ctx context.Context, spec string, fetch source.Options, p, parts int) (*graph.PartitionData, error) {
	fetch.Partition, fetch.Partitions = p, parts
	spec, err := source.Fetch(ctx, spec, fetch)
	if err != nil {
		return nil, err
	}
	if own := filepath.Join(spec, graph.PartitionFileName(p, parts)); isRegular(own) {
		return graph.ReadPartitionFile(spec, p, parts)
	}
	d, err := graph.Load(spec, graph.LoadOptions{})
	if err != nil {
		return nil, err
	}
	plan, err := partition.Default(d.Adj, parts)
	if err != nil {
		return nil, err
	}
	return partition.DatasetPart(d, plan, p)
}

// statusJob returns the GNNTrainingJob whose status graph server 0 reports into: the one the
// downward API names ($DORYLUS_NAMESPACE, $DORYLUS_JOB_NAME), else the run config's; ok is false
// outside a job.
func (o *graphServerOptions) statusJob() (namespace, name string, ok bool) {
	namespace, name = os.Getenv(jobconfig.EnvNamespace), os.Getenv(jobconfig.EnvJobName)
	if namespace == "" || name == "" {
		namespace, name = o.jobNamespace, o.jobName
	}
	return namespace, name, namespace != "" && name != ""
}

// statusReporter returns the reporter of graph server 0 inside a job, nil elsewhere or when
// the API server cannot be configured (which is logged: status reports are best effort).
func (o *graphServerOptions) statusReporter(stderr io.Writer) graphserver.ProgressReporter {
	ns, name, ok := o.statusJob()
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

func runGraphServer(ctx context.Context, o graphServerOptions, stdout, stderr io.Writer) error {
	sync, stale, err := parseStaleness(o.staleness)
	if err != nil {
		return err
	}
	heads, outHeads := 0, 0
	switch {
	case o.model == "gat" && o.heads < 1:
		return fmt.Errorf("--heads %d: want at least 1", o.heads)
	case o.model == "gat":
		heads, outHeads = o.heads, 1
	case o.model != "gcn":
		return fmt.Errorf("--model %q: want gcn or gat", o.model)
	}
	if o.intervals == 0 {
		o.intervals = o.workers
		if o.backend.remote() {
			o.intervals = o.backend.maxConcurrency
		}
		if o.intervals == 0 {
			o.intervals = runtime.GOMAXPROCS(0)
		}
	}
	if o.workers == 0 {
		o.workers = o.intervals * graphserver.EpochsInFlight(sync, stale, heads)
	}
	var pull *remote.Store
	if o.backend.pull() {
		peers := splitList(o.peers)
		if o.partition < 0 || o.partition >= len(peers) {
			return fmt.Errorf("--data-path %s: --peers %q has no address of partition %d for the functions to fetch from", jobconfig.DataPathPull, o.peers, o.partition)
		}
		if pull, err = remote.NewStore(peers[o.partition]); err != nil {
			return err
		}
	}
	backend, err := o.backend.build(ctx, o.intervals, cpu.Options{Workers: o.workers, Latency: o.latency, Wire: o.wire}, pull)
	if err != nil {
		return err
	}
	defer closeBackend(backend, o.backend.kind, o.usageFile, stderr)
	data, err := loadPartition(ctx, o.dataset, o.fetch, o.partition, o.partitions)
	if err != nil {
		return err
	}
	lis, err := o.listener()
	if err != nil {
		return err
	}
	ctx, cancel := o.context(ctx)
	defer cancel()
	cfg := graphserver.Config{
		Partition: o.partition, Partitions: o.partitions, Intervals: o.intervals, Data: data,
		Peers: splitList(o.peers), ParamServers: splitList(o.paramServers), Run: o.run,
		Layers: o.layers, Hidden: o.hidden, Heads: heads, OutHeads: outHeads, AttentionDropout: o.dropout,
		Dropout: o.dropout, LearningRate: o.lr, WeightDecay: o.wd,
		Epochs: o.epochs, Seed: o.seed, Sync: sync, Staleness: stale, TargetAccuracy: o.target, EvalEvery: o.evalEvery,
		Patience: o.patience,
		Backend:  backend, Startup: o.startup, DeadAfter: o.deadAfter,
	}
	if pull != nil {
		cfg.Pull = pull
	}
	if o.partition == 0 {
		cfg.Events, cfg.Log = stdout, stderr
		if r := o.statusReporter(stderr); r != nil {
			cfg.Status = r
		}
	}
	return graphserver.Run(ctx, cfg, lis)
}

// isRegular reports whether p is a regular file.
func isRegular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
