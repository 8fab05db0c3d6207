// Package harness runs a whole distributed training run in one process: graph servers
// (runtime/graphserver) and parameter servers (runtime/paramserver), each on its own loopback
// listener, with the cpu tensor backend or one the caller builds. Tests use it to drive the graph servers' logic — the
// pipeline across servers, the ghost exchange, the coordinator, evaluation — without building
// or starting the dorylus binary.
package harness

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
	"github.com/dorylus-gnn/dorylus/runtime/paramserver"
)

// Options describe one run.
type Options struct {
	// Dataset is the graph to train on; it is cut into GraphServers partitions by Method
	// (partition.DefaultMethod when empty).
	Dataset      *graph.Dataset
	Method       partition.Method
	GraphServers int
	ParamServers int
	// Train holds the model and training settings (Intervals, Layers, Hidden, Heads, …,
	// Epochs, Seed, Sync, Staleness, EvalEvery, …). Run sets the rest: Partition, Partitions,
	// Data, Peers, ParamServers, Run, Backend, Events, Startup. Train.Metrics, when set, also
	// receives the parameter servers' series.
	Train graphserver.Config
	// Workers is the cpu backend's workers per graph server (0: Intervals · EpochsInFlight, as
	// `dorylus graph-server` chooses).
	Workers int
	// Backend, when set, builds graph server p's tensor backend instead of the cpu one; Run
	// closes it (dispatch.Closer) when the servers have stopped.
	Backend func(p int) (dispatch.Backend, error)
	// Timeout bounds the run (0: 5 minutes).
	Timeout time.Duration
}

// Result is what graph server 0 wrote: one event per epoch, and the final evaluation.
type Result struct {
	Epochs []graphserver.Event
	Final  graphserver.Event
}

// Run trains o and returns graph server 0's progress once it has written the result. Every
// server has stopped when it returns.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Dataset == nil || o.GraphServers < 1 || o.ParamServers < 1 {
		return nil, fmt.Errorf("harness: dataset %v, %d graph servers, %d parameter servers", o.Dataset != nil, o.GraphServers, o.ParamServers)
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Method == "" {
		o.Method = partition.DefaultMethod
	}
	plan, err := partition.New(o.Dataset.Adj, o.GraphServers, o.Method)
	if err != nil {
		return nil, err
	}
	gsLis, err := launcher.Listen(o.GraphServers)
	if err != nil {
		return nil, err
	}
	psLis, err := launcher.Listen(o.ParamServers)
	if err != nil {
		launcher.CloseAll(gsLis)
		return nil, err
	}
	cfg := o.Train
	cfg.Partitions, cfg.Peers, cfg.ParamServers, cfg.Run = o.GraphServers, launcher.Addrs(gsLis), launcher.Addrs(psLis), "harness"
	if cfg.Startup == 0 {
		cfg.Startup = time.Minute
	}
	var configs []graphserver.Config
	for i := range o.GraphServers {
		c := cfg
		c.Partition = i
		if c.Data, err = partition.DatasetPart(o.Dataset, plan, i); err != nil {
			launcher.CloseAll(gsLis)
			launcher.CloseAll(psLis)
			return nil, err
		}
		if c.Backend, err = o.backend(i, &c); err != nil {
			launcher.CloseAll(gsLis)
			launcher.CloseAll(psLis)
			closeBackends(configs)
			return nil, err
		}
		configs = append(configs, c)
	}
	defer closeBackends(configs)
	var shards []*paramserver.Shard
	for i := range o.ParamServers {
		sh, err := paramserver.New(i, o.ParamServers)
		if err == nil && cfg.Metrics != nil {
			err = cfg.Metrics.Register(sh)
		}
		if err != nil {
			launcher.CloseAll(gsLis)
			launcher.CloseAll(psLis)
			closeBackends(configs)
			return nil, err
		}
		shards = append(shards, sh)
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	defer launcher.CloseAll(gsLis) // those a graph server that failed early never served
	reports := launcher.NewReports()
	defer reports.Close()
	configs[0].Events = reports
	psCtx, stopPS := context.WithCancel(ctx)
	defer stopPS()
	var ps errgroup.Group
	for i, lis := range psLis {
		srv, h := rpc.NewServer()
		rpc.RegisterParamServerServer(srv, shards[i])
		ps.Go(func() error { return rpc.Serve(psCtx, lis, srv, h) })
	}
	gsCtx, stopGS := context.WithCancel(ctx)
	defer stopGS()
	gs, gctx := errgroup.WithContext(gsCtx)
	for i, c := range configs {
		gs.Go(func() error { return graphserver.Run(gctx, c, gsLis[i]) })
	}
	col := collect(reports)
	select {
	case <-col.result:
	case <-gctx.Done():
	}
	stopGS()
	runErr := gs.Wait()
	stopPS()
	if err := ps.Wait(); runErr == nil {
		runErr = err
	}
	reports.CloseWrite()
	<-col.done
	res := &col.res
	switch {
	case col.bad != nil:
		return res, col.bad
	case res.Final.Event != graphserver.EventResult && runErr == nil:
		return res, fmt.Errorf("harness: the graph servers stopped before the result: %w", context.Cause(ctx))
	case res.Final.Event != graphserver.EventResult:
		return res, fmt.Errorf("harness: %w", runErr)
	}
	return res, nil
}

// collector takes graph server 0's reports into a Result as they come.
type collector struct {
	res    Result
	bad    error         // the first line that was no event
	result chan struct{} // closed at the result
	done   chan struct{} // closed once every line written is taken
}

// collect takes the reports of rs until its C closes.
func collect(rs *launcher.Reports) *collector {
	c := &collector{result: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for r := range rs.C {
			switch {
			case r.Err != nil && c.bad == nil:
				c.bad = fmt.Errorf("harness: %w", r.Err)
			case r.Event.Event == graphserver.EventEpoch:
				c.res.Epochs = append(c.res.Epochs, r.Event)
			case r.Event.Event == graphserver.EventResult:
				if c.res.Final.Event == "" {
					close(c.result)
				}
				c.res.Final = r.Event
			}
		}
	}()
	return c
}

// backend builds graph server p's tensor backend.
func (o *Options) backend(p int, c *graphserver.Config) (dispatch.Backend, error) {
	if o.Backend != nil {
		return o.Backend(p)
	}
	workers := o.Workers
	if workers == 0 {
		workers = c.Intervals * graphserver.EpochsInFlight(c.Staleness, c.Heads)
	}
	return cpu.New(cpu.Options{Workers: workers})
}

// closeBackends closes the backends that hold resources.
func closeBackends(configs []graphserver.Config) {
	for _, c := range configs {
		if cl, ok := c.Backend.(dispatch.Closer); ok {
			_ = cl.Close()
		}
	}
}
