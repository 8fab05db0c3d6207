package graphserver

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// layout is this server's partition cut into intervals, and the training buffers the intervals
// share: P_l and dZ_l, their owned rows in R slots (Config.slots) and their ghost rows in G
// (ghostSlots: an asynchronous GCN's 1, under its guard), Z_l per epoch parity, the gradient
// contributions remote intervals push (push cut), and the pools of composite buffers of
// mixed-epoch reads.
type layout struct {
	self, parts, intervals int // this partition, the partitions, the intervals of each
	part                   *partition.Part
	ivs                    []interval
	slots                  int   // R
	ghostSlots             int   // G: R, or 1 under a guard (guard.go)
	dims                   []int // widths of the input and of P_l (a GAT's: heads·features) of every layer
	widths                 []int // [layer]: width of the rows SC_l and ∇SC_l exchange
	parities               int   // 2 when an interval runs two epochs at once, else 1
	// gradients is the backward pass's cut (pipeline.Config.Gradients): a GCN pulls, shipping
	// dZ_l rows to their ghost copies as the forward pass ships P_l, so that dZ_l has ghost
	// rows and ∇GA_l is the forward Gather on dZ_l; a GAT pushes contributions.
	gradients pipeline.GradientFlow

	// p[l] and dz[l] are the slots of one buffer each, pAll[l] and dzAll[l], placed by pAt and
	// dzAt, so that a Gather reads rows of several epochs without copying them. Slot r < G
	// holds its owned rows and then its ghost rows; slot r ≥ G only its owned rows, its ghost
	// rows being slot r mod G's. z[p][L-1], the logits, is z[0][L-1] for every parity p: only
	// the loss reads them, in the lane of the Gather that writes them, before that lane's next
	// Gather.
	p         [][]*tensor.Dense // [layer][slot]: P_l, owned (then ghost) rows
	z         [][]*tensor.Dense // [epoch parity][layer]: Z_l, owned rows; the logits' once (below)
	dz        [][]*tensor.Dense // [layer][slot]: dZ_l, owned rows (pulling gradients: then ghost rows)
	pAll      []*tensor.Dense   // [layer]: the slots of P_l
	dzAll     []*tensor.Dense   // [layer]: the slots of dZ_l
	pAt, dzAt slotRows          // where the slots of pAll and dzAll lie
	// scores[layer][slot] is a GAT's s_src (owned then ghost rows), sent after each row of P_l;
	// nil for a GCN.
	scores [][]*tensor.Dense
	// contrib[layer][remote interval][slot]: gradient contributions pushed by a remote
	// interval to this server's rows (push cut only)
	contrib [][][]contribution
	// seg[global interval]: for a remote interval, the range of this server's ghost block of
	// its partition that its Scatter fills (set by its first batch)
	seg      [][2]int
	segKnown []atomic.Bool
	// source[row]: the global interval whose rows hold an owned or ghost row, or parts ×
	// intervals for a ghost row before its interval's first batch: nonzeroSources reads it to
	// build each interval's sources of its nonzeros
	source []uint16
	compP  []*bufPool // [layer]: composite P_l buffers of a GAT's mixed-epoch reads (a GCN shifts indices: gather)
	compDZ []*bufPool // [layer]: composite dZ_l buffers of a GAT's mixed-epoch backward reads
	guard  *slotGuard // an asynchronous GCN's writers and Gathers of its two slots; nil: R is enough
	// send[lane][peer]: the buffer in which the lane gathers the rows the peer holds as ghosts
	// (part.SendTo), each interval's in its range of them (interval.send)
	send    [][][]float32
	shifted freeList[*shiftedBlock]
}

// interval is one interval's rows and the buffers every model uses, reused across epochs.
// dp's layers share a buffer as wide as the widest: the backward lane writes and reads dP_l
// of one layer at a time.
type interval struct {
	*partition.Interval
	feats  graph.Features
	labels []int32
	ids    []int32           // the rows' original ids, which key their dropout masks
	train  []int32           // training rows, relative to the interval
	dp     []*tensor.Dense   // [layer]: dP_l of the rows
	ghostC []*tensor.Dense   // [layer]: contributions to the touched ghosts (push cut only)
	zView  [][]*tensor.Dense // [epoch parity][layer]: rows of z
	pView  [][]*tensor.Dense // [layer][slot]: rows of p
	dzView [][]*tensor.Dense // [layer][slot]: rows of dz
	send   [2][][]float32    // [head lane, tail lane][peer]: its range of layout.send
	// nzSource[a]: the source (layout.source of the column) of each of the interval's
	// nonzeros of the forward adjacency (a = 0, owned and ghost columns) or of the local one
	// (a = 1), read in order by a mixed-epoch Gather; set by the first once every column's
	// source is known
	nzSource [2]atomic.Pointer[[]uint16]
}

// contribution is one remote interval's pushed gradient rows of one epoch.
type contribution struct {
	rows []int32 // local owned rows, ascending
	data *tensor.Dense
}

// newPart builds the partition of cfg.Data, its rows' features normalised, and cuts it into
// cfg.Intervals intervals.
func newPart(cfg *Config) (*partition.Part, []partition.Interval, error) {
	d := cfg.Data
	if d == nil || d.Part != cfg.Partition || d.Parts != cfg.Partitions {
		return nil, nil, fmt.Errorf("no data of partition %d of %d", cfg.Partition, cfg.Partitions)
	}
	if !d.Features.Present() {
		return nil, nil, fmt.Errorf("dataset %s: %w", d.Meta.Name, graph.ErrNoFeatures)
	}
	if d.Features.Sparse != nil {
		graph.RowNormalize(d.Features.Sparse)
	}
	part, err := partition.Build(d)
	if err != nil {
		return nil, nil, err
	}
	cuts, err := part.Cut(cfg.Intervals)
	return part, cuts, err
}

// newLayout sets up the intervals of cuts and the buffers of every layer of a model of shape sh.
func newLayout(cfg *Config, part *partition.Part, cuts []partition.Interval, sh modelShape) *layout {
	b := &layout{self: cfg.Partition, parts: cfg.Partitions, intervals: cfg.Intervals, part: part,
		slots: cfg.slots(), ghostSlots: cfg.ghostSlots(), dims: sh.dims, widths: sh.widths, parities: EpochsInFlight(cfg.Staleness, cfg.Heads),
		gradients: cfg.gradients()}
	L, R, n := len(sh.dims)-1, b.slots, part.Owned
	rows := n + len(part.Ghosts)
	dzRows := n
	b.pAt, b.dzAt = placeSlots(n, len(part.Ghosts), R, b.ghostSlots), placeSlots(n, 0, R, R)
	if b.pulls() {
		dzRows, b.dzAt = rows, b.pAt
	}
	b.p, b.dz, b.z = make([][]*tensor.Dense, L), make([][]*tensor.Dense, L), make([][]*tensor.Dense, b.parities)
	b.shifted.make = func() *shiftedBlock { return &shiftedBlock{} }
	if cfg.guardsSlots() {
		b.guard = newSlotGuard(b.parts*b.intervals, L, b.global, func(src int) bool { return src/b.intervals == b.self })
	}
	for l := range L {
		d := b.dims[l+1]
		for p := range b.z {
			if p > 0 && l == L-1 { // the logits: one epoch of them (layout.z)
				b.z[p] = append(b.z[p], b.z[0][l])
				continue
			}
			b.z[p] = append(b.z[p], tensor.NewDense(n, d))
		}
		b.pAll, b.dzAll = append(b.pAll, tensor.NewDense(b.pAt.rows, d)), append(b.dzAll, tensor.NewDense(b.dzAt.rows, d))
		b.p[l], b.dz[l] = b.pAt.views(b.pAll[l]), b.dzAt.views(b.dzAll[l])
		b.compP = append(b.compP, newBufPool(rows, d))
		b.compDZ = append(b.compDZ, newBufPool(dzRows, d))
	}
	total := b.parts * b.intervals
	b.seg = make([][2]int, total)
	b.segKnown = make([]atomic.Bool, total)
	b.source = make([]uint16, rows)
	fillSource(b.source[n:], total)
	if !b.pulls() {
		b.contrib = make([][][]contribution, L)
		for l := range L {
			b.contrib[l] = make([][]contribution, total)
			for g := range total {
				if g/b.intervals != b.self {
					b.contrib[l][g] = make([]contribution, R)
				}
			}
		}
	}
	dmax := 0
	for l := range L {
		dmax = max(dmax, b.widths[l])
	}
	lanes := 1 // the tail lane ships rows only when pulling gradients
	if b.pulls() {
		lanes = 2
	}
	b.send = make([][][]float32, lanes)
	for f := range b.send {
		for _, rows := range part.SendTo {
			b.send[f] = append(b.send[f], make([]float32, len(rows)*dmax))
		}
	}
	b.ivs = make([]interval, len(cuts))
	for i := range cuts {
		c := &cuts[i]
		fillSource(b.source[c.Lo:c.Hi], b.global(b.self, i))
		iv := &b.ivs[i]
		iv.Interval, iv.feats, iv.labels, iv.ids = c, partition.FeatureRows(part.Features, c.Lo, c.Hi), part.Labels[c.Lo:c.Hi], part.OriginalIDs[c.Lo:c.Hi]
		for _, r := range part.Splits[0] {
			if int(r) >= c.Lo && int(r) < c.Hi {
				iv.train = append(iv.train, r-int32(c.Lo))
			}
		}
		iv.zView = make([][]*tensor.Dense, b.parities)
		dp := tensor.NewDense(c.Rows(), slices.Max(b.dims[1:]))
		for l := range L {
			d := b.dims[l+1]
			iv.dp = append(iv.dp, &tensor.Dense{Rows: c.Rows(), Cols: d, Data: dp.Data[:c.Rows()*d]})
			if !b.pulls() {
				iv.ghostC = append(iv.ghostC, tensor.NewDense(c.GhostT.Rows, b.widths[l]))
			}
			for p := range b.z {
				iv.zView[p] = append(iv.zView[p], b.z[p][l].RowSlice(c.Lo, c.Hi))
			}
			var pv, dzv []*tensor.Dense
			for r := range R {
				pv = append(pv, b.p[l][r].RowSlice(c.Lo, c.Hi))
				dzv = append(dzv, b.dz[l][r].RowSlice(c.Lo, c.Hi))
			}
			iv.pView, iv.dzView = append(iv.pView, pv), append(iv.dzView, dzv)
		}
		for f, lane := range b.send {
			iv.send[f] = make([][]float32, b.parts)
			for q, rg := range c.Send {
				iv.send[f][q] = lane[q][rg[0]*dmax : rg[1]*dmax]
			}
		}
	}
	return b
}

// requestSlack is room in maxRequest for a request's fields beside its rows: a batch's header,
// a progress report's tasks, an export pass's list of files.
const requestSlack = 64 << 10

// slotRows places the R slots of a buffer of o owned and g ghost rows: slot r's owned rows
// from row owned[r], its ghost rows (those of slot r mod G, G = len(ghost)) from row
// ghost[r mod G]. With G = R every slot is its owned rows and then its ghost rows; with G = 1
// slot 0 is, and every other slot only its owned rows after them.
type slotRows struct {
	owned, ghost []int
	o, g         int // owned and ghost rows
	rows         int // of the buffer
}

// placeSlots returns the places of R slots of o owned and g ghost rows, G of the ghost rows.
func placeSlots(o, g, R, G int) slotRows {
	at := slotRows{o: o, g: g}
	for r := range R {
		at.owned = append(at.owned, at.rows)
		if r < G {
			at.ghost = append(at.ghost, at.rows+o)
			at.rows += g
		}
		at.rows += o
	}
	return at
}

// views returns the slots of all: slot r < G its owned and ghost rows, slot r ≥ G its owned
// rows.
func (at *slotRows) views(all *tensor.Dense) []*tensor.Dense {
	var out []*tensor.Dense
	for r, lo := range at.owned {
		hi := lo + at.o
		if r < len(at.ghost) {
			hi += at.g
		}
		out = append(out, all.RowSlice(lo, hi))
	}
	return out
}

// maxRequest returns the bytes of the largest request a peer sends this server (at most
// rpc.MaxMessage): a batch of a layer's rows, each with its id, as many as the largest of the
// owned rows (a backward Scatter's contributions) and the ghost blocks (an evaluation's rows
// of a peer), plus requestSlack.
func (b *layout) maxRequest() int {
	rows := b.part.Owned
	for q := range b.parts {
		rows = max(rows, b.part.GhostsOf(q))
	}
	n := 0
	for _, w := range b.widths {
		n = max(n, rows*4*(w+1))
	}
	return min(n+requestSlack, rpc.MaxMessage)
}

// layers returns the number of layers.
func (b *layout) layers() int { return len(b.dims) - 1 }

// pulls reports whether the backward pass pulls gradients (dZ_l rows shipped to ghosts).
func (b *layout) pulls() bool { return b.gradients == pipeline.PullGradients }

// claim returns once local task t may write its interval's rows of kind and layer l into the
// slot of its epoch (guard.go).
func (b *layout) claim(kind, l int, t pipeline.Task) error {
	return b.guard.write(kind, l, b.global(t.Partition, t.Interval), t.Epoch)
}

// ghostSlot returns the slot of the ghost rows of epoch e.
func (b *layout) ghostSlot(e int) int { return e % b.ghostSlots }

// shipsDZ returns the layer of the dZ rows that task t produces and ships to their ghost
// copies when the backward pass pulls gradients — dZ_{L-1} from the loss (AV_L), dZ_{l-1}
// from ∇AV_l above the first layer — and false for every other task.
func (b *layout) shipsDZ(t pipeline.Task) (int, bool) {
	switch {
	case !b.pulls():
		return 0, false
	case t.Kind == pipeline.KindAV && t.Layer == b.layers(), t.Kind == pipeline.KindBackAV && t.Layer > 0:
		return t.Layer - 1, true
	}
	return 0, false
}

// global returns the global index of interval i of partition p.
func (b *layout) global(p, i int) int { return p*b.intervals + i }

// scoresOf returns a GAT's s_src buffer of layer l in slot, nil for a GCN.
func (b *layout) scoresOf(l, slot int) *tensor.Dense {
	if b.scores == nil {
		return nil
	}
	return b.scores[l][slot]
}

// sendBuffers returns the buffers, one per peer, in which task t gathers the rows it ships: the
// head lane's (SC_l, and the loss shipping dZ_{L-1}) or the tail lane's (∇AV_l shipping
// dZ_{l-1}), as the two lanes may ship at once.
func (iv *interval) sendBuffers(t pipeline.Task) [][]float32 {
	if t.Kind == pipeline.KindBackAV {
		return iv.send[1]
	}
	return iv.send[0]
}

// zOf returns the views of an interval's Z_l rows of epoch e.
func (iv *interval) zOf(e int) []*tensor.Dense { return iv.zView[e%len(iv.zView)] }

// readRows returns the rows of P_l or dZ_l a read names: a local interval's, and with ghosts
// a remote interval's part of its partition's ghost block.
func (b *layout) readRows(r pipeline.Read, ghosts bool) (lo, hi int, ok bool) {
	switch q := r.From.Partition; {
	case q == b.self:
		return b.ivs[r.From.Interval].Lo, b.ivs[r.From.Interval].Hi, true
	case ghosts:
		seg := b.seg[b.global(q, r.From.Interval)]
		lo = b.ghostRow(q, seg[0])
		return lo, lo + seg[1], true
	}
	return 0, 0, false
}

// compose returns the buffer a Gather reads: the slot that every source (local intervals, and
// with ghosts the remote ones) is read in when that slot holds both owned and ghost rows,
// otherwise a composite holding each source's rows of its epoch. done returns the composite
// to its pool.
func (b *layout) compose(slots []*tensor.Dense, pool *bufPool, reads []pipeline.Read, ghosts bool) (*tensor.Dense, func()) {
	return b.composeRows(slots, pool, reads, func(r pipeline.Read) (lo, hi int, ok bool) { return b.readRows(r, ghosts) })
}

// slotOf returns the slot of read r's rows: its epoch's, or for a peer's (ghost) rows the
// slot of their epoch among the G.
func (b *layout) slotOf(r pipeline.Read) int {
	if r.From.Partition == b.self {
		return r.Epoch % b.slots
	}
	return b.ghostSlot(r.Epoch)
}

// commonSlot returns the slot of every read that rows accepts (0 if none), and whether they
// lie in several slots instead.
func (b *layout) commonSlot(reads []pipeline.Read, rows func(pipeline.Read) (lo, hi int, ok bool)) (slot int, mixed bool) {
	slot = -1
	for _, r := range reads {
		if _, _, ok := rows(r); !ok {
			continue
		}
		if s := b.slotOf(r); slot >= 0 && s != slot {
			return 0, true
		} else {
			slot = s
		}
	}
	return max(slot, 0), false
}

// composeRows returns the slot that every read that rows accepts lies in, when that slot holds
// owned and ghost rows, otherwise a composite from pool holding each accepted read's rows
// [lo, hi) of its epoch. done returns the composite to its pool.
func (b *layout) composeRows(slots []*tensor.Dense, pool *bufPool, reads []pipeline.Read, rows func(pipeline.Read) (lo, hi int, ok bool)) (*tensor.Dense, func()) {
	if slot, mixed := b.commonSlot(reads, rows); !mixed && slot < b.ghostSlots {
		return slots[slot], func() {}
	}
	comp := pool.get()
	d := comp.Cols
	for _, r := range reads {
		if lo, hi, ok := rows(r); ok {
			copy(comp.Data[lo*d:hi*d], slots[b.slotOf(r)].Data[lo*d:hi*d])
		}
	}
	return comp, func() { pool.put(comp) }
}

func fillSource(dst []uint16, g int) {
	for i := range dst {
		dst[i] = uint16(g)
	}
}

// ghostRow returns the local row of ghost off of partition q's ghost block.
func (b *layout) ghostRow(q, off int) int { return b.part.Owned + b.part.GhostStart[q] + off }

// learnSegment records that remote global interval g fills ghost rows [lo, lo+n) of
// partition q's ghost block, on its first batch; it fails when an interval sends other rows
// than it did before.
func (b *layout) learnSegment(g, q, lo, n int) error {
	if b.segKnown[g].Load() {
		if b.seg[g] != [2]int{lo, n} {
			return fmt.Errorf("interval %d sent rows %d+%d, earlier %d+%d", g%b.intervals, lo, n, b.seg[g][0], b.seg[g][1])
		}
		return nil
	}
	b.seg[g] = [2]int{lo, n}
	base := b.ghostRow(q, lo)
	fillSource(b.source[base:base+n], g)
	b.segKnown[g].Store(true)
	return nil
}

// shiftedBlock is a mixed-epoch Gather's rows of the adjacency, their column indices moved to
// the slots of their sources' epochs, and the shift of every source.
type shiftedBlock struct {
	shift  []int32 // [source]: the shift of its rows; 0 for a source not read
	rowPtr []int64
	colIdx []int32
}

// gather computes dst = adj[iv.Lo:iv.Hi] · src, reading each source's rows (those of a read
// that readRows accepts) in the slot of its epoch: src is P_l (kind rowsP) or dZ_l (rowsDZ) of
// layer l, whose slots lie in pAll[l] or dzAll[l] as pAt or dzAt place them. When every
// source's rows lie at one shift from their local rows (all in a slot of owned and ghost
// rows) that is an SpMM on those rows; otherwise the interval's column indices are shifted
// into their sources' slots, which copies 4 bytes per nonzero instead of every row of the
// sources.
func (b *layout) gather(dst *tensor.Dense, adj *tensor.CSR, kind, l int, iv *interval, reads []pipeline.Read, ghosts bool) {
	all, at := b.pAll[l], &b.pAt
	if kind == rowsDZ {
		all, at = b.dzAll[l], &b.dzAt
	}
	rows := func(r pipeline.Read) (lo, hi int, ok bool) { return b.readRows(r, ghosts) }
	shiftOf := func(r pipeline.Read) int {
		if r.From.Partition == b.self {
			return at.owned[b.slotOf(r)]
		}
		return at.ghost[b.slotOf(r)] - at.o
	}
	common := -1
	for _, r := range reads {
		if _, _, ok := rows(r); !ok {
			continue
		}
		if k := shiftOf(r); common == -1 || k == common {
			common = k
		} else {
			common = -2
			break
		}
	}
	if common >= -1 {
		k := max(common, 0)
		tensor.SpMMRows(dst, adj, all.RowSlice(k, k+adj.Cols), iv.Lo, iv.Hi)
		return
	}
	s := b.shifted.get()
	defer b.shifted.put(s)
	s.shift = slices.Grow(s.shift[:0], len(b.seg)+1)[:len(b.seg)+1]
	clear(s.shift)
	for _, r := range reads {
		if _, _, ok := rows(r); ok {
			s.shift[b.global(r.From.Partition, r.From.Interval)] = int32(shiftOf(r))
		}
	}
	p0, p1 := adj.RowPtr[iv.Lo], adj.RowPtr[iv.Hi]
	s.rowPtr = slices.Grow(s.rowPtr[:0], iv.Rows()+1)[:iv.Rows()+1]
	for i := range s.rowPtr {
		s.rowPtr[i] = adj.RowPtr[iv.Lo+i] - p0
	}
	cols := adj.ColIdx[p0:p1]
	s.colIdx = slices.Grow(s.colIdx[:0], len(cols))[:len(cols)]
	src, shift := b.nonzeroSources(iv, cols, ghosts)[:len(cols)], s.shift
	for k, c := range cols {
		s.colIdx[k] = c + shift[src[k]]
	}
	block := tensor.CSR{Rows: iv.Rows(), Cols: all.Rows, RowPtr: s.rowPtr, ColIdx: s.colIdx}
	if adj.Val != nil {
		block.Val = adj.Val[p0:p1]
	}
	tensor.SpMMRows(dst, &block, all, 0, block.Rows)
}

// nonzeroSources returns the source of each of cols, the interval's column indices in the
// forward adjacency (ghosts) or the local one: iv.nzSource, built on first use. Reading it in
// order replaces a random read of layout.source per nonzero in every mixed-epoch Gather.
func (b *layout) nonzeroSources(iv *interval, cols []int32, ghosts bool) []uint16 {
	cache := &iv.nzSource[1]
	if ghosts {
		cache = &iv.nzSource[0]
	}
	if src := cache.Load(); src != nil {
		return *src
	}
	src, unknown, complete := make([]uint16, len(cols)), uint16(len(b.seg)), true
	for k, c := range cols {
		src[k] = b.source[c]
		complete = complete && src[k] != unknown
	}
	if complete { // a ghost's source is known from its interval's first batch on
		cache.Store(&src)
	}
	return src
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

// freeList keeps values for reuse; get makes a new one with make when none is free.
type freeList[T any] struct {
	mu   sync.Mutex
	make func() T
	free []T
}

func (p *freeList[T]) get() T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		v := p.free[n-1]
		p.free = p.free[:n-1]
		return v
	}
	return p.make()
}

func (p *freeList[T]) put(v T) {
	p.mu.Lock()
	p.free = append(p.free, v)
	p.mu.Unlock()
}

// bufPool keeps buffers of one shape for reuse.
type bufPool = freeList[*tensor.Dense]

// newBufPool returns a pool of rows×cols buffers.
func newBufPool(rows, cols int) *bufPool {
	return &bufPool{make: func() *tensor.Dense { return tensor.NewDense(rows, cols) }}
}
