package graphserver

import (
	"sync/atomic"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// keeper publishes the Keep report that pulls and pushes carry to the parameter servers: the
// weight versions this server still reads (pinned by the scheduler or by an evaluation) and
// the newest it knows. Only the loop goroutine changes it; any goroutine loads it.
type keeper struct {
	seq  uint64
	pins map[uint64]int // evaluations' versions, counted
	cur  atomic.Pointer[rpc.Keep]
}

func newKeeper() *keeper {
	k := &keeper{pins: map[uint64]int{}}
	k.cur.Store(&rpc.Keep{})
	return k
}

// pin keeps version v for an evaluation until unpin.
func (k *keeper) pin(v uint64) { k.pins[v]++ }

// unpin drops one pin of version v.
func (k *keeper) unpin(v uint64) {
	if k.pins[v]--; k.pins[v] <= 0 {
		delete(k.pins, v)
	}
}

// publish makes a new report current: the scheduler's pinned versions and newest version, and
// the evaluations'.
func (k *keeper) publish(newest int, pinned []int) {
	k.seq++
	r := &rpc.Keep{Seq: k.seq, Newest: uint64(newest)}
	for _, v := range pinned {
		r.Pinned = append(r.Pinned, uint64(v))
	}
	for v := range k.pins {
		r.Pinned = append(r.Pinned, v)
	}
	k.cur.Store(r)
}

// load returns the current report.
func (k *keeper) load() *rpc.Keep { return k.cur.Load() }
