package graphserver

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// A Gather that reads its sources at several epochs, by shifting column indices into the
// slots, computes what an SpMM on a composite of the sources' rows of their epochs computes:
// forward (owned and ghost rows) and backward (owned rows), for every mix of epochs.
func TestGatherShiftsIntoSlots(t *testing.T) {
	cfg := fuzzConfigs(t)[1] // staleness 1: 4 slots
	part, cuts, err := newPart(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := newLayout(&cfg, part, cuts, modelShape{dims: []int{6, 4, 3}, widths: []int{4, 3}})
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
				for _, ghosts := range []bool{true, false} {
					adj, slots, all, pool := part.Adj, b.p[l], b.pAll[l], b.compP[l]
					if !ghosts {
						adj, slots, all, pool = part.AdjLocal, b.dz[l], b.dzAll[l], b.compDZ[l]
					}
					want := tensor.NewDense(iv.Rows(), all.Cols)
					src, done := b.compose(slots, pool, reads, ghosts)
					tensor.SpMMRows(want, adj, src, iv.Lo, iv.Hi)
					done()
					got := tensor.NewDense(iv.Rows(), all.Cols)
					b.gather(got, adj, all, iv, reads, ghosts)
					if !slices.Equal(got.Data, want.Data) {
						t.Fatalf("reads %v, layer %d, interval %d, ghosts %v: gather differs from the composite's SpMM", reads, l, i, ghosts)
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
	part, cuts, err := newPart(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := newLayout(&cfg, part, cuts, modelShape{dims: []int{6, 4, 3}, widths: []int{4, 3}})
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
