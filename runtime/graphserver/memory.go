package graphserver

import (
	"fmt"
	"math"
	"runtime/debug"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
)

// Footprint is what a graph server's resident memory is predicted from (Bytes): its part, the
// model and the mode. The graph server sizes itself by it before it allocates its rows
// (checkFits), and dorylus plan by the same function.
type Footprint struct {
	// Owned vertices, Ghosts (vertices of other parts its rows reach) and Entries of its rows
	// of Â, self loops included.
	Owned, Ghosts, Entries int64
	// FeatureEntries is the non-zero features of the owned rows when they are stored sparse
	// (0: dense, Dims[0] per row).
	FeatureEntries int64
	// Dims are the widths of the input and of P_l of every layer, w_0 … w_L (a GAT's: heads ×
	// features).
	Dims []int
	// Heads and OutHeads are a GAT's attention heads of a hidden and of the output layer
	// (Config.Heads, OutHeads); Heads 0 is a GCN, or with SAGE a GraphSAGE network.
	Heads, OutHeads int
	SAGE            bool
	Staleness       jobconfig.Staleness
	Intervals       int
	// Evaluates says that an evaluation pass runs beside training (one before the last
	// epoch), in buffers of its own.
	Evaluates bool
}

// Terms are a graph server's predicted bytes: per owned vertex, per ghost, per entry of Â, and
// fixed; its resident memory is Owned·v + Ghost·g + Entry·e + Fixed.
type Terms struct {
	Owned, Ghost, Entry, Fixed float64
}

// The measured terms (README "Memory of a graph server"): what a graph server holds beside the
// rows' buffers, fitted to the peak resident memory (VmHWM) of graph servers of R-MAT
// 100k/2M, 250k/5M and 1M/20M (32 features, 16 classes) on 2 and 4 parts, every model and mode.
const (
	// fixedBytes is the Go runtime, the binary and gRPC's connections and pooled buffers
	// (measured: 41 MiB beside the other terms, 22 GCN and GraphSAGE graph servers).
	fixedBytes = 40 << 20
	// garbageBytes is the garbage the collector lets grow before it collects beyond a small
	// heap (gctune.CollectEarly: at least 64 MiB), which a GAT's tasks fill with their
	// temporaries; a GCN's or GraphSAGE's steady state allocates next to nothing (the codec
	// pools the rows it receives).
	garbageBytes = 64 << 20
	// vertexBytes is an owned vertex's beside its rows: its label, original id, the row
	// pointers of Â and its blocks, the interval of its row (2 bytes), the split lists.
	vertexBytes = 40
	// ghostBytes is a ghost's beside its rows: its global and original ids, its degree and
	// source interval, the row a peer sends for it (SendTo).
	ghostBytes = 40
	// entryBytes is an entry's of Â: the partition file's column, Â's column and value, its
	// blocks' (owned columns, ghost columns transposed), and its source interval in each (2 and 2).
	entryBytes = 28
	// gcShare is the garbage that grows between collections over a large live heap: a
	// twentieth of it (gctune.CollectEarly), beyond the 64 MiB.
	gcShare = 1.0 / 20
)

// Terms returns the bytes f predicts per owned vertex, per ghost, per entry and fixed: the
// buffers the graph server allocates for them (layout.go, gcn.go, sage.go, gat.go, eval.go),
// with the slot counts it keeps them in (Slots, GhostSlots, EpochsInFlight), the measured
// bytes beside them, and the collector's headroom.
func (f Footprint) Terms() Terms {
	heads := f.Heads
	R, G := float64(Slots(f.Staleness, heads)), float64(GhostSlots(f.Staleness, heads))
	pi := float64(EpochsInFlight(f.Staleness, heads))
	L := len(f.Dims) - 1
	d := func(l int) float64 { return float64(f.Dims[l]) }
	var H, widest float64 // Σ w_l and max w_l, l ≥ 1
	for l := 1; l <= L; l++ {
		H += d(l)
		widest = max(widest, d(l))
	}
	out := d(L)
	t := Terms{Owned: vertexBytes, Ghost: ghostBytes, Entry: entryBytes, Fixed: fixedBytes}
	// the features: dense w_0 floats a row; sparse a column and a value per non-zero
	if f.FeatureEntries > 0 && f.Owned > 0 {
		t.Owned += 8 + 8*float64(f.FeatureEntries)/float64(f.Owned)
	} else {
		t.Owned += 4 * d(0)
	}
	// P_l: owned rows R epochs, ghost rows G; Z_l π epochs (the logits once); dP_l one layer's
	t.Owned += 4 * (R*H + (pi*(H-out) + out) + widest)
	t.Ghost += 4 * G * H
	if heads == 0 {
		// A GCN pulls gradients: dZ_l as P_l; two lanes' send buffers, max w_l per row a peer
		// holds as a ghost (about as many as this server's ghosts); the batches received, one
		// forward and one backward row per layer (measured: 370 B a ghost over the rest, R-MAT
		// 1M/20M and 250k/5M, GCN and GraphSAGE, where 8·H is 384); a sparse input's drop(X),
		// π epochs.
		t.Owned += 4 * R * H
		t.Ghost += 4*G*H + 2*4*widest + 4*2*H
		if f.FeatureEntries > 0 && f.Owned > 0 {
			t.Owned += 4 * pi * float64(f.FeatureEntries) / float64(f.Owned)
		}
	}
	if f.SAGE {
		// S_l, R epochs; the W_self half of dZ_{l-1} (l ≥ 1); M and Mᵀ's values; 1/deg of
		// every local column
		t.Owned += 4*R*H + 4*(H-out) + 4
		t.Ghost += 4
		t.Entry += 8
	}
	if heads > 0 {
		f.gatTerms(&t, R, widest)
	}
	if f.Evaluates { // P_l (with its ghost rows) and Z_l of its own, and the rows it sends
		t.Owned += 4 * 2 * H
		t.Ghost += 4 * (H + widest)
		if f.SAGE {
			t.Owned += 4 * H
		}
	}
	// the collector's headroom over the live heap (all but the fixed bytes)
	t.Owned, t.Ghost, t.Entry = (1+gcShare)*t.Owned, (1+gcShare)*t.Ghost, (1+gcShare)*t.Entry
	return t
}

// gatTerms adds a GAT's buffers beside P_l to t (gat.go, layout.go): it pushes gradients
// (dZ_l's owned rows, R epochs, and the contributions of the intervals that reach its rows,
// counted per ghost: on R-MAT's symmetric cuts a server receives about as many rows as the
// 2.3–2.7 per ghost its intervals push),
// keeps s_src with every P_l row, α̃ and its gradient per entry and head in R epochs, every
// interval's activations, and its mixed-epoch reads' composite copies.
func (f Footprint) gatTerms(t *Terms, R, widest float64) {
	L := len(f.Dims) - 1
	I := float64(min(max(f.Intervals, 1), 2))
	// A Gather or backward Gather reading rows of mixed epochs composes whole copies of P_l,
	// s_src, dZ_l, α̃ and du from pools that keep what they made (layout.compose): none
	// synchronous, where every read is of one epoch; else K, one of each per interval (the
	// bound is two, one task at a time in each of its lanes; the pools' high-water marks
	// measured 2–5 at 4 intervals, R-MAT 100k/2M and 250k/5M on 2 and 4 parts, S = 0 and 1).
	K := 0.0
	if !f.Staleness.Sync() {
		K = float64(max(f.Intervals, 1))
	}
	for l := 1; l <= L; l++ {
		h := float64(f.Heads)
		if l == L {
			h = float64(max(f.OutHeads, 1))
		}
		w := float64(f.Dims[l])
		t.Owned += 4 * (R*w + // dZ_l
			R*h + h + h + 2*h + // s_src, s_dst and the evaluation's, dDst and dSrc
			K*(2*w+h)) // composite P_l, s_src and dZ_l
		t.Ghost += 4 * (R*h + // s_src
			I*(2*(w+h)) + // each interval's ghost contributions and touched rows
			I*R*(w+h) + // the contributions peers push here, R epochs: about as many rows as it pushes
			K*(w+h)) // composite P_l and s_src
		t.Entry += 4 * h * (2*R + 1 + K) // α̃ and its gradient R epochs, the evaluation's α̃, composites
		// every interval's activations of layer l+1: ELU(Z_l + b_l) and its dropout
		if l < L {
			t.Owned += 4 * 2 * w
		}
	}
	// the activation of layer 0: drop(X), dense or on X's structure with its transpose
	if f.FeatureEntries > 0 && f.Owned > 0 {
		t.Owned += 20 * float64(f.FeatureEntries) / float64(f.Owned)
	} else {
		t.Owned += 4 * float64(f.Dims[0])
	}
	t.Owned += 4 * 3 * float64(f.Dims[L]) // the logits and their gradient per interval, the evaluation's
	t.Entry += 12                         // the transposed blocks' columns and positions
	t.Owned += 4 * widest
	t.Fixed += garbageBytes
}

// Bytes returns f's predicted resident memory of the graph server.
func (f Footprint) Bytes() float64 {
	t := f.Terms()
	return t.Owned*float64(f.Owned) + t.Ghost*float64(f.Ghosts) + t.Entry*float64(f.Entries) + t.Fixed
}

// ParamServerBytes returns a parameter server's predicted resident memory holding weights
// float32 elements under staleness st: the runtime and gRPC (paramBaseBytes) and, per
// element, the versions graph servers may still read (1 synchronous, up to S+2 async), the
// optimizer's two moments and the gradients being summed.
func ParamServerBytes(weights float64, st jobconfig.Staleness) float64 {
	versions := 1.0
	if !st.Sync() {
		versions = float64(st.Bound() + 2)
	}
	return paramBaseBytes + 4*weights*(versions+3)
}

// paramBaseBytes is a parameter server's memory beside its weights (R-MAT 1M/20M, hidden 32:
// 41–43 MiB measured at every staleness, for 1.5 k weights).
const paramBaseBytes = 42 << 20

// footprint returns the Footprint of cfg's model on part, with dims the widths of its layers.
func (c *Config) footprint(part *partition.Part, dims []int) Footprint {
	f := Footprint{Owned: int64(part.Owned), Ghosts: int64(len(part.Ghosts)), Entries: part.Adj.NNZ(),
		Dims: dims, Heads: c.Heads, OutHeads: c.OutHeads, SAGE: c.SAGE, Staleness: c.Staleness, Intervals: c.Intervals,
		Evaluates: c.Weights == nil && c.EvalEvery < c.Epochs}
	if s := part.Features.Sparse; s != nil {
		f.FeatureEntries = s.NNZ()
	}
	return f
}

// checkFits refuses a part whose predicted memory exceeds limit bytes (the process's memory
// limit: debug.SetMemoryLimit's, which gctune.LimitHeap sets from the cgroup; math.MaxInt64:
// none), naming the prediction, the limit and the part.
func checkFits(f Footprint, limit int64, partition int) error {
	need := f.Bytes()
	if limit <= 0 || limit == math.MaxInt64 || need <= float64(limit) {
		return nil
	}
	model := "a GCN"
	switch {
	case f.Heads > 0:
		model = fmt.Sprintf("a GAT of %d heads", f.Heads)
	case f.SAGE:
		model = "a GraphSAGE network"
	}
	return fmt.Errorf("partition %d (%d owned vertices, %d ghosts, %d entries) needs about %d MiB for %s of widths %v at staleness %v, "+
		"over the memory limit of %d MiB: give the graph server more memory, or use more graph servers or a lower staleness",
		partition, f.Owned, f.Ghosts, f.Entries, int64(need)>>20, model, f.Dims, f.Staleness, limit>>20)
}

// memoryLimit returns the process's memory limit (GOMEMLIMIT, or gctune.LimitHeap's from the
// cgroup), without changing it.
func memoryLimit() int64 { return debug.SetMemoryLimit(-1) }

// dimsOf returns the widths of the input and of P_l of every layer of cfg's model on data of
// in features and classes classes, as newModel lays them out.
func (c *Config) dimsOf(in, classes int) []int {
	dims := []int{in}
	for l := 1; l < c.Layers; l++ {
		dims = append(dims, c.Hidden*max(c.Heads, 1))
	}
	out := classes
	if c.Heads > 0 {
		out *= max(c.OutHeads, 1)
	}
	return append(dims, out)
}
