package graph

import (
	"fmt"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// edgePass streams an edge list once, calling add for each pair in range [0, n); it returns
// the first malformed or out-of-range entry as an error naming where it is.
type edgePass func(add func(u, v int32)) error

// symmetrized is what symmetricAdjacency did to an edge list, for the dataset's meta.
type symmetrized struct {
	pairs      int64 // pairs the list holds
	selfLoops  int64 // pairs (v, v), dropped
	duplicates int64 // adjacency entries that repeated another, merged
}

// note describes the conversion as Meta.Conversion says it.
func (s symmetrized) note(file string) string {
	return fmt.Sprintf("edge list made symmetric: each of the %d pairs of %s entered in both directions, %d repeated entries merged, %d self loops dropped",
		s.pairs, file, s.duplicates, s.selfLoops)
}

// symmetricAdjacency builds the N×N symmetric adjacency, without self loops or repeated
// entries, of the edge list that pass streams: it calls pass twice, once to count each vertex's
// degree and once to place its neighbours, so that the list is never held in memory, only the
// CSR it becomes (each pair entered in both directions, then each row sorted and repeats
// merged in place).
func symmetricAdjacency(n int, pass edgePass) (*tensor.CSR, symmetrized, error) {
	var st symmetrized
	rowPtr := make([]int64, n+1)
	err := pass(func(u, v int32) {
		st.pairs++
		if u == v {
			st.selfLoops++
			return
		}
		rowPtr[u+1]++
		rowPtr[v+1]++
	})
	if err != nil {
		return nil, st, err
	}
	for i := range n {
		rowPtr[i+1] += rowPtr[i]
	}
	// rowPtr[u+1] is row u's end; placing each entry at --rowPtr[u+1] leaves it at row u's
	// start, that is rowPtr[u] once shifted down by one.
	colIdx := make([]int32, rowPtr[n])
	placed := int64(0)
	err = pass(func(u, v int32) {
		if u == v {
			return
		}
		placed += 2
		if placed > int64(len(colIdx)) {
			return // the list changed between the passes; reported below
		}
		rowPtr[u+1]--
		colIdx[rowPtr[u+1]] = v
		rowPtr[v+1]--
		colIdx[rowPtr[v+1]] = u
	})
	if err != nil {
		return nil, st, err
	}
	if placed != int64(len(colIdx)) {
		return nil, st, fmt.Errorf("graph: the edge list changed while it was read (%d entries counted, %d on the second pass)", len(colIdx), placed)
	}
	copy(rowPtr[:n], rowPtr[1:])
	rowPtr[n] = int64(len(colIdx))
	// Sort and merge each row in place, in parallel; then close the gaps the merges left.
	kept := make([]int64, n)
	parallelRanges(n, rowGrain, func(lo, hi int) {
		for u := lo; u < hi; u++ {
			row := colIdx[rowPtr[u]:rowPtr[u+1]]
			slices.Sort(row)
			kept[u] = int64(len(slices.Compact(row)))
		}
	})
	w := int64(0)
	for u := range n {
		start := rowPtr[u]
		copy(colIdx[w:], colIdx[start:start+kept[u]])
		rowPtr[u] = w
		w += kept[u]
	}
	st.duplicates = rowPtr[n] - w
	rowPtr[n] = w
	if st.duplicates > 0 {
		colIdx = slices.Clip(colIdx[:w])
	}
	return &tensor.CSR{Rows: n, Cols: n, RowPtr: rowPtr, ColIdx: colIdx}, st, nil
}

// denseOrSparse returns x as the Features the loaders hold: sparse (8 bytes a nonzero) when
// fewer than half its values are nonzero, as the text format's col:value features are, else
// dense (4 bytes a value). Either holds the same values; explicit zeros are not stored.
func denseOrSparse(x *tensor.Dense) Features {
	_, nz := scanValues(x.Data)
	if 2*nz >= int64(len(x.Data)) {
		return Features{Dense: x}
	}
	s := &tensor.CSR{Rows: x.Rows, Cols: x.Cols, RowPtr: make([]int64, x.Rows+1), ColIdx: make([]int32, 0, nz), Val: make([]float32, 0, nz)}
	for i := range x.Rows {
		for c, v := range x.Data[i*x.Cols : (i+1)*x.Cols] {
			if v != 0 {
				s.ColIdx = append(s.ColIdx, int32(c))
				s.Val = append(s.Val, v)
			}
		}
		s.RowPtr[i+1] = int64(len(s.ColIdx))
	}
	return Features{Sparse: s}
}

// convertedMeta returns the meta of d, a dataset converted from another layout, from its data:
// source says where it came from, split how its split was made, s what symmetricAdjacency
// did to its edge list (read from edgeFile).
func convertedMeta(d *Dataset, source, split, edgeFile string, s symmetrized) Meta {
	pairs := s.pairs
	m := Meta{
		Name: d.Name, NumNodes: d.NumNodes(), NumEdges: int64(len(d.Adj.ColIdx)), NumUndirectedEdges: int64(len(d.Adj.ColIdx)) / 2,
		NumFeatures: d.NumFeatures(), NumClasses: d.NumClasses, FeaturesAvailable: d.Features.Present(),
		EdgeFile: edgeFileName(d.Adj), SelfLoopsRemoved: s.selfLoops, IsolatedNodes: isolatedNodes(d.Adj),
		ClassCounts: classCounts(d.Labels, d.NumClasses),
		SplitSizes:  SplitSizes{len(d.Train), len(d.Val), len(d.Test)},
		Split:       split, Source: source, RawAdjacencyPairs: &pairs, Conversion: s.note(edgeFile),
	}
	switch {
	case d.Features.Sparse != nil:
		nz := int64(len(d.Features.Sparse.ColIdx))
		m.NumFeatureNonzeros = &nz
		m.FeatureType = "float32, stored sparse (fewer than half the values are nonzero)"
	case d.Features.Dense != nil:
		nz := d.Features.Nonzeros()
		m.NumFeatureNonzeros = &nz
		m.FeatureType = "float32, dense"
	}
	for i, l := range d.Labels {
		if l < 0 {
			m.UnlabeledNodes = append(m.UnlabeledNodes, int32(i))
		}
	}
	return m
}
