package graphserver

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// shard is a connection to a parameter-server shard.
type shard struct {
	peer
	addr    string
	pullAt  string // where functions pull its weights: its advertised address (Init), else addr
	client  rpc.ParamServerClient
	layers  []int // the parameter tensors it holds
	version int   // its newest version, as last heard (loop only)
	epoch   int   // the epoch it (re)started the run at (Init)
	// checkpoint is the epoch of its newest checkpoint, 0 for none, as last heard (loop only)
	checkpoint int
}

// shards are the connections to the parameter servers.
type shards struct {
	self int // this graph server
	list []*shard
}

// dialShards connects (lazily) to every parameter server.
func dialShards(self int, addrs []string, opts ...rpc.Option) (*shards, error) {
	ss := &shards{self: self}
	for i, addr := range addrs {
		conn, err := rpc.Dial(addr, opts...)
		if err != nil {
			ss.close()
			return nil, err
		}
		ss.list = append(ss.list, &shard{peer: peer{name: fmt.Sprintf("parameter server %d (%s)", i, addr), conn: conn},
			addr: addr, pullAt: addr, client: rpc.NewParamServerClient(conn)})
	}
	return ss, nil
}

// init sends req (Init) to every shard and checks that together they hold every one of params
// parameter tensors once; it takes every shard back to the lowest epoch any resumed from.
// startup bounds the wait for the other graph servers' Init.
func (ss *shards) init(ctx context.Context, req *rpc.InitRequest, params int, startup time.Duration) error {
	err := fanOut(ss.list, func(sh *shard) error {
		// In synchronous mode Init returns once every graph server has sent it: wait as long
		// as for the peers to come up.
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if startup > 0 {
			cctx, cancel = context.WithTimeout(ctx, max(rpcTimeout, startup))
		}
		defer cancel()
		r, err := sh.client.Init(cctx, req)
		if err != nil {
			return fmt.Errorf("init %s: %w", sh.name, err)
		}
		for _, l := range r.Layers {
			sh.layers = append(sh.layers, int(l))
		}
		sh.version, sh.epoch = int(r.Version), int(r.Epoch)
		if r.Advertise != "" {
			sh.pullAt = r.Advertise
		}
		return nil
	})
	if err != nil {
		return err
	}
	held := make([]int, params)
	for _, sh := range ss.list {
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
	// A shard that restarted resumed from its last checkpoint: take the others back to it.
	low := ss.lowest(func(sh *shard) int { return sh.epoch })
	rewind := proto.Clone(req).(*rpc.InitRequest)
	rewind.RewindTo = proto.Uint64(uint64(low))
	return fanOut(ss.list, func(sh *shard) error {
		if len(sh.layers) == 0 || sh.epoch == low {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		r, err := sh.client.Init(cctx, rewind)
		if err != nil {
			return fmt.Errorf("take %s back from epoch %d to epoch %d, where another parameter server resumed: %w", sh.name, sh.epoch, low, err)
		}
		sh.version, sh.epoch = int(r.Version), int(r.Epoch)
		return nil
	})
}

// firstEpoch returns the epoch to start at: 0, or the epoch of the checkpoint the parameter
// servers resumed from (their epoch at Init; all must agree).
func (ss *shards) firstEpoch(epochs int) (int, error) {
	var first *shard
	for _, sh := range ss.list {
		switch {
		case len(sh.layers) == 0: // holds nothing, never moves
		case first == nil:
			first = sh
		case sh.epoch != first.epoch:
			return 0, fmt.Errorf("the parameter servers start at different epochs (%s at %d, %s at %d): they resumed from checkpoints of different epochs", first.name, first.epoch, sh.name, sh.epoch)
		}
	}
	e := first.epoch // init checked that every layer is held
	if e >= epochs {
		return 0, fmt.Errorf("the parameter servers resumed from the checkpoint of epoch %d: the run of %d epochs is already done", e, epochs)
	}
	return e, nil
}

// lowest returns the lowest of f over the shards that hold a tensor.
func (ss *shards) lowest(f func(*shard) int) int {
	low := math.MaxInt
	for _, sh := range ss.list {
		if len(sh.layers) > 0 {
			low = min(low, f(sh))
		}
	}
	return low
}

// holding returns the shards that hold a tensor, by index.
func (ss *shards) holding() []int {
	var out []int
	for i, sh := range ss.list {
		if len(sh.layers) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// holder returns the address functions pull parameter tensor l from: its shard's.
func (ss *shards) holder(l int) string {
	for _, sh := range ss.list {
		if slices.Contains(sh.layers, l) {
			return sh.pullAt
		}
	}
	return ""
}

// watch follows shard i's versions until ctx ends, handing each update to seen (preempt: the
// shard got SIGTERM).
func (ss *shards) watch(ctx context.Context, i int, seen func(version, checkpoint int, preempt bool)) error {
	sh := ss.list[i]
	stream, err := sh.client.Watch(ctx, &rpc.WatchRequest{GraphServer: uint32(ss.self)})
	for err == nil {
		var u *rpc.VersionUpdate
		if u, err = stream.Recv(); err == nil {
			seen(int(u.Version), int(u.CheckpointEpoch), u.Preempt)
		}
	}
	if ctx.Err() == nil {
		return fmt.Errorf("version stream of %s: %w", sh.name, err)
	}
	return nil
}

// push is WU: it hands the gradient of every parameter tensor of task t, computed at weight
// version, to the shard holding it, and each shard's new version and newest checkpoint to pushed.
func (ss *shards) push(ctx context.Context, t pipeline.Task, version int, keep *rpc.Keep, grad func(l int) *tensor.Dense, pushed func(shard, version, checkpoint int)) error {
	return fanOut(ss.holding(), func(i int) error {
		sh := ss.list[i]
		req := &rpc.PushRequest{GraphServer: uint32(ss.self), Task: taskRef(t), Version: uint64(version), Keep: keep}
		for _, l := range sh.layers {
			req.Grads = append(req.Grads, &rpc.LayerTensor{Layer: uint32(l), Tensor: rpc.NewTensor(grad(l))})
		}
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		r, err := sh.client.Push(cctx, req)
		if err != nil {
			return fmt.Errorf("push gradients to %s: %w", sh.name, err)
		}
		pushed(i, int(r.Version), int(r.CheckpointEpoch))
		return nil
	})
}

func (ss *shards) close() {
	for _, sh := range ss.list {
		sh.conn.Close()
	}
}

func taskRef(t pipeline.Task) *rpc.TaskRef {
	return &rpc.TaskRef{Partition: uint32(t.Partition), Interval: uint32(t.Interval), Epoch: uint32(t.Epoch), Layer: uint32(t.Layer), Kind: uint32(t.Kind)}
}
