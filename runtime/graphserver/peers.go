package graphserver

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// rpcTimeout bounds every call to a peer or a parameter server; a dead peer is noticed sooner
// by the health monitor.
const rpcTimeout = time.Minute

// peer is a connection to another graph server or a parameter server.
type peer struct {
	name   string
	conn   *grpc.ClientConn
	client rpc.GraphServerClient // nil for a parameter server
}

// peers are the connections to the other graph servers.
type peers struct {
	self    int
	byPart  []*peer       // [partition]: nil for this server's own
	sent    atomic.Uint64 // tensor payload bytes sent since the last swap
	metrics *metrics
}

// dialPeers connects (lazily) to the graph server of every other partition.
func dialPeers(self int, addrs []string, opts ...rpc.Option) (*peers, error) {
	ps := &peers{self: self, byPart: make([]*peer, len(addrs))}
	for q, addr := range addrs {
		if q == self {
			continue
		}
		conn, err := rpc.Dial(addr, opts...)
		if err != nil {
			ps.close()
			return nil, err
		}
		ps.byPart[q] = &peer{name: fmt.Sprintf("graph server %d (%s)", q, addr), conn: conn, client: rpc.NewGraphServerClient(conn)}
	}
	return ps, nil
}

// others returns the connections to the other graph servers.
func (ps *peers) others() []*peer {
	var out []*peer
	for _, p := range ps.byPart {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// each calls f on every other graph server concurrently, each call bounded by rpcTimeout, and
// returns the first error, naming what was sent (what) and to whom.
func (ps *peers) each(ctx context.Context, what string, f func(ctx context.Context, q int, c rpc.GraphServerClient) error) error {
	var qs []int
	for q, p := range ps.byPart {
		if p != nil {
			qs = append(qs, q)
		}
	}
	return fanOut(qs, func(q int) error { return ps.call(ctx, q, what, f) })
}

// call calls f on the graph server of partition q, bounded by rpcTimeout.
func (ps *peers) call(ctx context.Context, q int, what string, f func(ctx context.Context, q int, c rpc.GraphServerClient) error) error {
	p := ps.byPart[q]
	cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	if err := f(cctx, q, p.client); err != nil {
		return fmt.Errorf("%s to %s: %w", what, p.name, err)
	}
	return nil
}

// push sends every other graph server the batch build returns for it, waits for all, and
// returns the payload bytes sent.
func (ps *peers) push(ctx context.Context, build func(q int) *rpc.RowsBatch) (int64, error) {
	var sent atomic.Int64
	err := ps.each(ctx, "send rows", func(ctx context.Context, q int, c rpc.GraphServerClient) error {
		b := build(q)
		if _, err := c.PushRows(ctx, b); err != nil {
			return err
		}
		n := len(b.Data.Data) + len(b.Rows)
		sent.Add(int64(n))
		ps.sent.Add(uint64(n))
		ps.metrics.sentTo(q, n)
		return nil
	})
	return sent.Load(), err
}

func (ps *peers) close() {
	for _, p := range ps.byPart {
		if p != nil {
			p.conn.Close()
		}
	}
}

// fanOut runs f on every item concurrently, waits for all, and returns the first error.
func fanOut[T any](items []T, f func(T) error) error {
	var g errgroup.Group
	for _, it := range items {
		g.Go(func() error { return f(it) })
	}
	return g.Wait()
}

// indices returns 0..n-1.
func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
