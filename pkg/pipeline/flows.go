package pipeline

import (
	"fmt"
	"slices"
)

// flows records which rows every interval has produced, flow by flow (see step), and so which
// reads are possible.
type flows struct {
	n, layers int
	allToAll  bool
	reads     [][]int32 // forward sources of each interval, nil when allToAll
	readBy    [][]int32 // intervals that read each interval, nil when allToAll

	// Per flow f and interval g: latest[f*n+g] is the newest epoch g produced (-1: none yet),
	// have[f*n+g] how many of g's sources for f have produced anything (unused when allToAll),
	// haveAll[f] how many intervals have produced anything, barrier[f] how many produced each
	// recent epoch.
	latest  []int32
	have    []int32
	haveAll []int32
	barrier [][2]epochCount
}

// epochCount counts events of one epoch; a ring of two holds the two most recent epochs.
type epochCount struct{ epoch, count int }

// countEpoch adds one to ring's count for epoch e and returns the new count.
func countEpoch(ring *[2]epochCount, e int) int {
	c := &ring[e&1]
	if c.epoch != e {
		*c = epochCount{epoch: e}
	}
	c.count++
	return c.count
}

// newFlows returns the flows of cfg's intervals (ids, with each partition's first at offset),
// none produced yet.
func newFlows(cfg *Config, ids []IntervalID, offset []int) flows {
	n, nf := len(ids), 2*cfg.Layers
	fl := flows{n: n, layers: cfg.Layers, allToAll: cfg.Reads == nil,
		latest: make([]int32, nf*n), haveAll: make([]int32, nf), barrier: make([][2]epochCount, nf)}
	for i := range fl.latest {
		fl.latest[i] = -1
	}
	for f := range fl.barrier {
		fl.barrier[f] = [2]epochCount{{-1, 0}, {-1, 0}}
	}
	if fl.allToAll {
		return fl
	}
	fl.have = make([]int32, nf*n)
	fl.reads, fl.readBy = make([][]int32, n), make([][]int32, n)
	all := make([]int32, n)
	for g := range all {
		all[g] = int32(g)
	}
	for g, id := range ids {
		srcs, ok := cfg.Reads[id]
		if !ok {
			fl.reads[g] = all
			continue
		}
		r := make([]int32, 0, len(srcs))
		for _, src := range srcs {
			r = append(r, int32(offset[src.Partition]+src.Interval))
		}
		slices.Sort(r)
		fl.reads[g] = slices.Compact(r)
	}
	for g, srcs := range fl.reads {
		for _, src := range srcs {
			fl.readBy[src] = append(fl.readBy[src], int32(g))
		}
	}
	return fl
}

// sources returns the intervals whose flow-f rows interval g reads, or nil for all of them.
func (fl *flows) sources(f, g int) []int32 {
	if fl.allToAll {
		return nil
	}
	if f < fl.layers {
		return fl.reads[g]
	}
	return fl.readBy[g]
}

// consumers returns the intervals that read g's flow-f rows, or nil for all of them.
func (fl *flows) consumers(f, g int) []int32 {
	if fl.allToAll {
		return nil
	}
	if f < fl.layers {
		return fl.readBy[g]
	}
	return fl.reads[g]
}

// barrierAt returns how many intervals have produced their flow-f rows of epoch e.
func (fl *flows) barrierAt(f, e int) int {
	if b := fl.barrier[f][e&1]; b.epoch == e {
		return b.count
	}
	return 0
}

// anyFromAll reports whether every source of interval g's flow-f reads has produced rows.
func (fl *flows) anyFromAll(f, g int) bool {
	if fl.allToAll {
		return int(fl.haveAll[f]) == fl.n
	}
	return int(fl.have[f*fl.n+g]) == len(fl.sources(f, g))
}

// produce records that interval g produced its flow-f rows of epoch e.
func (s *Scheduler) produce(f, g, e int) {
	fl := &s.fl
	i := f*fl.n + g
	if int32(e) <= fl.latest[i] {
		return // cannot happen: an interval produces its epochs in order
	}
	first := fl.latest[i] < 0
	fl.latest[i] = int32(e)
	if s.sync {
		if countEpoch(&fl.barrier[f], e) == fl.n {
			s.refreshAll()
		}
		return
	}
	if !first {
		return
	}
	fl.haveAll[f]++
	if !fl.allToAll {
		for _, c := range fl.consumers(f, g) {
			fl.have[f*fl.n+int(c)]++
			s.refresh(int(c))
		}
	} else if int(fl.haveAll[f]) == fl.n {
		s.refreshAll()
	}
}

// readsOf lists the epochs of the flow-f rows interval g reads at epoch e, checking the bound.
func (s *Scheduler) readsOf(f, g, e int) ([]Read, error) {
	fl := &s.fl
	srcs := fl.sources(f, g)
	count := len(srcs)
	if srcs == nil {
		count = fl.n
	}
	reads := make([]Read, count)
	for i := range reads {
		src := i
		if srcs != nil {
			src = int(srcs[i])
		}
		v := int(fl.latest[f*fl.n+src])
		if v < 0 || (s.sync && v != e) || e-v > s.stale+1 {
			// The epoch gate makes this impossible; refuse rather than hand out stale rows.
			return nil, fmt.Errorf("internal error: rows of %v are from epoch %d at epoch %d", s.ids[src], v, e)
		}
		reads[i] = Read{From: s.ids[src], Epoch: v}
	}
	return reads, nil
}
