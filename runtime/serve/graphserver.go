package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// GraphServer is one graph server of a run: the run config and what its command line adds.
type GraphServer struct {
	Process
	// Run is the run config, validated (jobconfig.Load); an inference's model card replaces
	// its model section.
	Run *jobconfig.RunConfig
	// Partition is the partition this server holds; Attempt the job's restart it was started
	// in (graph servers of different attempts refuse each other).
	Partition, Attempt int
	// Startup bounds the wait for the other servers to come up (0: as long as it takes).
	Startup time.Duration
	// UsageFile, if not empty, receives the tensor backend's call counts when stopping.
	UsageFile string
	// TraceFile, if not empty, receives a timeline of the server's tasks and waits when
	// stopping (Chrome trace-event JSON).
	TraceFile string
	// Stdout receives graph server 0's progress as JSON lines; Stderr every server's log.
	Stdout, Stderr io.Writer
}

// RunGraphServer opens what graph server g needs — its inference model, tensor backend,
// partition, credentials, sockets, metrics, export and, for graph server 0 inside a
// GNNTrainingJob, the job's status — and serves until ctx ends (or standard input closes, if
// asked), then writes its usage and trace files.
func RunGraphServer(ctx context.Context, g GraphServer) error {
	s, err := g.assemble(ctx, time.Now())
	if err != nil {
		return err
	}
	defer s.stop()
	err = graphserver.Run(s.ctx, s.cfg, s.lis)
	if g.TraceFile != "" {
		if werr := trace.WriteFile(g.TraceFile, trace.FromRecorder(s.cfg.Trace)); werr != nil {
			err = errors.Join(err, fmt.Errorf("--trace: %w", werr))
		}
	}
	return err
}

// assembled is a graph server ready to serve: its settings, its socket and the context it
// serves under; stop ends that context and closes the backend.
type assembled struct {
	cfg  graphserver.Config
	lis  net.Listener
	ctx  context.Context
	stop func()
}

// assemble builds the settings of graph server g, started at started, and opens what they
// hold; on an error it closes what it opened of the backend.
func (g GraphServer) assemble(ctx context.Context, started time.Time) (_ *assembled, err error) {
	c := g.Run
	cfg, err := graphserver.FromRunConfig(c, g.Partition)
	if err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	var model *export.Model // an inference's
	if c.Inference != nil {
		if model, err = readInferenceModel(ctx, c); err != nil {
			return nil, err
		}
	}
	b, err := backends.FromConfig(c.Backend).ForGraphServer(g.Partition, cfg.Partitions)
	if err != nil {
		return nil, err
	}
	workers := b.Workers
	if workers == 0 {
		workers = cfg.Intervals * graphserver.EpochsInFlight(cfg.Staleness, cfg.Heads)
	}
	var pull *remote.Store
	if b.Pull() {
		addr, err := g.advertised(c.GraphServers.Port)
		if err != nil {
			return nil, err
		}
		if addr == "" {
			addr = cfg.Peers[g.Partition]
		}
		issuer, err := functionIssuer(c.Security)
		if err != nil {
			return nil, err
		}
		if pull, err = remote.NewStore(addr, issuer); err != nil {
			return nil, err
		}
		cfg.Pull = pull
	}
	if cfg.TLS, err = tlsCredentials(c.Security); err != nil {
		return nil, err
	}
	if cfg.Backend, err = b.Build(ctx, cfg.Intervals, cpu.Options{Workers: workers, Latency: b.Latency, Wire: b.Wire}, pull, cfg.TLS); err != nil {
		return nil, err
	}
	s := &assembled{stop: func() { backends.Close(cfg.Backend, b.Kind, g.UsageFile, g.Stderr) }}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	if cfg.Data, err = graphserver.LoadPartition(ctx, c.ServerDataset(), source.Options{}, g.Partition, cfg.Partitions); err != nil {
		return nil, err
	}
	if err := b.WaitReady(ctx, cfg.TLS); err != nil {
		return nil, err
	}
	if s.lis, err = g.listener(c.GraphServers.Port); err != nil {
		return nil, err
	}
	if cfg.Health, err = g.healthListener(); err != nil {
		s.lis.Close()
		return nil, err
	}
	ctx, cancel, preempted := g.context(ctx, c.Checkpoint != nil && c.Inference == nil)
	cfg.Preempt, cfg.DrainTimeout = preempted, g.drain()
	closeBackend := s.stop
	s.ctx, s.stop = ctx, func() { cancel(); closeBackend() }
	reg, err := g.metrics(ctx, g.Stderr)
	if err != nil {
		return nil, err
	}
	cfg.Startup, cfg.Attempt = g.Startup, g.Attempt
	if err := setExport(ctx, &cfg, c, model); err != nil {
		return nil, err
	}
	if reg != nil {
		cfg.Metrics = reg
	}
	if g.Partition == 0 {
		cfg.Events, cfg.Log, cfg.Started = g.Stdout, g.Stderr, started
		if r := g.statusReporter(); r != nil {
			cfg.Status = r
			before, err := reportedBefore(ctx, r)
			if err != nil {
				fmt.Fprintf(g.Stderr, "dorylus graph-server: the cost and the tensor task counts start from 0: %v\n", err)
			}
			cfg.CostBefore, cfg.CallsBefore = before.CostUSD, cost.Calls{Requests: before.TensorCalls, Local: before.LocalTensorTasks}
		}
	}
	if g.TraceFile != "" {
		cfg.Trace = trace.ForRun(g.Partition, cfg.Epochs, cfg.Intervals, cfg.Layers)
	}
	s.cfg = cfg
	return s, nil
}

// job returns the GNNTrainingJob the run config names, if any: a run of dorylus train names
// none (its job has no UID).
func (g GraphServer) job() (namespace, name string) {
	if j := g.Run.Job; j.UID != "" {
		return j.Namespace, j.Name
	}
	return "", ""
}

// statusReporter returns the reporter of graph server 0 inside a job, nil elsewhere or when
// the API server cannot be configured (which is logged: status reports are best effort).
func (g GraphServer) statusReporter() *jobstatus.Reporter {
	ns, name, ok := jobstatus.Target(g.job())
	if g.Partition != 0 || !ok {
		return nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		var r *jobstatus.Reporter
		if r, err = jobstatus.New(cfg, ns, name); err == nil {
			return r
		}
	}
	fmt.Fprintf(g.Stderr, "dorylus graph-server: no status reports to GNNTrainingJob %s/%s: %v\n", ns, name, err)
	return nil
}

// reportedBefore reads the cost and the tensor task counts earlier launches of graph server 0
// reported into the job's status.
func reportedBefore(ctx context.Context, r *jobstatus.Reporter) (jobstatus.Progress, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.Reported(ctx)
}
