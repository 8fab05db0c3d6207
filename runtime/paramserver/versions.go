package paramserver

import (
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// versions are a shard's weight versions: the newest and every older one some graph server
// may still read. Each graph server's Keep report lists the versions it pinned and the
// newest it knows, and it will only ever pin that one or newer; until every graph server has
// reported, nothing is dropped. A version never changes once made: readers share its
// buffers, and a dropped one is left to the garbage collector.
type versions struct {
	held   map[uint64][]*tensor.Dense
	newest uint64
	keep   []keepReport // per graph server
}

// keepReport is a graph server's newest Keep report.
type keepReport struct {
	known  bool
	seq    uint64
	pinned []uint64
	newest uint64
}

// newVersions returns w as version v, the only one, for graph servers that have not
// reported yet.
func newVersions(graphServers int, v uint64, w []*tensor.Dense) *versions {
	return &versions{held: map[uint64][]*tensor.Dense{v: w}, newest: v, keep: make([]keepReport, graphServers)}
}

// latest returns the newest version's weights.
func (vs *versions) latest() []*tensor.Dense { return vs.held[vs.newest] }

// at returns the weights of version v, if it is held.
func (vs *versions) at(v uint64) ([]*tensor.Dense, bool) {
	w, ok := vs.held[v]
	return w, ok
}

// add makes w the newest version and drops what no graph server may read any more.
func (vs *versions) add(w []*tensor.Dense) {
	vs.newest++
	vs.held[vs.newest] = w
	vs.collect()
}

// note records graph server gs's Keep report, if newer than its last, and drops what no
// graph server may read any more.
func (vs *versions) note(gs uint32, k *rpc.Keep) {
	if k == nil || int(gs) >= len(vs.keep) {
		return
	}
	r := &vs.keep[gs]
	if r.known && k.Seq <= r.seq {
		return
	}
	*r = keepReport{known: true, seq: k.Seq, pinned: append(r.pinned[:0], k.Pinned...), newest: k.Newest}
	vs.collect()
}

// forget drops every graph server's report (they restart): nothing is dropped until each
// has reported again.
func (vs *versions) forget() { vs.keep = make([]keepReport, len(vs.keep)) }

// list returns the versions held, ascending.
func (vs *versions) list() []uint64 {
	out := make([]uint64, 0, len(vs.held))
	for v := range vs.held {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// collect drops every version no graph server may read any more.
func (vs *versions) collect() {
	for _, r := range vs.keep {
		if !r.known {
			return
		}
	}
	for v := range vs.held {
		if v != vs.newest && !vs.needed(v) {
			delete(vs.held, v)
		}
	}
}

func (vs *versions) needed(v uint64) bool {
	for _, r := range vs.keep {
		if v >= r.newest || slices.Contains(r.pinned, v) {
			return true
		}
	}
	return false
}
