package graph

import (
	"math"
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

func TestNormalizedAdjacency(t *testing.T) {
	// Path 0-1-2 and isolated node 3. Degrees of A+I: 2, 3, 2, 1.
	adj := &tensor.CSR{Rows: 4, Cols: 4, RowPtr: []int64{0, 1, 3, 4, 4}, ColIdx: []int32{1, 0, 2, 1}}
	got := NormalizedAdjacency(adj)
	s6 := 1 / math.Sqrt(6)
	wantPtr := []int64{0, 2, 5, 7, 8}
	wantCol := []int32{0, 1, 0, 1, 2, 1, 2, 3}
	wantVal := []float64{0.5, s6, s6, 1.0 / 3, s6, s6, 0.5, 1}
	if !slices.Equal(got.RowPtr, wantPtr) || !slices.Equal(got.ColIdx, wantCol) {
		t.Fatalf("structure %v %v, want %v %v", got.RowPtr, got.ColIdx, wantPtr, wantCol)
	}
	for i, w := range wantVal {
		if got.Val[i] != float32(w) {
			t.Errorf("value %d = %v, want %v", i, got.Val[i], float32(w))
		}
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(adj.ColIdx) != 4 || adj.Val != nil {
		t.Fatal("input modified")
	}

	// Weighted, with an existing diagonal entry: A+I = [[3 1] [1 1]], row sums 4 and 2.
	w := &tensor.CSR{Rows: 2, Cols: 2, RowPtr: []int64{0, 2, 3}, ColIdx: []int32{0, 1, 0}, Val: []float32{2, 1, 1}}
	g := NormalizedAdjacency(w)
	if !slices.Equal(g.ColIdx, []int32{0, 1, 0, 1}) || !slices.Equal(g.Val, []float32{0.75, float32(1 / math.Sqrt(8)), float32(1 / math.Sqrt(8)), 0.5}) {
		t.Fatalf("weighted: cols %v vals %v", g.ColIdx, g.Val)
	}
}

func TestNormalizedAdjacencyCora(t *testing.T) {
	d := loadCora(t)
	a := NormalizedAdjacency(d.Adj)
	if a.NNZ() != d.Adj.NNZ()+int64(d.NumNodes()) {
		t.Fatalf("nnz %d, want %d", a.NNZ(), d.Adj.NNZ()+int64(d.NumNodes()))
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	// Symmetric values: Â[i][j] == Â[j][i], and Â[i][i] = 1/deg(i).
	for i := range a.Rows {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			j := int(a.ColIdx[k])
			row := a.ColIdx[a.RowPtr[j]:a.RowPtr[j+1]]
			p, ok := slices.BinarySearch(row, int32(i))
			if !ok || a.Val[a.RowPtr[j]+int64(p)] != a.Val[k] {
				t.Fatalf("Â[%d][%d] has no equal transpose", i, j)
			}
			if i == j && math.Abs(float64(a.Val[k])-1/float64(d.Adj.Degree(i)+1)) > 1e-7 {
				t.Fatalf("Â[%d][%d] = %v, want 1/%d", i, i, a.Val[k], d.Adj.Degree(i)+1)
			}
		}
	}
}

func TestRowNormalize(t *testing.T) {
	x := &tensor.CSR{Rows: 3, Cols: 3, RowPtr: []int64{0, 2, 2, 4}, ColIdx: []int32{0, 2, 0, 1}, Val: []float32{1, 3, 2, -2}}
	RowNormalize(x)
	if !slices.Equal(x.Val, []float32{0.25, 0.75, 2, -2}) {
		t.Fatalf("RowNormalize: %v (a zero-sum row must be left alone)", x.Val)
	}
	ones := &tensor.CSR{Rows: 2, Cols: 4, RowPtr: []int64{0, 4, 5}, ColIdx: []int32{0, 1, 2, 3, 1}}
	RowNormalize(ones)
	if !slices.Equal(ones.Val, []float32{0.25, 0.25, 0.25, 0.25, 1}) {
		t.Fatalf("RowNormalize of Val nil: %v", ones.Val)
	}
	dense := &tensor.Dense{Rows: 3, Cols: 2, Data: []float32{1, 1, 0, 0, 3, 1}}
	RowNormalizeDense(dense)
	if !slices.Equal(dense.Data, []float32{0.5, 0.5, 0, 0, 0.75, 0.25}) {
		t.Fatalf("RowNormalizeDense: %v", dense.Data)
	}
	// Cora's features: every nonempty row sums to 1.
	d := loadCora(t)
	RowNormalize(d.Features.Sparse)
	f := d.Features.Sparse
	for i := range f.Rows {
		var s float64
		for _, v := range f.Val[f.RowPtr[i]:f.RowPtr[i+1]] {
			s += float64(v)
		}
		if f.RowPtr[i+1] > f.RowPtr[i] && math.Abs(s-1) > 1e-5 {
			t.Fatalf("row %d sums to %v", i, s)
		}
	}
}
