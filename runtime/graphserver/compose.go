package graphserver

import (
	"slices"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// compose returns the buffer a Gather reads: the slot of the common epoch when every source
// (local intervals, and with ghosts the remote ones) is read at the same epoch, otherwise a
// composite holding each source's rows of its epoch. done returns the composite to its pool.
func (b *layout) compose(slots []*tensor.Dense, pool *bufPool, reads []pipeline.Read, ghosts bool) (*tensor.Dense, func()) {
	return b.composeRows(slots, pool, reads, func(r pipeline.Read) (lo, hi int, ok bool) {
		switch q := r.From.Partition; {
		case q == b.self:
			return b.ivs[r.From.Interval].Lo, b.ivs[r.From.Interval].Hi, true
		case ghosts:
			seg := b.seg[b.global(q, r.From.Interval)]
			lo = b.part.Owned + b.part.GhostStart[q] + seg[0]
			return lo, lo + seg[1], true
		}
		return 0, 0, false
	})
}

// composeRows returns the slot of the common epoch when every read that rows accepts is of
// one epoch, otherwise a composite from pool holding each accepted read's rows [lo, hi) of its
// epoch. done returns the composite to its pool.
func (b *layout) composeRows(slots []*tensor.Dense, pool *bufPool, reads []pipeline.Read, rows func(pipeline.Read) (lo, hi int, ok bool)) (*tensor.Dense, func()) {
	epoch, mixed := -1, false
	for _, r := range reads {
		if _, _, ok := rows(r); !ok {
			continue
		}
		if epoch >= 0 && r.Epoch != epoch {
			mixed = true
		}
		epoch = r.Epoch
	}
	if !mixed {
		return slots[max(epoch, 0)%b.slots], func() {}
	}
	comp := pool.get()
	d := comp.Cols
	for _, r := range reads {
		if lo, hi, ok := rows(r); ok {
			copy(comp.Data[lo*d:hi*d], slots[r.Epoch%b.slots].Data[lo*d:hi*d])
		}
	}
	return comp, func() { pool.put(comp) }
}

// eachContribution calls add with every row of layer l's contributions that remote intervals
// pushed to the interval's rows, each of the epoch the scheduler names in reads; i is the row
// relative to the interval.
func (b *layout) eachContribution(iv *interval, l int, reads []pipeline.Read, add func(i int, src []float32)) {
	for _, r := range reads {
		if r.From.Partition == b.self {
			continue
		}
		c := &b.contrib[l][b.global(r.From.Partition, r.From.Interval)][r.Epoch%b.slots]
		lo, _ := slices.BinarySearch(c.rows, int32(iv.Lo))
		hi, _ := slices.BinarySearch(c.rows, int32(iv.Hi))
		for k := lo; k < hi; k++ {
			add(int(c.rows[k])-iv.Lo, c.data.Row(k))
		}
	}
}

// bufPool keeps buffers of one shape for reuse.
type bufPool struct {
	mu         sync.Mutex
	rows, cols int
	free       []*tensor.Dense
}

func (p *bufPool) get() *tensor.Dense {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		d := p.free[n-1]
		p.free = p.free[:n-1]
		return d
	}
	return tensor.NewDense(p.rows, p.cols)
}

func (p *bufPool) put(d *tensor.Dense) {
	p.mu.Lock()
	p.free = append(p.free, d)
	p.mu.Unlock()
}
