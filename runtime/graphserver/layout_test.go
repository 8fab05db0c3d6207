package graphserver

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// A Gather that reads its sources at several epochs, by shifting column indices into the
// slots, computes what an SpMM on a composite of the sources' rows of their epochs computes:
// forward (owned and ghost rows of P), backward pulling gradients (a GCN: owned and ghost rows
// of dZ) and pushing them (a GAT: owned rows of dZ), for every mix of epochs.
func TestGatherShiftsIntoSlots(t *testing.T) {
	for _, heads := range []int{0, 1} {
		cfg := fuzzConfigs(t)[1] // staleness 1: a GCN's 2 slots, a GAT's 4
		cfg.Heads, cfg.OutHeads = heads, heads
		b, part := testLayout(t, cfg)
		rng := rand.New(rand.NewPCG(1, 2))
		for _, all := range slices.Concat(b.pAll, b.dzAll) {
			for i := range all.Data {
				all.Data[i] = rng.Float32()
			}
		}
		// Partition 0's intervals fill halves of its ghost block.
		g := part.GhostsOf(0)
		for _, err := range []error{b.learnSegment(b.global(0, 0), 0, 0, g/2), b.learnSegment(b.global(0, 1), 0, g/2, g-g/2)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		sources := []pipeline.IntervalID{{Partition: 1, Interval: 0}, {Partition: 1, Interval: 1}, {Partition: 0, Interval: 0}, {Partition: 0, Interval: 1}}
		for mix := range 1 << (2 * len(sources)) { // every source at every epoch of 0..3
			var reads []pipeline.Read
			for k, from := range sources {
				reads = append(reads, pipeline.Read{From: from, Epoch: mix >> (2 * k) & 3})
			}
			for l := range b.layers() {
				for i := range b.ivs {
					iv := &b.ivs[i]
					for _, backward := range []bool{false, true} {
						adj, slots, kind, all, pool, ghosts := part.Adj, b.p[l], rowsP, b.pAll[l], b.compP[l], true
						if backward {
							slots, kind, all, pool = b.dz[l], rowsDZ, b.dzAll[l], b.compDZ[l]
							if !b.pulls() {
								adj, ghosts = part.AdjLocal, false
							}
						}
						want := tensor.NewDense(iv.Rows(), all.Cols)
						src, done := b.compose(slots, pool, reads, ghosts)
						tensor.SpMMRows(want, adj, src, iv.Lo, iv.Hi)
						done()
						got := tensor.NewDense(iv.Rows(), all.Cols)
						b.gather(got, adj, kind, l, iv, reads, ghosts)
						if !slices.Equal(got.Data, want.Data) {
							t.Fatalf("heads %d, reads %v, layer %d, interval %d, backward %v: gather differs from the composite's SpMM", heads, reads, l, i, backward)
						}
					}
				}
			}
		}
	}
}

// The Gather's per-nonzero sources are kept only once every ghost's interval is known: one
// built before a batch arrives would shift that ghost's rows from the wrong slot for good.
func TestNonzeroSourcesWaitForSegments(t *testing.T) {
	cfg := fuzzConfigs(t)[1]
	b, part := testLayout(t, cfg)
	iv := &b.ivs[0]
	cols := part.Adj.ColIdx[part.Adj.RowPtr[iv.Lo]:part.Adj.RowPtr[iv.Hi]]
	unknown := uint16(len(b.seg))
	if !slices.Contains(b.nonzeroSources(iv, cols, true), unknown) {
		t.Fatal("interval 0 reads no ghost: the test needs one")
	}
	if iv.nzSource[0].Load() != nil {
		t.Fatal("sources kept before every ghost's interval was known")
	}
	g := part.GhostsOf(0)
	for _, err := range []error{b.learnSegment(b.global(0, 0), 0, 0, g/2), b.learnSegment(b.global(0, 1), 0, g/2, g-g/2)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := b.nonzeroSources(iv, cols, true)
	if iv.nzSource[0].Load() == nil {
		t.Fatal("sources not kept once every ghost's interval was known")
	}
	for k, c := range cols {
		if got[k] != b.source[c] || got[k] == unknown {
			t.Fatalf("nonzero %d (column %d): source %d, want %d", k, c, got[k], b.source[c])
		}
	}
	if local := part.AdjLocal.ColIdx[part.AdjLocal.RowPtr[iv.Lo]:part.AdjLocal.RowPtr[iv.Hi]]; len(b.nonzeroSources(iv, local, false)) != len(local) || iv.nzSource[1].Load() == nil {
		t.Fatal("the local adjacency's sources are not kept apart")
	}
}

// A run's intervals, over all partitions, must fit the Gather's 16-bit source of every row.
func TestConfigBoundsIntervals(t *testing.T) {
	cfg := fuzzConfigs(t)[1] // 2 partitions
	cfg.Intervals = maxSources / 2
	if err := cfg.validate(); err != nil {
		t.Fatalf("%d intervals on 2 partitions: %v", cfg.Intervals, err)
	}
	cfg.Intervals++
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "at most 65535 in all") {
		t.Fatalf("%d intervals on 2 partitions: %v, want the bound named", cfg.Intervals, err)
	}
}

// A GCN pulls gradients: the dZ rows a peer's loss (AV_L) and ∇AV_l ship land in dZ's ghost
// rows of their epoch's slot, and a pushed contribution (∇SC) is refused; a GAT pushes them:
// it takes the contribution and refuses dZ rows.
func TestStoreGradientRowsByCut(t *testing.T) {
	for _, heads := range []int{0, 1} {
		cfg := fuzzConfigs(t)[1]
		cfg.Heads, cfg.OutHeads = heads, heads
		b, part := testLayout(t, cfg)
		L, g := b.layers(), part.GhostsOf(0)
		ship := func(kind pipeline.Kind, layer, epoch, d int) (*rpc.RowsBatch, []float32) {
			rows := make([]float32, g*d)
			for i := range rows {
				rows[i] = float32(1000*epoch + 100*layer + i)
			}
			return &rpc.RowsBatch{From: 0, Flow: rpc.Flow_FLOW_GRADIENT, Task: &rpc.TaskRef{Partition: 0, Interval: 0, Epoch: uint32(epoch), Layer: uint32(layer), Kind: uint32(kind)},
				Data: &rpc.Tensor{Rows: uint32(g), Cols: uint32(d), Data: rpc.Float32Bytes(rows)}}, rows
		}
		for _, c := range []struct {
			kind         pipeline.Kind
			layer, epoch int
		}{{pipeline.KindAV, L, 1}, {pipeline.KindBackAV, 1, 2}} {
			l := c.layer - 1 // the dZ rows' layer
			bt, want := ship(c.kind, c.layer, c.epoch, b.dims[l+1])
			task, err := b.store(bt, cfg.Epochs)
			if heads > 0 {
				if err == nil {
					t.Errorf("GAT: dZ rows of %v taken; it pushes gradients", task)
				}
				continue
			}
			if err != nil || task.Kind != c.kind || task.Epoch != c.epoch {
				t.Fatalf("GCN: dZ rows of %v %d: task %v, %v", c.kind, c.layer, task, err)
			}
			slot, base := b.dz[l][b.ghostSlot(c.epoch)], b.ghostRow(0, 0)
			if got := slot.Data[base*slot.Cols : (base+g)*slot.Cols]; !slices.Equal(got, want) {
				t.Errorf("GCN: dZ_%d's ghost rows of epoch %d hold %v, want %v", l, c.epoch, got, want)
			}
		}
		owned := []int32{0, 1}
		bt, _ := ship(pipeline.KindBackSC, 0, 1, b.widths[0])
		bt.Rows, bt.Data.Rows, bt.Data.Data = rpc.Int32Bytes(owned), 2, bt.Data.Data[:2*4*b.widths[0]]
		if _, err := b.store(bt, cfg.Epochs); (err == nil) != (heads > 0) {
			t.Errorf("heads %d: a pushed contribution: %v", heads, err)
		}
	}
}

// A GCN's head lane (SC, and the loss shipping dZ_{L-1}) and tail lane (∇AV shipping dZ_{l-1})
// ship at once when an interval's backward pass overlaps its next forward pass: they must not
// gather their rows into the same buffers (the race detector once caught the loss and ∇AV_1
// sharing them).
func TestLanesShipFromOwnBuffers(t *testing.T) {
	b, _ := testLayout(t, fuzzConfigs(t)[1])
	iv := &b.ivs[0]
	task := func(k pipeline.Kind, l int) pipeline.Task {
		return pipeline.Task{Partition: b.self, Interval: 0, Epoch: 1, Layer: l, Kind: k}
	}
	head := [][][]float32{iv.sendBuffers(task(pipeline.KindSC, 0)), iv.sendBuffers(task(pipeline.KindSC, 1)), iv.sendBuffers(task(pipeline.KindAV, 2))}
	tail := iv.sendBuffers(task(pipeline.KindBackAV, 1))
	for q := range b.parts {
		if len(tail[q]) == 0 {
			continue
		}
		for _, h := range head {
			if len(h[q]) > 0 && &h[q][0] == &tail[q][0] {
				t.Fatalf("peer %d: the head and tail lanes gather into one buffer", q)
			}
		}
	}
	if q := 1 - b.self; len(tail[q]) == 0 {
		t.Fatalf("no rows shipped to peer %d: the test checks nothing", q)
	}
}

// testLayout is the layout of cfg's partition for a 2-layer model (6 features, 4 hidden, 3
// classes), and the partition.
func testLayout(t *testing.T, cfg Config) (*layout, *partition.Part) {
	t.Helper()
	part, cuts, err := newPart(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return newLayout(&cfg, part, cuts, modelShape{dims: []int{6, 4, 3}, widths: []int{4, 3}}), part
}

// A GCN's and a GraphSAGE network's graph server keeps one forward and one backward row per
// ghost and layer in every mode (8 bytes per ghost and unit of H = Σ layer widths, Dorylus's
// floor), beside R slots of its owned rows: the buffers' lengths, not the resident memory.
func TestGhostBytesAtFloor(t *testing.T) {
	for _, sage := range []bool{false, true} {
		for _, st := range []jobconfig.Staleness{jobconfig.Sync, jobconfig.Bounded(0), jobconfig.Bounded(1), jobconfig.Bounded(2)} {
			cfg := fuzzConfigs(t)[1]
			cfg.SAGE, cfg.Staleness = sage, st
			s, err := newServer(context.Background(), &errgroup.Group{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := s.lay
			v, g, R, H := b.part.Owned, len(b.part.Ghosts), b.slots, 0
			if g == 0 {
				t.Fatal("partition without ghosts")
			}
			ghostBytes := 0
			for l := range b.layers() {
				d := b.dims[l+1]
				H += d
				owned := 4 * R * v * d
				ghostBytes += 4*len(b.pAll[l].Data) - owned + 4*len(b.dzAll[l].Data) - owned
			}
			if want := 8 * H * g; ghostBytes != want {
				t.Errorf("SAGE %v, staleness %v: %d bytes of ghost rows, want 8·H·ghosts = 8·%d·%d = %d", sage, st, ghostBytes, H, g, want)
			}
			if s.eval.own != nil {
				t.Errorf("SAGE %v, staleness %v: evaluation buffers before any evaluation", sage, st)
			}
		}
	}
}
