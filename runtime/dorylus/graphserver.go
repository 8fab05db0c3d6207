package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/internal/gctune"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/runtime/serve"
)

// serverFlags are the flags the graph-server and param-server commands share: the run config
// and how this process serves; everything about the run itself is in the config.
type serverFlags struct {
	config string
	serve.Process
}

func (f *serverFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", jobconfig.DefaultPath, "run config (JSON, the operator's "+jobconfig.ConfigMapKey+", or the file dorylus train writes)")
	fs.StringVar(&f.Listen, "listen", "", "address to serve gRPC on (default: the run config's port on every interface)")
	fs.IntVar(&f.ListenFD, "listen-fd", 0, "serve on this inherited listening socket instead of --listen")
	fs.BoolVar(&f.StopOnStdin, "stop-on-stdin-eof", false, "stop when standard input closes (set by dorylus train for its child processes)")
	fs.StringVar(&f.Metrics, "metrics-address", "", "serve Prometheus metrics on GET /metrics at this address, e.g. :9090 (empty: none)")
	fs.StringVar(&f.Health, "health-address", "", "serve the gRPC health service alone, in plaintext, at this address for readiness probes, e.g. :5001 (empty: none)")
	fs.DurationVar(&f.Drain, "drain-timeout", jobconfig.DefaultDrainTimeout, "with checkpoints, how long SIGTERM (a preemption) waits for the graph servers to drain to an epoch boundary, which the parameter servers then save")
	fs.StringVar(&f.Advertise, "advertise-address", os.Getenv(jobconfig.EnvPodIP), "pull data path: the host or host:port functions reach this server at (default $"+jobconfig.EnvPodIP+", the pod's IP, with the run config's port; empty: the run config's address of this server)")
}

// validate checks the numeric flags: --listen-fd 0 (none) or an inherited descriptor past
// standard input, output and error; --drain-timeout from a second to jobconfig.MaxDrainTimeout.
func (f *serverFlags) validate() error {
	return errors.Join(zeroOr(jobconfig.Range{Min: 3, Max: serve.MaxListenFD}, "--listen-fd", f.ListenFD, "none"),
		jobconfig.CheckDuration("--drain-timeout", f.Drain, time.Second, jobconfig.MaxDrainTimeout))
}

// graphServerOptions are the flags of `dorylus graph-server`.
type graphServerOptions struct {
	serverFlags
	partition int
	attempt   int
	startup   time.Duration
	usageFile string
	traceFile string
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
			c, err := jobconfig.Load(o.config)
			if err != nil {
				return err
			}
			return serve.RunGraphServer(cmd.Context(), serve.GraphServer{Process: o.Process, Run: c,
				Partition: o.partition, Attempt: o.attempt, Startup: o.startup, UsageFile: o.usageFile, TraceFile: o.traceFile,
				Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
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
