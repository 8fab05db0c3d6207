package shapes

import (
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// checkSimple fails t unless adj is symmetric, with sorted rows, no self loops and no repeats.
func checkSimple(t *testing.T, name string, adj *tensor.CSR) {
	t.Helper()
	for u := range adj.Rows {
		row := adj.ColIdx[adj.RowPtr[u]:adj.RowPtr[u+1]]
		for i, v := range row {
			if int(v) == u || (i > 0 && row[i-1] >= v) {
				t.Fatalf("%s: row %d is %v: want sorted, without itself or repeats", name, u, row)
			}
			if _, ok := slices.BinarySearch(adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]], int32(u)); !ok {
				t.Fatalf("%s: %d→%d without %d→%d", name, u, v, v, u)
			}
		}
	}
}

// degrees returns the sorted degrees of adj.
func degrees(adj *tensor.CSR) []int {
	d := make([]int, adj.Rows)
	for v := range d {
		d[v] = adj.Degree(v)
	}
	slices.Sort(d)
	return d
}

// TestShapes: every shape is a simple symmetric graph of the size asked: the 30×20 grid has
// its 2·(29·20 + 30·19) entries and degrees 2 to 4; a 6-regular graph of 1000 vertices has at
// most 6000 entries, no degree above 6 and nearly all of 6; an R-MAT graph of 2^12 vertices
// from 20000 draws keeps most of them, its heaviest vertex far above the mean; a renumbered
// graph keeps its degrees and edge count; the same seed gives the same graph.
func TestShapes(t *testing.T) {
	g := Grid(30, 20, 1)
	checkSimple(t, "grid", g)
	if d := degrees(g); g.NNZ() != 2*(29*20+30*19) || d[0] != 2 || d[len(d)-1] != 4 {
		t.Errorf("grid 30×20: %d entries, degrees %d to %d; want %d, 2 to 4", g.NNZ(), d[0], d[len(d)-1], 2*(29*20+30*19))
	}
	r := Regular(1000, 6, 2)
	checkSimple(t, "regular", r)
	if d := degrees(r); r.NNZ() > 6000 || r.NNZ() < 5900 || d[len(d)-1] != 6 {
		t.Errorf("6-regular, 1000 vertices: %d entries, max degree %d", r.NNZ(), d[len(d)-1])
	}
	m := RMAT(12, 20000, 0.6, 0.15, 0.15, 3)
	checkSimple(t, "rmat", m)
	if d := degrees(m); m.Rows != 4096 || m.NNZ() < 2*15000 || m.NNZ() > 2*20000 || int64(d[len(d)-1]) < 10*m.NNZ()/int64(m.Rows) {
		t.Errorf("R-MAT 2^12 from 20000 edges: %d vertices, %d entries, max degree %d", m.Rows, m.NNZ(), d[len(d)-1])
	}
	p := Permuted(m, 4)
	checkSimple(t, "permuted", p)
	if !slices.Equal(degrees(p), degrees(m)) || slices.Equal(p.ColIdx, m.ColIdx) {
		t.Error("renumbering changed the degrees, or left the graph as it was")
	}
	if again := RMAT(12, 20000, 0.6, 0.15, 0.15, 3); !slices.Equal(again.ColIdx, m.ColIdx) || !slices.Equal(again.RowPtr, m.RowPtr) {
		t.Error("two R-MAT graphs of seed 3 differ")
	}
}
