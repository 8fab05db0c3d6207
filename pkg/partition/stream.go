package partition

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// streamChunk bounds the adjacency entries plus feature values read from a prepared file at once.
const streamChunk = 1 << 24

// chunkEnd returns the end of the range of rows from lo whose adjacency entries and features
// stay near streamChunk values (at least one row).
func chunkEnd(rowPtr []int64, lo, features int) int {
	return rowsEnd(rowPtr, lo, int64(features), streamChunk)
}

// rowsEnd returns the end of the longest range of rows from lo (at least one row) whose
// adjacency entries plus perRow values a row stay within limit.
func rowsEnd(rowPtr []int64, lo int, perRow, limit int64) int {
	n := len(rowPtr) - 1
	hi := lo + 1
	for step := 1 << 20; step > 0; step >>= 1 {
		if t := hi + step; t <= n && rowPtr[t]-rowPtr[lo]+int64(t-lo)*perRow <= limit {
			hi = t
		}
	}
	return hi
}

// ReadAdjacency reads the adjacency of the whole-graph prepared file (or directory) path,
// streaming it a range of rows at a time into one int32 column array (4 bytes an entry, 8 a
// row), and verifies the file's checksums. Features are read and dropped a chunk at a time.
func ReadAdjacency(path string) (*tensor.CSR, error) {
	r, err := graph.OpenRowReader(path)
	if err != nil {
		return nil, err
	}
	rowPtr := r.RowPtr()
	n := r.NumNodes()
	adj := &tensor.CSR{Rows: n, Cols: n, RowPtr: rowPtr, ColIdx: make([]int32, rowPtr[n])}
	features := r.Meta().NumFeatures
	for lo := 0; lo < n; {
		hi := chunkEnd(rowPtr, lo, features)
		rows, _, err := r.Rows(lo, hi)
		if err != nil {
			r.Close()
			return nil, err
		}
		copy(adj.ColIdx[rowPtr[lo]:rowPtr[hi]], rows.ColIdx)
		lo = hi
	}
	if err := r.Finish(); err != nil {
		return nil, err
	}
	return adj, nil
}

// WritePrepared is WritePreparedWith the default method.
func WritePrepared(src string, parts int, dir string) (Plan, Quality, error) {
	return WritePreparedWith(src, parts, dir, DefaultMethod)
}

// WritePreparedWith partitions the whole-graph prepared file (or directory) src into parts parts
// by method and writes their files and manifest into dir. It streams: with MethodContiguous it
// holds the row offsets, labels and splits of the whole graph but the adjacency and features of
// one part at a time; the other methods also hold the adjacency (4 bytes an entry) while they
// cut (the multilevel cut releases it while it coarsens, and reads it again), and then read the
// file once more per part for that part's rows. The file's checksums are verified; on a mismatch
// the written files are removed.
func WritePreparedWith(src string, parts int, dir string, method Method) (Plan, Quality, error) {
	if method == MethodContiguous {
		return writePreparedContiguous(src, parts, dir)
	}
	adj, err := ReadAdjacency(src)
	if err != nil {
		return Plan{}, Quality{}, err
	}
	plan, err := newPlan(adj, parts, method, func() ([]int32, error) {
		again, err := ReadAdjacency(src)
		if err != nil {
			return nil, err
		}
		return again.ColIdx, nil
	})
	if err != nil {
		return Plan{}, Quality{}, err
	}
	r, err := graph.OpenRowReader(src)
	if err != nil {
		return Plan{}, Quality{}, err
	}
	r.Close() // only its small sections are used
	s := preparedSource(r)
	inv := s.renumber(plan.Perm)
	s.rows = func(lo, hi int) (*tensor.CSR, graph.Features, error) { // adj is released by now
		return gatherRows(src, plan.Perm[lo:hi], inv)
	}
	q, err := writeParts(s, plan, dir)
	return plan, q, err
}

// preparedSource returns the source of a prepared file's small sections in its own numbering.
func preparedSource(r *graph.RowReader) *source {
	rowPtr := r.RowPtr()
	s := &source{meta: r.Meta(), classes: r.NumClasses(), degree: make([]int32, r.NumNodes()), labels: r.Labels()}
	for v := range s.degree {
		s.degree[v] = int32(rowPtr[v+1] - rowPtr[v])
	}
	s.splits[0], s.splits[1], s.splits[2] = r.Splits()
	return s
}

// writePreparedContiguous writes the contiguous cut of src, reading it once in order.
func writePreparedContiguous(src string, parts int, dir string) (Plan, Quality, error) {
	r, err := graph.OpenRowReader(src)
	if err != nil {
		return Plan{}, Quality{}, err
	}
	plan, err := Contiguous(r.RowPtr(), parts)
	if err != nil {
		r.Close()
		return Plan{}, Quality{}, err
	}
	s := preparedSource(r)
	s.rows = r.Rows
	q, err := writeParts(s, plan, dir)
	if err != nil {
		r.Close()
		return Plan{}, Quality{}, err
	}
	if err := r.Finish(); err != nil {
		for p := range parts {
			os.Remove(filepath.Join(dir, graph.PartitionFileName(p, parts)))
		}
		os.Remove(filepath.Join(dir, ManifestFileName))
		return Plan{}, Quality{}, err
	}
	return plan, q, nil
}

// gatherRows returns the adjacency rows of the ascending vertex ids of the prepared file src,
// their columns renumbered by inv and sorted, and their feature rows (zero Features when it has
// none), read in one pass over the file up to the last of them.
func gatherRows(src string, ids, inv []int32) (*tensor.CSR, graph.Features, error) {
	r, err := graph.OpenRowReader(src)
	if err != nil {
		return nil, graph.Features{}, err
	}
	defer r.Close()
	rowPtr, cols := r.RowPtr(), r.Meta().NumFeatures
	adj := &tensor.CSR{Rows: len(ids), Cols: len(inv), RowPtr: make([]int64, len(ids)+1)}
	for i, id := range ids {
		adj.RowPtr[i+1] = adj.RowPtr[i] + rowPtr[id+1] - rowPtr[id]
	}
	adj.ColIdx = make([]int32, adj.RowPtr[len(ids)])
	var feats graph.Features
	next := 0
	for lo := 0; next < len(ids); {
		hi := chunkEnd(rowPtr, lo, cols)
		rows, f, err := r.Rows(lo, hi)
		if err != nil {
			return nil, graph.Features{}, err
		}
		for ; next < len(ids) && int(ids[next]) < hi; next++ {
			v := int(ids[next]) - lo
			row := adj.ColIdx[adj.RowPtr[next]:adj.RowPtr[next+1]]
			for k, c := range rows.ColIdx[rows.RowPtr[v]:rows.RowPtr[v+1]] {
				row[k] = inv[c]
			}
			slices.Sort(row)
			if f.Present() {
				appendFeatureRow(&feats, f, v, len(ids), next)
			}
		}
		lo = hi
	}
	return adj, feats, nil
}

// appendFeatureRow copies row r of f into row i of out, a block of n rows of f's kind (allocated
// on the first call; sparse rows must come in order).
func appendFeatureRow(out *graph.Features, f graph.Features, r, n, i int) {
	switch {
	case f.Dense != nil:
		if out.Dense == nil {
			out.Dense = tensor.NewDense(n, f.Dense.Cols)
		}
		copy(out.Dense.Row(i), f.Dense.Row(r))
	case f.Sparse != nil:
		x := f.Sparse
		if out.Sparse == nil {
			out.Sparse = &tensor.CSR{Rows: n, Cols: x.Cols, RowPtr: make([]int64, n+1)}
		}
		o := out.Sparse
		a, b := x.RowPtr[r], x.RowPtr[r+1]
		o.ColIdx = append(o.ColIdx, x.ColIdx[a:b]...)
		if x.Val != nil {
			o.Val = append(o.Val, x.Val[a:b]...)
		}
		o.RowPtr[i+1] = int64(len(o.ColIdx))
	}
}
