package graphserver

import (
	"context"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// The footprint reads the shape the server lays out: dimsOf gives every model's widths as
// newModel does (a GAT's heads concatenated, its output heads' classes), and the part's counts.
func TestFootprintOfTheLayout(t *testing.T) {
	for _, m := range []struct {
		name        string
		heads, outH int
		sage        bool
	}{{"gcn", 0, 0, false}, {"sage", 0, 0, true}, {"gat", 3, 2, false}} {
		cfg := fuzzConfigs(t)[1]
		cfg.Heads, cfg.OutHeads, cfg.SAGE = m.heads, m.outH, m.sage
		part, cuts, err := newPart(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, lay, _, err := newModel(&cfg, part, cuts, taskEnv{backend: cfg.Backend})
		if err != nil {
			t.Fatal(err)
		}
		f := cfg.footprint(part, cfg.dimsOf(part.Features.Cols(), cfg.Data.NumClasses))
		if !slices.Equal(f.Dims, lay.dims) || f.Owned != int64(part.Owned) || f.Ghosts != int64(len(part.Ghosts)) || f.Entries != part.Adj.NNZ() {
			t.Errorf("%s: footprint %+v, layout widths %v, part %d owned, %d ghosts, %d entries", m.name, f, lay.dims, part.Owned, len(part.Ghosts), part.Adj.NNZ())
		}
		if !f.Evaluates { // EvalEvery 1 of 3 epochs: passes beside training
			t.Errorf("%s: evaluating every epoch of 3, Evaluates false", m.name)
		}
	}
}

// A graph server whose prediction exceeds its memory limit refuses before it allocates its
// rows, naming the part, the prediction and the limit; under a limit it fits, it starts.
func TestRefusesOverMemoryLimit(t *testing.T) {
	cfg := fuzzConfigs(t)[0]
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(32 << 20))
	_, err := newServer(context.Background(), &errgroup.Group{}, cfg)
	if err == nil {
		t.Fatal("a 32 MiB limit: the server started")
	}
	for _, want := range []string{"partition 0 (", "owned vertices", "ghosts", "needs about", "over the memory limit of 32 MiB", "staleness 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want %q in it", err, want)
		}
	}
	debug.SetMemoryLimit(1 << 30)
	s, err := newServer(context.Background(), &errgroup.Group{}, cfg)
	if err != nil {
		t.Fatalf("a 1 GiB limit: %v", err)
	}
	s.peers.close()
	s.shards.close()
}

// Every slot count the server keeps adds its rows: S ≥ 1 keeps two epochs of Z_l, an
// asynchronous GCN two of its owned P_l and dZ_l rows, a GAT 2S+2 of its P_l, s_src and
// attention per entry.
func TestFootprintGrowsWithSlots(t *testing.T) {
	f := Footprint{Owned: 1000, Ghosts: 500, Entries: 20000, Dims: []int{32, 32, 16}, Intervals: 4}
	prev := 0.0
	for _, s := range []string{"sync", "0", "1"} {
		if err := f.Staleness.Set(s); err != nil {
			t.Fatal(err)
		}
		if b := f.Bytes(); b <= prev {
			t.Errorf("GCN at staleness %s: %.0f bytes, not above %.0f", s, b, prev)
		}
		prev = f.Bytes()
	}
	// S = 2 keeps what S = 1 does for a GCN (R = 2, π = 2)
	s2 := f
	s2.Staleness = jobconfig.Bounded(2)
	if s2.Bytes() != f.Bytes() {
		t.Errorf("GCN: S = 2 %.0f bytes, S = 1 %.0f", s2.Bytes(), f.Bytes())
	}
	gat := s2
	gat.Heads, gat.OutHeads, gat.Dims = 2, 1, []int{32, 32, 16}
	gat1 := gat
	gat1.Staleness = jobconfig.Bounded(1)
	if gat.Bytes() <= gat1.Bytes() {
		t.Errorf("GAT: S = 2 %.0f bytes, not above S = 1's %.0f (R = 6 against 4)", gat.Bytes(), gat1.Bytes())
	}
}

// A GAT's mixed-epoch reads compose whole copies of P_l, s_src, dZ_l, α̃ and du, one of each
// per interval asynchronously and none synchronously: from 2 intervals to 4 a GAT at S = 1
// adds two of each, per owned row 4·(2w+h), per ghost 4·(w+h) and per entry 4·h a layer (and
// the collector's twentieth), and a synchronous one nothing.
func TestGATFootprintCountsComposites(t *testing.T) {
	f := Footprint{Owned: 1000, Ghosts: 500, Entries: 20000, Dims: []int{32, 64, 16}, Heads: 4, OutHeads: 1, Staleness: jobconfig.Bounded(1), Intervals: 2}
	f4 := f
	f4.Intervals = 4
	t2, t4 := f.Terms(), f4.Terms()
	// layers of width 64 with 4 heads and 16 with 1
	want := Terms{Owned: 2 * 4 * (2*64 + 4 + 2*16 + 1), Ghost: 2 * 4 * (64 + 4 + 16 + 1), Entry: 2 * 4 * (4 + 1)}
	got := Terms{Owned: t4.Owned - t2.Owned, Ghost: t4.Ghost - t2.Ghost, Entry: t4.Entry - t2.Entry}
	for _, c := range []struct {
		what      string
		got, want float64
	}{{"owned row", got.Owned, want.Owned}, {"ghost", got.Ghost, want.Ghost}, {"entry", got.Entry, want.Entry}} {
		if math.Abs(c.got-(1+gcShare)*c.want) > 1e-9 {
			t.Errorf("S = 1, 4 intervals against 2: %.2f bytes more per %s, want %.2f", c.got, c.what, (1+gcShare)*c.want)
		}
	}
	f.Staleness, f4.Staleness = jobconfig.Sync, jobconfig.Sync
	if a, b := f.Terms(), f4.Terms(); a != b {
		t.Errorf("synchronous: 2 intervals %+v, 4 intervals %+v: want no composites in either", a, b)
	}
}
