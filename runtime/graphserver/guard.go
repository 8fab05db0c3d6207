package graphserver

import (
	"fmt"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
)

// The rows a GCN's Gathers read: P_l (GA_l) and, pulling gradients, dZ_l (∇GA_l).
const (
	rowsP = iota
	rowsDZ
	rowKinds
)

// slotGuard lets an asynchronous GCN keep two epochs of the owned rows of P_l and dZ_l instead
// of 2S+2, and one epoch of their ghost rows.
//
// Owned rows: each local interval's rows of a layer are written an epoch at a time, in order
// (its lane runs one task at a time), epoch e into slot e mod 2, and read by Gathers, each of
// one task. A writer of epoch e first claims it, then waits until no Gather reads the slot it
// overwrites (epoch e-2's); a Gather that registers after the claim and was handed an epoch
// older than e-1 reads e-1 instead, which is complete and fresher.
//
// Ghost rows: a peer's interval's rows lie in one slot, which each of its batches overwrites
// with a newer epoch (its next batch waits for this one's ack). A batch waits until no Gather
// reads that interval's ghost rows, and a Gather registers its reads of ghost rows all at once,
// when no batch is being stored into any of them, waiting until then. A Gather therefore reads
// the newest epoch of a peer's rows stored whole before it started — never older than it was
// handed, since the scheduler learns of rows after they are stored.
//
// So no Gather reads a row while it is written. Nothing deadlocks: a Gather waits only before
// it registers, holding nothing, and once registered waits for nothing until it ends; a batch
// waits only for registered Gathers. A GAT needs all 2S+2 slots of both: its backward pass
// reads the P_l rows its forward pass read, an epoch later.
type slotGuard struct {
	mu      sync.Mutex
	changed *sync.Cond         // a read ended or a batch was stored
	global  func(p, i int) int // the global index of interval i of partition p (layout.global)
	local   func(src int) bool // whether global interval src is this server's
	sources int                // intervals of all partitions
	layers  int                // L
	writing []int              // [key]: the newest epoch claimed, -1 before the first
	storing []int              // [key]: a peer's batches being stored into its ghost rows
	readers [][2]int           // [key][slot]: Gathers reading it (ghost rows: slot 0)
}

func newSlotGuard(sources, layers int, global func(p, i int) int, local func(src int) bool) *slotGuard {
	n := rowKinds * layers * sources
	g := &slotGuard{global: global, local: local, sources: sources, layers: layers,
		writing: make([]int, n), storing: make([]int, n), readers: make([][2]int, n)}
	for k := range g.writing {
		g.writing[k] = -1
	}
	g.changed = sync.NewCond(&g.mu)
	return g
}

// key indexes the rows of kind (rowsP, rowsDZ) and layer l of global interval src.
func (g *slotGuard) key(kind, l, src int) int { return (kind*g.layers+l)*g.sources + src }

// claimEpoch records that epoch e of key is being written; epochs go forward: a claim of an
// older epoch than one already claimed is an error and claims nothing. g.mu is held.
func (g *slotGuard) claimEpoch(key, e int) error {
	if e < g.writing[key] {
		return fmt.Errorf("rows of epoch %d after rows of epoch %d", e, g.writing[key])
	}
	g.writing[key] = e
	return nil
}

// write claims epoch e of the owned rows of kind and layer l of local interval src for a
// writer and returns once no Gather reads the slot e overwrites. A nil guard (synchronous
// mode, a GAT) has nothing to wait for.
func (g *slotGuard) write(kind, l, src, e int) error {
	if g == nil {
		return nil
	}
	key := g.key(kind, l, src)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.claimEpoch(key, e); err != nil {
		return err
	}
	for g.readers[key][e%2] > 0 {
		g.changed.Wait()
	}
	return nil
}

// store claims epoch e of the ghost rows of kind and layer l of a peer's interval src for one
// of its batches and returns once no Gather reads them; the batch calls done once they are
// stored, and until then no Gather starts reading them.
func (g *slotGuard) store(kind, l, src, e int) (done func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	key := g.key(kind, l, src)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.claimEpoch(key, e); err != nil {
		return nil, err
	}
	g.storing[key]++
	for g.readers[key][0] > 0 {
		g.changed.Wait()
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.storing[key]--
		g.changed.Broadcast()
	}, nil
}

// read registers a Gather of the rows of kind and layer l of the sources in reads, once no
// batch is being stored into the ghost rows of any of them, moving a local source's epoch up
// to the newest complete one where the epoch it was handed may be being overwritten, and
// returns the function that ends the read.
func (g *slotGuard) read(kind, l int, reads []pipeline.Read) (done func()) {
	if g == nil {
		return func() {}
	}
	slot := func(k int, r *pipeline.Read) *int {
		if g.local(k % g.sources) {
			return &g.readers[k][r.Epoch%2]
		}
		return &g.readers[k][0]
	}
	g.mu.Lock()
	for g.storingAny(kind, l, reads) {
		g.changed.Wait()
	}
	for i := range reads {
		r := &reads[i]
		k := g.key(kind, l, g.global(r.From.Partition, r.From.Interval))
		if g.local(k % g.sources) {
			r.Epoch = max(r.Epoch, g.writing[k]-1)
		}
		*slot(k, r)++
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for i := range reads {
			k := g.key(kind, l, g.global(reads[i].From.Partition, reads[i].From.Interval))
			n := slot(k, &reads[i])
			if *n--; *n == 0 {
				g.changed.Broadcast()
			}
		}
	}
}

// storingAny reports whether a batch is being stored into the ghost rows of kind and layer l
// of any source of reads. g.mu is held.
func (g *slotGuard) storingAny(kind, l int, reads []pipeline.Read) bool {
	for _, r := range reads {
		if g.storing[g.key(kind, l, g.global(r.From.Partition, r.From.Interval))] > 0 {
			return true
		}
	}
	return false
}
