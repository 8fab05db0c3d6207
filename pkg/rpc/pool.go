package rpc

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Pool tiers: buffers of 2^minTier .. 2^maxTier bytes (MaxMessage), one sync.Pool each.
const (
	minTier = 8
	maxTier = 30
)

// dirtyPool is a mem.BufferPool of power-of-two buffers that, unlike gRPC's default pool,
// does not zero a buffer it hands out: every buffer the data plane takes from it (a frame
// read from the connection, a message marshalled or received) is overwritten whole before it
// is read. What it holds is bounded by the messages in flight: a free buffer is dropped at
// the second garbage collection after its release (sync.Pool).
type dirtyPool struct {
	tiers [maxTier + 1]sync.Pool
}

// buffers is the pool of every server and client of this package, and of received rows.
var buffers = &dirtyPool{}

// Get returns a buffer of n bytes whose contents are undefined.
func (p *dirtyPool) Get(n int) *[]byte {
	t := tierOf(n)
	if t > maxTier {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<t)
	return &b
}

// Put returns b to the tier its capacity fills; one smaller than the least tier is dropped.
func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minTier {
		return
	}
	t := bits.Len(uint(c)) - 1 // the largest tier c holds whole
	if t > maxTier {
		return
	}
	p.tiers[t].Put(b)
}

// tierOf returns the least tier that holds n bytes.
func tierOf(n int) int {
	if n <= 1<<minTier {
		return minTier
	}
	return bits.Len(uint(n - 1))
}

var _ mem.BufferPool = (*dirtyPool)(nil)
