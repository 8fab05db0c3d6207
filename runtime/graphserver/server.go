package graphserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// Run loads the partition, serves on lis, connects to the peers and parameter servers, trains,
// and keeps serving (evaluations, late requests) until ctx ends or the run fails. It returns
// nil after a clean shutdown and the first error otherwise, once every goroutine it started
// has ended.
func Run(ctx context.Context, cfg Config, lis net.Listener) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("graph server %d: %w", cfg.Partition, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	s, err := newServer(gctx, g, cfg)
	if err != nil {
		return fmt.Errorf("graph server %d: %w", cfg.Partition, err)
	}
	srv, h := s.grpcServer()
	g.Go(func() error { return rpc.Serve(gctx, lis, srv, h) })
	if cfg.Health != nil {
		g.Go(func() error { return rpc.ServeHealth(gctx, cfg.Health, h) })
	}
	g.Go(func() error { return s.run(gctx) })
	g.Go(func() error { return s.awaitPreempt(gctx) })
	err = g.Wait()
	if errors.Is(err, errStopped) {
		err = nil
	}
	s.peers.close()
	s.shards.close()
	if c := s.loop.coord; c != nil {
		s.reports.finish(c.failure(err), cfg.StatusFlush)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("graph server %d: %w", cfg.Partition, err)
	}
	return nil
}

// grpcServer returns the gRPC server of s's service, and of Config.Pull's task source, which
// refuses requests larger than the largest a peer sends (layout.maxRequest).
func (s *server) grpcServer() (*grpc.Server, *health.Server) {
	srv, h := rpc.NewServer(rpc.WithTLS(s.cfg.TLS), rpc.WithMaxReceive(s.lay.maxRequest()))
	rpc.RegisterGraphServerServer(srv, s.service())
	if s.cfg.Pull != nil {
		rpc.RegisterTaskSourceServer(srv, s.cfg.Pull)
	}
	return srv, h
}

// service returns s's GraphServer service.
func (s *server) service() *service {
	return &service{cfg: &s.cfg, lay: s.lay, eval: s.eval, post: s.post, ask: s.ask}
}

// newServer builds the model and its buffers, and the connections (not yet used) to the peers
// and parameter servers; its goroutines will run in g and end with ctx.
func newServer(ctx context.Context, g *errgroup.Group, cfg Config) (*server, error) {
	part, cuts, err := newPart(&cfg)
	if err != nil {
		return nil, err
	}
	if err := checkFits(cfg.footprint(part, cfg.dimsOf(part.Features.Cols(), cfg.Data.NumClasses)), memoryLimit(), cfg.Partition); err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, g: g, ctx: ctx, keep: newKeeper(), events: make(chan event, 1024), billing: newBilling(cfg.Backend)}
	if s.metrics, err = newMetrics(cfg.Metrics, cfg.Partition, cfg.Partition == 0, cfg.Backend); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	s.weights = &weightCache{ctx: ctx, g: g, keep: s.keep, byVersion: map[int]*weightSet{}}
	_, remote := cfg.Backend.(dispatch.Biller)
	env := taskEnv{backend: cfg.Backend, weights: s.weights, seed: cfg.Seed, rec: cfg.Trace, remote: remote}
	if p, ok := cfg.Backend.(dispatch.Placer); ok {
		env.place = p.Placement()
	}
	if cfg.Pull != nil {
		env.holder = func(l int) string { return s.shards.holder(l) }
	}
	if s.model, s.lay, s.shape, err = newModel(&s.cfg, part, cuts, env); err != nil {
		return nil, err
	}
	s.weights.params = s.shape.params
	if cfg.Weights != nil {
		if err := s.weights.load(s.model.slots, cfg.Weights, cfg.Data.Meta.Name); err != nil {
			return nil, err
		}
	}
	if s.peers, err = dialPeers(cfg.Partition, cfg.Peers, rpc.WithTLS(cfg.TLS)); err != nil {
		return nil, err
	}
	s.peers.metrics = s.metrics
	if s.shards, err = dialShards(cfg.Partition, cfg.ParamServers, rpc.WithTLS(cfg.TLS)); err != nil {
		s.peers.close()
		return nil, err
	}
	s.weights.shards = s.shards
	s.tasks = &runner{lay: s.lay, model: s.model, peers: s.peers, shards: s.shards, keep: s.keep,
		updates: newUpdates(cfg.updateSize(), cfg.Intervals, s.shape.params),
		pushed:  func(i, v, ck int) { s.post(shardMoved{i, v, ck}) }}
	s.eval = newEvaluator(s.lay, s.model, s.peers, s.weights, cfg.Epochs, cfg.Weights == nil)
	s.loop = newLoop(&s.cfg, s.pipeline(), part.Totals, s.keep, s.weights, s.shards, s.measure)
	s.reports = newReports(&s.cfg, s.metrics)
	return s, nil
}

// run connects, trains and serves until ctx ends.
func (s *server) run(ctx context.Context) error {
	if err := s.connect(ctx); err != nil {
		return err
	}
	if s.cfg.Weights != nil {
		return s.drive(ctx, inferWith{})
	}
	first, err := s.shards.firstEpoch(s.cfg.Epochs)
	if err != nil {
		return err
	}
	return s.drive(ctx, trainFrom{first})
}

// pipeline returns the configuration of the scheduler of s's training, from epoch 0.
func (s *server) pipeline() pipeline.Config {
	c := &s.cfg
	return pipeline.Config{
		Partitions: c.Partitions, Intervals: c.Intervals, Layers: c.Layers, Epochs: c.Epochs,
		Staleness: c.Staleness, DrainEvery: c.DrainEvery,
		Gradients: s.lay.gradients, Local: []int{c.Partition}, ExternalVersions: true, TailOverlap: s.lay.parities > 1,
	}
}

// connect waits for every peer and shard, checks that the peers agree on the run and the
// partitioning, initialises the shards, and starts the health monitors and the version
// watches.
func (s *server) connect(ctx context.Context) error {
	all := s.peers.others()
	for _, sh := range s.shards.list {
		all = append(all, &sh.peer)
	}
	if err := fanOut(all, func(p *peer) error { return rpc.WaitServing(ctx, p.conn, p.name, s.cfg.Startup) }); err != nil {
		return err
	}
	c := &s.cfg
	if err := s.hello(ctx); err != nil {
		return err
	}
	if c.Weights != nil {
		return nil // inference: no parameter servers
	}
	req := &rpc.InitRequest{GraphServer: uint32(c.Partition), Seed: c.Seed, LearningRate: float32(c.LearningRate),
		WeightDecay: float32(c.WeightDecay), Sync: c.Staleness.Sync(), Staleness: uint32(c.Staleness.Bound()), Contributions: uint32(c.contributions()),
		GraphServers: uint32(c.Partitions), Run: c.Run, Dims: s.shape.initDims, Heads: s.shape.heads, OutHeads: s.shape.outHeads, Sage: s.shape.sage}
	if err := s.shards.init(ctx, req, len(s.shape.params), c.Startup); err != nil {
		return err
	}
	for _, p := range s.peers.others() {
		s.spawnLink(func(ctx context.Context) error { return monitorPeer(ctx, p, c.DeadAfter) })
	}
	for _, sh := range s.shards.list {
		s.spawn(func(ctx context.Context) error { return rpc.Monitor(ctx, sh.conn, sh.name, c.DeadAfter) })
	}
	for _, i := range s.shards.holding() {
		s.spawn(func(ctx context.Context) error {
			return s.shards.watch(ctx, i, func(v, ck int, preempt bool) {
				s.post(shardMoved{i, v, ck})
				if preempt {
					s.post(preempted{})
				}
			})
		})
	}
	return nil
}

// hello checks with every peer that both belong to the same run and attempt and agree on the
// partitioning. A peer of another attempt (Aborted) is one a restart deleted and that is still
// terminating, or one whose replacement has not come yet: it is asked again until the right
// one answers, within the startup timeout; when that ends, the error is the last refusal (what
// kept the server waiting), not the deadline that cut the call in flight.
func (s *server) hello(ctx context.Context) error {
	c := &s.cfg
	if c.Startup > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Startup)
		defer cancel()
	}
	hello := func(ctx context.Context, q int, pc rpc.GraphServerClient) error {
		_, err := pc.Hello(ctx, &rpc.HelloRequest{From: uint32(c.Partition), Partitions: uint32(c.Partitions), Intervals: uint32(c.Intervals),
			Ghosts: uint64(s.lay.part.GhostsOf(q)), Run: c.Run, Attempt: uint32(c.Attempt)})
		return err
	}
	var refused error
	for {
		err := s.peers.each(ctx, "hello", hello)
		if err != nil && refused != nil && ctx.Err() != nil {
			return refused
		}
		if status.Code(err) != codes.Aborted {
			return err
		}
		refused = err
		select {
		case <-ctx.Done():
			return err
		case <-time.After(rpc.CheckEvery):
		}
	}
}

// monitorPeer is rpc.Monitor for another graph server. A peer that stopped serving has mostly
// stopped for a failure this server is about to see itself (a parameter server gone): that
// failure, if it comes within the dead-after time, is the one the run reports, not the peer's
// stop.
func monitorPeer(ctx context.Context, p *peer, deadAfter time.Duration) error {
	err := rpc.Monitor(ctx, p.conn, p.name, deadAfter)
	if errors.Is(err, rpc.ErrStoppedServing) {
		t := time.NewTimer(cmp.Or(deadAfter, rpc.DefaultDeadAfter) + rpc.CheckEvery)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return err
}

// newModel builds the model cfg names on the partition cut into cuts, and the layout of its
// buffers.
func newModel(cfg *Config, part *partition.Part, cuts []partition.Interval, env taskEnv) (variant, *layout, modelShape, error) {
	switch {
	case cfg.Heads > 0:
		return newGAT(cfg, part, cuts, env)
	case cfg.SAGE:
		return newSAGE(cfg, part, cuts, env)
	}
	return newGCN(cfg, part, cuts, env)
}
