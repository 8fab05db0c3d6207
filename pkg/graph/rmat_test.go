package graph

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestRMATBasic(t *testing.T) {
	p := RMATParams{Nodes: 5000, Edges: 80000, Features: 8, Classes: 5, Seed: 42}
	d, err := RMAT(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil { // symmetry, no self loops, sorted unique columns, splits
		t.Fatal(err)
	}
	if d.NumNodes() != p.Nodes || d.Adj.NNZ() != int64(p.Edges) {
		t.Fatalf("%d nodes, %d entries; want %d, %d", d.NumNodes(), d.Adj.NNZ(), p.Nodes, p.Edges)
	}
	if d.Features.Dense == nil || d.NumFeatures() != 8 || d.NumClasses != 5 {
		t.Fatalf("features %+v, classes %d", d.Features, d.NumClasses)
	}
	if len(d.Train) != 500 || len(d.Val) != 500 || len(d.Test) != 4000 {
		t.Fatalf("split sizes %d/%d/%d, want 500/500/4000", len(d.Train), len(d.Val), len(d.Test))
	}
	// Degree skew: R-MAT's hubs are far above the mean degree.
	maxDeg := 0
	for i := range d.NumNodes() {
		maxDeg = max(maxDeg, d.Adj.Degree(i))
	}
	mean := float64(p.Edges) / float64(p.Nodes)
	if float64(maxDeg) < 10*mean {
		t.Errorf("max degree %d, mean %.1f: no skew", maxDeg, mean)
	}
	// Node ids are permuted: the hubs are not all at the low ids.
	hub := 0
	for i := range d.NumNodes() {
		if d.Adj.Degree(i) == maxDeg {
			hub = i
		}
	}
	t.Logf("max degree %d at node %d, mean %.1f, isolated %d", maxDeg, hub, mean, d.Meta.IsolatedNodes)
	// Features look standard normal.
	var sum, sq float64
	for _, v := range d.Features.Dense.Data {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(d.Features.Dense.Data))
	if m, v := sum/n, sq/n-(sum/n)*(sum/n); m < -0.05 || m > 0.05 || v < 0.9 || v > 1.1 {
		t.Errorf("features mean %.3f variance %.3f", m, v)
	}
	for c, k := range d.Meta.ClassCounts {
		if k < 800 || k > 1200 {
			t.Errorf("class %d has %d nodes of 5000", c, k)
		}
	}
}

func TestRMATDeterministic(t *testing.T) {
	// Several chunks, so that goroutines interleave, and N not a power of two, so that rejected
	// draws need more than one round.
	p := RMATParams{Nodes: 12000, Edges: 2*rmatChunk + 1000, Features: 2, Classes: 3, Seed: 3}
	a, err := RMAT(p)
	if err != nil {
		t.Fatal(err)
	}
	procs := 1
	if runtime.GOMAXPROCS(0) == 1 {
		procs = 4
	}
	old := runtime.GOMAXPROCS(procs)
	b, err := RMAT(p)
	runtime.GOMAXPROCS(old)
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDatasets(a, b); diff != "" {
		t.Fatalf("GOMAXPROCS %d and %d differ in %s", old, procs, diff)
	}
	p.Seed = 4
	e, err := RMAT(p)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.Adj.ColIdx, e.Adj.ColIdx) {
		t.Fatal("seeds 3 and 4 give the same graph")
	}
}

func TestRMATSmallAndDense(t *testing.T) {
	// The complete graph on 4 nodes, and on 2.
	for _, p := range []RMATParams{{Nodes: 4, Edges: 12, Classes: 1}, {Nodes: 2, Edges: 2, Classes: 1}, {Nodes: 3, Edges: 0, Classes: 2}} {
		d, err := RMAT(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Validate(); err != nil || d.Adj.NNZ() != int64(p.Edges) || d.Features.Present() {
			t.Fatalf("%v: %v, %d entries", p, err, d.Adj.NNZ())
		}
		if !strings.Contains(d.Meta.Missing, "features=0") {
			t.Errorf("graph-only R-MAT has missing note %q", d.Meta.Missing)
		}
	}
	// Complete on 128 nodes: pairs of two rare quadrants are almost never drawn.
	_, err := RMAT(RMATParams{Nodes: 128, Edges: 128 * 127, Classes: 1})
	if err == nil || !strings.Contains(err.Error(), "too dense") {
		t.Fatalf("complete 128-node R-MAT: %v, want a too-dense error", err)
	}
}

func TestRMATParamErrors(t *testing.T) {
	for _, tc := range []struct {
		p    RMATParams
		want string
	}{
		{RMATParams{Nodes: 1, Edges: 0, Classes: 1}, "nodes=1"},
		{RMATParams{Nodes: 10, Edges: 3, Classes: 1}, "even"},
		{RMATParams{Nodes: 10, Edges: -2, Classes: 1}, "even"},
		{RMATParams{Nodes: 10, Edges: 92, Classes: 1}, "N(N-1)/2 = 45"},
		{RMATParams{Nodes: 10, Edges: 10, Classes: 0}, "classes=0"},
		{RMATParams{Nodes: 10, Edges: 10, Features: -1, Classes: 1}, "features=-1"},
		{RMATParams{Nodes: 1 << 30, Edges: 10, Features: 1 << 30, Classes: 1}, "nodes × features"},
	} {
		if _, err := RMAT(tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RMAT(%+v) = %v, want an error containing %q", tc.p, err, tc.want)
		}
	}
}

func TestParseRMATSpec(t *testing.T) {
	p, err := ParseRMATSpec("rmat:nodes=100k,edges=2M,features=16,classes=4,seed=9")
	if err != nil {
		t.Fatal(err)
	}
	if want := (RMATParams{Nodes: 100000, Edges: 2000000, Features: 16, Classes: 4, Seed: 9}); p != want {
		t.Fatalf("got %+v, want %+v", p, want)
	}
	if q, err := ParseRMATSpec(p.String()); err != nil || q != p {
		t.Fatalf("String round trip: %+v, %v", q, err)
	}
	if p, err := ParseRMATSpec("rmat:nodes=1000,edges=4000"); err != nil || p.Features != 128 || p.Classes != 16 || p.Seed != 0 {
		t.Fatalf("defaults: %+v, %v", p, err)
	}
	for _, tc := range []struct{ spec, want string }{
		{"rmat:nodes=10,edges=10,colour=3", `unknown key "colour"`},
		{"rmat:nodes=ten,edges=10", `nodes: "ten" is not a non-negative integer`},
		{"rmat:nodes=10,edges=-4", "is not a non-negative integer"},
		{"rmat:nodes=10", "edges is required"},
		{"rmat:nodes=10,edges=10,nodes=11", "given twice"},
		{"rmat:nodes=10,,edges=10", "is not key=value"},
		{"rmat:nodes=10,edges=100", "only N(N-1)/2 = 45"},
		{"rmat:nodes=10,edges=99999999999999999999", "not a non-negative integer"},
		{"rmat:nodes=10,edges=20000000000G", "overflows"},
		{"rmat:", "is not key=value"},
	} {
		if _, err := ParseRMATSpec(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRMATSpec(%q) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestRadixSortAndMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 255, 256, 10000} {
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = r.Uint64N(1 << 40)
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		if got := radixSort(keys, 40); !slices.Equal(got, want) {
			t.Fatalf("radixSort of %d keys wrong", n)
		}
	}
	for range 200 {
		mk := func() []uint64 {
			s := make([]uint64, r.IntN(50))
			for i := range s {
				s[i] = r.Uint64N(60)
			}
			slices.Sort(s)
			return slices.Compact(s)
		}
		a, b := mk(), mk()
		want := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a), b...))))
		if r.IntN(2) == 0 {
			a = slices.Grow(a, len(b)) // exercise the in-place path
		}
		if got := mergeDedup(a, b); !slices.Equal(got, want) {
			t.Fatalf("mergeDedup = %v, want %v", got, want)
		}
	}
	keys := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	got := sampleSorted(slices.Clone(keys), 4, rand.New(rand.NewPCG(5, 6)))
	if len(got) != 4 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != 4 {
		t.Fatalf("sampleSorted = %v", got)
	}
}
