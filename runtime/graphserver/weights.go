package graphserver

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// shard is a connection to a parameter-server shard.
type shard struct {
	peer
	client  rpc.ParamServerClient
	layers  []int // the layers it holds
	version int   // its newest version, as last heard (driver only)
	// checkpoint is the epoch of its newest checkpoint, 0 for none, as last heard (driver only)
	checkpoint int
}

// initShards sends Init to every shard and checks that together they hold every layer once.
func (s *server) initShards(ctx context.Context) error {
	req := &rpc.InitRequest{GraphServer: uint32(s.cfg.Partition), Seed: s.cfg.Seed, LearningRate: float32(s.cfg.LearningRate),
		WeightDecay: float32(s.cfg.WeightDecay), Sync: s.cfg.Sync, Contributions: uint32(s.cfg.Partitions * s.cfg.Intervals),
		GraphServers: uint32(s.cfg.Partitions), Run: s.cfg.Run}
	for _, d := range s.dims {
		req.Dims = append(req.Dims, uint32(d))
	}
	if g := s.gat; g != nil { // the parameter servers' widths: the output layer's is the classes
		req.Dims[len(req.Dims)-1] = uint32(g.cfg.Classes)
		req.Heads, req.OutHeads = uint32(g.cfg.Heads), uint32(g.cfg.OutHeads)
	}
	err := each(s.shards, func(sh *shard) error {
		// In synchronous mode Init returns once every graph server has sent it: wait as long
		// as for the peers to come up.
		cctx, cancel := context.WithTimeout(ctx, max(rpcTimeout, s.cfg.Startup))
		defer cancel()
		r, err := sh.client.Init(cctx, req)
		if err != nil {
			return fmt.Errorf("init %s: %w", sh.name, err)
		}
		for _, l := range r.Layers {
			sh.layers = append(sh.layers, int(l))
		}
		sh.version = int(r.Version)
		return nil
	})
	if err != nil {
		return err
	}
	held := make([]int, s.numParams())
	for _, sh := range s.shards {
		for _, l := range sh.layers {
			if l >= len(held) {
				return fmt.Errorf("%s holds tensor %d of a model of %d", sh.name, l, len(held))
			}
			held[l]++
		}
	}
	if i := slices.IndexFunc(held, func(n int) bool { return n != 1 }); i >= 0 {
		return fmt.Errorf("tensor %d is held by %d parameter servers, want 1 (are the shard numbers right?)", i, held[i])
	}
	if !s.cfg.Sync {
		return nil
	}
	// A shard that restarted resumed from its last checkpoint: take the others back to it.
	low := math.MaxInt
	for _, sh := range s.shards {
		if len(sh.layers) > 0 {
			low = min(low, sh.version)
		}
	}
	rewind := proto.Clone(req).(*rpc.InitRequest)
	rewind.RewindTo = proto.Uint64(uint64(low))
	return each(s.shards, func(sh *shard) error {
		if len(sh.layers) == 0 || sh.version == low {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		r, err := sh.client.Init(cctx, rewind)
		if err != nil {
			return fmt.Errorf("take %s back from version %d to epoch %d, where another parameter server resumed: %w", sh.name, sh.version, low, err)
		}
		sh.version = int(r.Version)
		return nil
	})
}

// watch follows a shard's versions until ctx ends.
func (s *server) watch(ctx context.Context, i int) {
	sh := s.shards[i]
	stream, err := sh.client.Watch(ctx, &rpc.WatchRequest{GraphServer: uint32(s.cfg.Partition)})
	for err == nil {
		var u *rpc.VersionUpdate
		if u, err = stream.Recv(); err == nil {
			v, ck := int(u.Version), int(u.CheckpointEpoch)
			s.do(func() {
				s.shardVersion(i, v)
				s.shardCheckpoint(i, ck)
			})
		}
	}
	if ctx.Err() == nil {
		s.fail(fmt.Errorf("version stream of %s: %w", sh.name, err))
	}
}

// shardVersion records a shard's newest version; the weight version is the lowest over the
// shards.
func (s *server) shardVersion(i, v int) {
	s.shards[i].version = max(s.shards[i].version, v)
	low := math.MaxInt
	for _, sh := range s.shards {
		if len(sh.layers) > 0 {
			low = min(low, sh.version)
		}
	}
	s.setVersion(low)
}

// shardCheckpoint records the epoch of a shard's newest checkpoint; graph server 0 reports
// the lowest over the shards, the newest epoch all of them have saved.
func (s *server) shardCheckpoint(i, epoch int) {
	s.shards[i].checkpoint = epoch
	if s.coord == nil {
		return
	}
	low := math.MaxInt
	for _, sh := range s.shards {
		if len(sh.layers) > 0 {
			low = min(low, sh.checkpoint)
		}
	}
	s.coord.checkpointed(low)
}

// weightCache holds the weight versions this server's tasks use, each pulled once.
type weightCache struct {
	mu        sync.Mutex
	byVersion map[int]*weightSet
}

// weightSet is one version's weights of every layer.
type weightSet struct {
	ready chan struct{} // closed once w or err is set
	w     []*tensor.Dense
	err   error
}

// weightsAt returns the weights of version v, pulling them from the shards on first use.
func (s *server) weightsAt(ctx context.Context, v int) ([]*tensor.Dense, error) {
	ws := s.weightSetOf(v)
	select {
	case <-ws.ready:
		return ws.w, ws.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// weightSetOf returns the cache entry of version v, starting its pull if it has none; it does
// not wait for the pull. Called when a version appears, it prefetches the weights the next
// intervals will pin, so that their first tensor task does not wait for the round trip.
func (s *server) weightSetOf(v int) *weightSet {
	c := &s.weights
	c.mu.Lock()
	defer c.mu.Unlock()
	ws, ok := c.byVersion[v]
	if !ok {
		ws = &weightSet{ready: make(chan struct{})}
		c.byVersion[v] = ws
		go s.fetch(v, ws)
	}
	return ws
}

// fetch pulls version v from every shard.
func (s *server) fetch(v int, ws *weightSet) {
	defer close(ws.ready)
	ws.w = make([]*tensor.Dense, s.numParams())
	var mu sync.Mutex
	ws.err = each(s.shards, func(sh *shard) error {
		if len(sh.layers) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(s.ctx, rpcTimeout)
		defer cancel()
		r, err := sh.client.Pull(ctx, &rpc.PullRequest{GraphServer: uint32(s.cfg.Partition), Version: uint64(v), Keep: s.keep.Load()})
		if err != nil {
			return fmt.Errorf("pull version %d from %s: %w", v, sh.name, err)
		}
		for _, lt := range r.Layers {
			l := int(lt.Layer)
			if !slices.Contains(sh.layers, l) {
				return fmt.Errorf("%s sent layer %d, which it does not hold", sh.name, l)
			}
			rows, cols := s.paramShape(l)
			w := tensor.NewDense(rows, cols)
			if err := lt.Tensor.DecodeInto(w); err != nil {
				return fmt.Errorf("%s: layer %d: %w", sh.name, l, err)
			}
			mu.Lock()
			ws.w[l] = w
			mu.Unlock()
		}
		return nil
	})
	if ws.err == nil {
		for l, w := range ws.w {
			if w == nil {
				ws.err = fmt.Errorf("version %d: no parameter server sent layer %d", v, l)
			}
		}
	}
}

// release forgets the versions the Keep report no longer needs.
func (c *weightCache) release(k *rpc.Keep) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for v := range c.byVersion {
		if uint64(v) < k.Newest && !slices.Contains(k.Pinned, uint64(v)) {
			delete(c.byVersion, v)
		}
	}
}

// numParams returns the number of parameter tensors: a GCN's weight matrices, or a GAT's W,
// a_dst, a_src and bias of every layer (the parameter servers' "layers").
func (s *server) numParams() int {
	if s.gat != nil {
		return 4 * s.model.Layers
	}
	return s.model.Layers
}

// paramShape returns the shape of parameter tensor i.
func (s *server) paramShape(i int) (rows, cols int) {
	if s.gat != nil {
		p := s.gat.shapes[i]
		return p.Rows, p.Cols
	}
	return s.dims[i], s.dims[i+1]
}

// gradient returns the gradient of parameter tensor l that WU task t pushes.
func (s *server) gradient(t pipeline.Task, l int) *tensor.Dense {
	if s.gat != nil {
		return s.gat.ivs[t.Interval].flatG[l]
	}
	return s.ivs[t.Interval].dwOf(t.Epoch)[l]
}

// pushGradients is WU: it hands the interval's gradient of every parameter tensor to the shard
// holding it.
func (s *server) pushGradients(ctx context.Context, t pipeline.Task, version int) error {
	return each(indices(s.shards), func(i int) error {
		sh := s.shards[i]
		if len(sh.layers) == 0 {
			return nil
		}
		req := &rpc.PushRequest{GraphServer: uint32(s.cfg.Partition), Task: taskRef(t), Version: uint64(version), Keep: s.keep.Load()}
		for _, l := range sh.layers {
			req.Grads = append(req.Grads, &rpc.LayerTensor{Layer: uint32(l), Tensor: rpc.NewTensor(s.gradient(t, l))})
		}
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		r, err := sh.client.Push(cctx, req)
		if err != nil {
			return fmt.Errorf("push gradients to %s: %w", sh.name, err)
		}
		v := int(r.Version)
		s.do(func() { s.shardVersion(i, v) })
		return nil
	})
}

// indices returns 0..len(s)-1.
func indices[T any](s []T) []int {
	out := make([]int, len(s))
	for i := range out {
		out[i] = i
	}
	return out
}
