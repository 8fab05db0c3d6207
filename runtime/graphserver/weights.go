package graphserver

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// weightCache holds the weight versions this server's tasks pin, each pulled once, when first
// pinned.
type weightCache struct {
	ctx    context.Context // the run's: pulls end with it
	g      *errgroup.Group // owns the pulls
	shards *shards
	keep   *keeper
	params [][2]int // the shape of every parameter tensor

	mu        sync.Mutex
	byVersion map[int]*weightSet
}

// weightSet is one version's weights of every parameter tensor.
type weightSet struct {
	ready chan struct{} // closed once w or err is set
	w     []*tensor.Dense
	err   error
}

// at returns the weights of version v, pulling them from the shards on first use.
func (c *weightCache) at(ctx context.Context, v int) ([]*tensor.Dense, error) {
	ws := c.pull(v)
	select {
	case <-ws.ready:
		return ws.w, ws.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// has reports whether version v is pulled (or failed to be).
func (c *weightCache) has(v int) bool {
	select {
	case <-c.pull(v).ready:
		return true
	default:
		return false
	}
}

// pull returns the cache entry of version v, starting its pull if it has none; it does not
// wait for the pull.
func (c *weightCache) pull(v int) *weightSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws, ok := c.byVersion[v]
	if !ok {
		ws = &weightSet{ready: make(chan struct{})}
		c.byVersion[v] = ws
		c.g.Go(func() error {
			c.fetch(v, ws)
			return nil // the tasks that wait for ws see its error
		})
	}
	return ws
}

// fetch pulls version v from every shard.
func (c *weightCache) fetch(v int, ws *weightSet) {
	defer close(ws.ready)
	ws.w = make([]*tensor.Dense, len(c.params))
	var mu sync.Mutex
	ws.err = fanOut(c.shards.holding(), func(i int) error {
		sh := c.shards.list[i]
		ctx, cancel := context.WithTimeout(c.ctx, rpcTimeout)
		defer cancel()
		r, err := sh.client.Pull(ctx, &rpc.PullRequest{GraphServer: uint32(c.shards.self), Version: uint64(v), Keep: c.keep.load()})
		if err != nil {
			return fmt.Errorf("pull version %d from %s: %w", v, sh.name, err)
		}
		for _, lt := range r.Layers {
			l := int(lt.Layer)
			if !slices.Contains(sh.layers, l) {
				return fmt.Errorf("%s sent layer %d, which it does not hold", sh.name, l)
			}
			w, err := lt.Tensor.View(c.params[l][0], c.params[l][1]) // the reply's data: weights are only read
			if err != nil {
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

// load makes tensors, named as pkg/export names them (named names a parameter list), version 0
// of an inference run, which has no parameter servers; tensors that do not fit are refused.
func (c *weightCache) load(named func([]*tensor.Dense) []export.Slot, tensors []safetensors.Tensor, dataset string) error {
	w := make([]*tensor.Dense, len(c.params))
	for i, p := range c.params {
		w[i] = tensor.NewDense(p[0], p[1])
	}
	if err := export.Load(named(w), tensors, dataset); err != nil {
		return err
	}
	ws := &weightSet{ready: make(chan struct{}), w: w}
	close(ws.ready)
	c.byVersion[0] = ws
	return nil
}
