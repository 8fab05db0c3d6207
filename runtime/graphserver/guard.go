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

// slotGuard lets an asynchronous GCN keep two epochs of P_l and dZ_l instead of 2S+2. Each
// source interval's rows of a layer are written an epoch at a time, in order (its lane runs one
// task at a time; a peer's next batch waits for this one's ack), epoch e into slot e mod 2, and
// read by Gathers, each of one task. A writer of epoch e first claims it, then waits until no
// Gather reads the slot it overwrites (epoch e-2's); a Gather that registers after the claim
// and was handed an epoch older than e-1 (the scheduler learns of a peer's rows after they are
// stored) reads e-1 instead, which is complete and fresher. So no Gather reads a row while it
// is written, and readers never wait: a Gather waits for nothing once started, so writers never
// wait for long. A GAT needs all 2S+2: its backward pass reads the P_l rows its forward pass
// read, an epoch later.
type slotGuard struct {
	mu      sync.Mutex
	drained *sync.Cond
	global  func(p, i int) int // the global index of interval i of partition p (layout.global)
	sources int                // intervals of all partitions
	layers  int                // L
	writing []int              // [key]: the newest epoch claimed, -1 before the first
	readers [][2]int           // [key][slot]: Gathers reading it
}

func newSlotGuard(sources, layers int, global func(p, i int) int) *slotGuard {
	n := rowKinds * layers * sources
	g := &slotGuard{global: global, sources: sources, layers: layers, writing: make([]int, n), readers: make([][2]int, n)}
	for k := range g.writing {
		g.writing[k] = -1
	}
	g.drained = sync.NewCond(&g.mu)
	return g
}

// key indexes the rows of kind (rowsP, rowsDZ) and layer l of global interval src.
func (g *slotGuard) key(kind, l, src int) int { return (kind*g.layers+l)*g.sources + src }

// write claims epoch e of the rows of kind and layer l of global interval src for a writer and
// returns once no Gather reads the slot e overwrites. Epochs go forward: a claim of an older
// epoch than one already claimed is an error and claims nothing. A nil guard (synchronous mode,
// a GAT) has nothing to wait for.
func (g *slotGuard) write(kind, l, src, e int) error {
	if g == nil {
		return nil
	}
	key := g.key(kind, l, src)
	g.mu.Lock()
	defer g.mu.Unlock()
	if e < g.writing[key] {
		return fmt.Errorf("rows of epoch %d after rows of epoch %d", e, g.writing[key])
	}
	g.writing[key] = e
	for g.readers[key][e%2] > 0 {
		g.drained.Wait()
	}
	return nil
}

// read registers a Gather of the rows of kind and layer l of the sources in reads, moving a
// source's epoch up to the newest complete one where the epoch it was handed may be being
// overwritten, and returns the function that ends the read.
func (g *slotGuard) read(kind, l int, reads []pipeline.Read) (done func()) {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	for i := range reads {
		r := &reads[i]
		k := g.key(kind, l, g.global(r.From.Partition, r.From.Interval))
		r.Epoch = max(r.Epoch, g.writing[k]-1)
		g.readers[k][r.Epoch%2]++
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, r := range reads {
			k := g.key(kind, l, g.global(r.From.Partition, r.From.Interval))
			if g.readers[k][r.Epoch%2]--; g.readers[k][r.Epoch%2] == 0 {
				g.drained.Broadcast()
			}
		}
	}
}
