package graphserver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// rpcTimeout bounds every call to a peer or a parameter server; a dead peer is noticed sooner
// by the health monitor.
const rpcTimeout = time.Minute

// connect dials every peer and shard, waits for them, checks that the peers agree on the run
// and the partitioning, initialises the shards, and starts the health monitors and the
// version watches.
func (s *server) connect(ctx context.Context) error {
	s.peers = make([]*peer, s.cfg.Partitions)
	var all []*peer
	for q, addr := range s.cfg.Peers {
		if q == s.cfg.Partition {
			continue
		}
		conn, err := rpc.Dial(addr)
		if err != nil {
			return err
		}
		s.peers[q] = &peer{name: fmt.Sprintf("graph server %d (%s)", q, addr), conn: conn, client: rpc.NewGraphServerClient(conn)}
		all = append(all, s.peers[q])
	}
	for i, addr := range s.cfg.ParamServers {
		conn, err := rpc.Dial(addr)
		if err != nil {
			return err
		}
		sh := &shard{peer: peer{name: fmt.Sprintf("parameter server %d (%s)", i, addr), conn: conn}, client: rpc.NewParamServerClient(conn)}
		s.shards = append(s.shards, sh)
		all = append(all, &sh.peer)
	}
	if err := each(all, func(p *peer) error { return rpc.WaitServing(ctx, p.conn, p.name, s.cfg.Startup) }); err != nil {
		return err
	}
	hello := func(q int, p *peer) error {
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		_, err := p.client.Hello(cctx, &rpc.HelloRequest{From: uint32(s.cfg.Partition), Partitions: uint32(s.cfg.Partitions),
			Intervals: uint32(s.cfg.Intervals), Ghosts: uint64(s.part.GhostsOf(q)), Run: s.cfg.Run})
		if err != nil {
			return fmt.Errorf("hello to %s: %w", p.name, err)
		}
		return nil
	}
	var peers []int
	for q, p := range s.peers {
		if p != nil {
			peers = append(peers, q)
		}
	}
	if err := each(peers, func(q int) error { return hello(q, s.peers[q]) }); err != nil {
		return err
	}
	if err := s.initShards(ctx); err != nil {
		return err
	}
	for _, p := range all {
		go func() {
			if err := rpc.Monitor(ctx, p.conn, p.name, s.cfg.DeadAfter); err != nil {
				s.fail(err)
			}
		}()
	}
	for i, sh := range s.shards {
		if len(sh.layers) > 0 {
			go s.watch(ctx, i)
		}
	}
	return nil
}

// each runs f on every item concurrently and returns the first error.
func each[T any](items []T, f func(T) error) error {
	errs := make(chan error, len(items))
	for _, it := range items {
		go func() { errs <- f(it) }()
	}
	var first error
	for range items {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Hello implements rpc.GraphServerServer: a peer checks that both belong to the same run and
// agree on the partitioning.
func (s *server) Hello(_ context.Context, r *rpc.HelloRequest) (*rpc.HelloReply, error) {
	q := int(r.From)
	switch {
	case r.Run != s.cfg.Run:
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d belongs to run %q, not %q", s.cfg.Partition, s.cfg.Run, r.Run)
	case int(r.Partitions) != s.cfg.Partitions || int(r.Intervals) != s.cfg.Intervals:
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d runs %d partitions of %d intervals, the caller %d of %d",
			s.cfg.Partition, s.cfg.Partitions, s.cfg.Intervals, r.Partitions, r.Intervals)
	case q < 0 || q >= s.cfg.Partitions || q == s.cfg.Partition:
		return nil, status.Errorf(codes.InvalidArgument, "graph server %d: hello from partition %d", s.cfg.Partition, q)
	case int(r.Ghosts) != len(s.part.SendTo[q]):
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d holds %d ghosts of partition %d, which would send %d rows: the partition files do not belong together",
			q, r.Ghosts, s.cfg.Partition, len(s.part.SendTo[q]))
	}
	return &rpc.HelloReply{}, nil
}

// PushRows implements rpc.GraphServerServer: it stores a peer's rows and tells the scheduler.
func (s *server) PushRows(_ context.Context, b *rpc.RowsBatch) (*rpc.Ack, error) {
	if err := s.storeRows(b); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "graph server %d: batch from %d: %v", s.cfg.Partition, b.From, err)
	}
	return &rpc.Ack{}, nil
}

func (s *server) storeRows(b *rpc.RowsBatch) error {
	q, t := int(b.From), b.Task
	if q < 0 || q >= s.cfg.Partitions || q == s.cfg.Partition || t == nil || b.Data == nil {
		return fmt.Errorf("malformed batch")
	}
	l := int(t.Layer)
	if l >= s.model.Layers {
		return fmt.Errorf("layer %d of %d", l, s.model.Layers)
	}
	d, n := s.rowWidth(l), int(b.Data.Rows)
	if err := b.Data.Shape(n, d); err != nil {
		return err
	}
	if b.Flow == rpc.Flow_FLOW_EVAL {
		return s.eval.receive(q, int(t.Epoch), l, b)
	}
	if int(t.Partition) != q || int(t.Interval) >= s.cfg.Intervals || int(t.Epoch) >= s.cfg.Epochs {
		return fmt.Errorf("task %v is not one of the sender's", t)
	}
	task := pipeline.Task{Partition: q, Interval: int(t.Interval), Epoch: int(t.Epoch), Layer: l, Kind: pipeline.Kind(t.Kind)}
	g, slot := s.global(q, task.Interval), task.Epoch%s.slots
	switch {
	case b.Flow == rpc.Flow_FLOW_FORWARD && task.Kind == pipeline.KindSC:
		off := int(b.Offset)
		if off+n > s.part.GhostsOf(q) {
			return fmt.Errorf("rows %d..%d of a ghost block of %d", off, off+n, s.part.GhostsOf(q))
		}
		if !s.segKnown[g].Load() {
			s.seg[g] = [2]int{off, n}
			s.segKnown[g].Store(true)
		} else if s.seg[g] != [2]int{off, n} {
			return fmt.Errorf("interval %d sent rows %d+%d, earlier %d+%d", task.Interval, off, n, s.seg[g][0], s.seg[g][1])
		}
		base := s.part.Owned + s.part.GhostStart[q] + off
		if err := storeGhostRows(s.p[l][slot], s.scoresOf(l, slot), base, n, b.Data.Data); err != nil {
			return err
		}
	case b.Flow == rpc.Flow_FLOW_GRADIENT && task.Kind == pipeline.KindBackSC:
		c := &s.contrib[l][g][slot]
		if len(b.Rows) != 4*n {
			return fmt.Errorf("%d row ids for %d rows", len(b.Rows)/4, n)
		}
		c.rows = slices.Grow(c.rows[:0], n)[:n]
		if err := rpc.DecodeInt32s(c.rows, b.Rows); err != nil {
			return err
		}
		for k, r := range c.rows {
			if r < 0 || int(r) >= s.part.Owned || (k > 0 && r <= c.rows[k-1]) {
				return fmt.Errorf("gradient row %d out of range or order", r)
			}
		}
		if c.data == nil || cap(c.data.Data) < n*d {
			c.data = tensor.NewDense(n, d)
		}
		c.data.Rows, c.data.Cols, c.data.Data = n, d, c.data.Data[:n*d]
		if err := b.Data.DecodeInto(c.data); err != nil {
			return err
		}
	default:
		return fmt.Errorf("flow %v with task kind %v", b.Flow, task.Kind)
	}
	s.do(func() { s.observe(task) })
	return nil
}

// storeGhostRows decodes n received rows into rows base.. of p, and for a GAT (scores not
// nil) the s_src that follows each row into the same rows of scores.
func storeGhostRows(p, scores *tensor.Dense, base, n int, data []byte) error {
	if scores == nil {
		return rpc.DecodeFloat32s(p.Data[base*p.Cols:(base+n)*p.Cols], data)
	}
	w, h := 4*p.Cols, 4*scores.Cols
	if len(data) != n*(w+h) {
		return fmt.Errorf("%d bytes for %d rows of %d+%d values", len(data), n, p.Cols, scores.Cols)
	}
	for k := range n {
		row := data[k*(w+h) : (k+1)*(w+h)]
		if err := rpc.DecodeFloat32s(p.Row(base+k), row[:w]); err != nil {
			return err
		}
		if err := rpc.DecodeFloat32s(scores.Row(base+k), row[w:]); err != nil {
			return err
		}
	}
	return nil
}

// scoresOf returns a GAT's s_src buffer of layer l in slot, nil for a GCN.
func (s *server) scoresOf(l, slot int) *tensor.Dense {
	if s.gat == nil {
		return nil
	}
	return s.gat.ssrc[l][slot]
}

// observe records a remote task in the scheduler.
func (s *server) observe(t pipeline.Task) {
	if err := s.sched.Observe(t); err != nil {
		s.fail(err)
	}
}

// Progress implements rpc.GraphServerServer.
func (s *server) Progress(_ context.Context, r *rpc.ProgressReport) (*rpc.Ack, error) {
	var tasks []pipeline.Task
	for _, t := range r.Done {
		task := pipeline.Task{Partition: int(t.Partition), Interval: int(t.Interval), Epoch: int(t.Epoch), Layer: int(t.Layer), Kind: pipeline.Kind(t.Kind)}
		if task.Partition != int(r.From) || task.Partition == s.cfg.Partition {
			return nil, status.Errorf(codes.InvalidArgument, "graph server %d: progress of %v from %d", s.cfg.Partition, task, r.From)
		}
		tasks = append(tasks, task)
	}
	s.do(func() {
		for _, t := range tasks {
			s.observe(t)
		}
	})
	return &rpc.Ack{}, nil
}

// broadcastProgress tells every peer that t is done.
func (s *server) broadcastProgress(t pipeline.Task) {
	r := &rpc.ProgressReport{From: uint32(s.cfg.Partition), Done: []*rpc.TaskRef{taskRef(t)}}
	err := each(s.others(), func(p *peer) error {
		ctx, cancel := context.WithTimeout(s.ctx, rpcTimeout)
		defer cancel()
		if _, err := p.client.Progress(ctx, r); err != nil {
			return fmt.Errorf("progress to %s: %w", p.name, err)
		}
		return nil
	})
	if err != nil && s.ctx.Err() == nil {
		s.fail(err)
	}
}

// Command implements rpc.GraphServerServer: the coordinator's stop and evaluate.
func (s *server) Command(_ context.Context, r *rpc.CommandRequest) (*rpc.Ack, error) {
	s.do(func() { s.apply(r) })
	return &rpc.Ack{}, nil
}

// apply carries out a coordinator's command.
func (s *server) apply(r *rpc.CommandRequest) {
	if r.Stop {
		if err := s.sched.StopAfter(int(r.StopAfter)); err != nil {
			s.fail(err)
		}
	}
	if r.Evaluate != nil {
		s.startEval(r.Evaluate.Id, r.Evaluate.Version)
	}
}

// EpochDone implements rpc.GraphServerServer (the coordinator only).
func (s *server) EpochDone(_ context.Context, r *rpc.EpochReport) (*rpc.Ack, error) {
	if s.coord == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d is not the coordinator", s.cfg.Partition)
	}
	s.do(func() { s.coord.epochDone(r) })
	return &rpc.Ack{}, nil
}

// EvalDone implements rpc.GraphServerServer (the coordinator only).
func (s *server) EvalDone(_ context.Context, r *rpc.EvalReport) (*rpc.Ack, error) {
	if s.coord == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d is not the coordinator", s.cfg.Partition)
	}
	s.do(func() { s.coord.evalDone(r) })
	return &rpc.Ack{}, nil
}

// toCoordinator sends a report to graph server 0, or hands it to the local coordinator.
func (s *server) toCoordinator(local func(), remote func(ctx context.Context, c rpc.GraphServerClient) error) {
	if s.coord != nil {
		s.do(local)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, rpcTimeout)
	defer cancel()
	if err := remote(ctx, s.peers[0].client); err != nil && s.ctx.Err() == nil {
		s.fail(fmt.Errorf("report to %s: %w", s.peers[0].name, err))
	}
}

// reportEpoch sends the partition's epoch report to the coordinator.
func (s *server) reportEpoch(r *rpc.EpochReport) {
	s.toCoordinator(func() { s.coord.epochDone(r) }, func(ctx context.Context, c rpc.GraphServerClient) error {
		_, err := c.EpochDone(ctx, r)
		return err
	})
}

// command sends the coordinator's command to every peer and applies it locally.
func (s *server) command(r *rpc.CommandRequest) {
	go func() {
		err := each(s.others(), func(p *peer) error {
			ctx, cancel := context.WithTimeout(s.ctx, rpcTimeout)
			defer cancel()
			if _, err := p.client.Command(ctx, r); err != nil {
				return fmt.Errorf("command to %s: %w", p.name, err)
			}
			return nil
		})
		if err != nil && s.ctx.Err() == nil {
			s.fail(err)
		}
	}()
	s.apply(r)
}

// others returns the connections to the other graph servers.
func (s *server) others() []*peer {
	var out []*peer
	for _, p := range s.peers {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}
