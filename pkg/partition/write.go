package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// source is a graph in a plan's numbering, read one range of rows at a time.
type source struct {
	meta    graph.Meta
	classes int
	degree  []int32    // adjacency entries of every vertex
	labels  []int32    // every vertex's label
	splits  [3][]int32 // sorted train, val and test ids
	perm    []int32    // perm[new] = old id; nil when the numbering is the dataset's
	// rows returns the adjacency rows [lo, hi) (global column ids, sorted) and their features.
	rows func(lo, hi int) (*tensor.CSR, graph.Features, error)
}

// WriteDataset writes one partition file per part of plan for d, and their manifest, into dir
// (created if needed) and returns the plan's quality.
func WriteDataset(d *graph.Dataset, plan Plan, dir string) (Quality, error) {
	src, err := datasetSource(d, plan)
	if err != nil {
		return Quality{}, err
	}
	return writeParts(src, plan, dir)
}

// DatasetPart returns part p of plan for d in memory, as its partition file would hold it.
func DatasetPart(d *graph.Dataset, plan Plan, p int) (*graph.PartitionData, error) {
	src, err := datasetSource(d, plan)
	if err != nil {
		return nil, err
	}
	if p < 0 || p >= plan.Parts() {
		return nil, fmt.Errorf("partition: part %d of %d: %w", p, plan.Parts(), ErrPlan)
	}
	return src.part(plan.Bounds, p)
}

// datasetSource returns d in the numbering of plan.
func datasetSource(d *graph.Dataset, plan Plan) (*source, error) {
	n := d.NumNodes()
	if int(plan.Bounds[plan.Parts()]) != n || (plan.Perm != nil && len(plan.Perm) != n) {
		return nil, fmt.Errorf("partition: plan for %d vertices, dataset %s has %d: %w", plan.Bounds[plan.Parts()], d.Name, n, ErrPlan)
	}
	src := &source{meta: d.Meta, classes: d.NumClasses, degree: make([]int32, n), labels: d.Labels}
	for v := range n {
		src.degree[v] = int32(d.Adj.Degree(v))
	}
	src.splits = [3][]int32{d.Train, d.Val, d.Test}
	if plan.Perm == nil {
		src.rows = func(lo, hi int) (*tensor.CSR, graph.Features, error) {
			return sliceRows(d.Adj, lo, hi), FeatureRows(d.Features, lo, hi), nil
		}
		return src, nil
	}
	inv := src.renumber(plan.Perm)
	src.rows = func(lo, hi int) (*tensor.CSR, graph.Features, error) {
		return permutedRows(d.Adj, plan.Perm, inv, lo, hi), permutedFeatures(d.Features, plan.Perm, lo, hi), nil
	}
	return src, nil
}

// renumber puts the degrees, labels and splits of s (in the original numbering) into the
// numbering of perm (perm[new] = old) and returns its inverse.
func (s *source) renumber(perm []int32) []int32 {
	n := len(perm)
	inv := make([]int32, n)
	for v, o := range perm {
		inv[o] = int32(v)
	}
	degree, labels := make([]int32, n), make([]int32, n)
	for v, o := range perm {
		degree[v], labels[v] = s.degree[o], s.labels[o]
	}
	s.degree, s.labels = degree, labels
	for k, ids := range s.splits {
		m := make([]int32, len(ids))
		for i, id := range ids {
			m[i] = inv[id]
		}
		slices.Sort(m)
		s.splits[k] = m
	}
	s.meta.UnlabeledNodes = nil // ids of the original numbering
	s.perm = perm
	return inv
}

// writeParts writes every part's file in order, measures the cut, and writes the manifest.
func writeParts(s *source, plan Plan, dir string) (Quality, error) {
	bounds := plan.Bounds
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Quality{}, fmt.Errorf("partition: %w", err)
	}
	parts := len(bounds) - 1
	stats := make([]partStats, parts)
	for p := range parts {
		d, err := s.part(bounds, p)
		if err != nil {
			return Quality{}, err
		}
		if err := graph.WritePartitionFile(filepath.Join(dir, graph.PartitionFileName(p, parts)), d); err != nil {
			return Quality{}, err
		}
		stats[p] = partStats{rows: int64(d.Rows()), entries: d.Adj.NNZ(), ghosts: int64(len(d.GhostIDs))}
		for _, c := range d.Adj.ColIdx {
			if int64(c) < bounds[p] || int64(c) >= bounds[p+1] {
				stats[p].cut++
			}
		}
	}
	q := quality(stats)
	return q, writeManifest(dir, s, bounds, plan.Method, q)
}

// part assembles the PartitionData of part p.
func (s *source) part(bounds []int64, p int) (*graph.PartitionData, error) {
	lo, hi := int(bounds[p]), int(bounds[p+1])
	adj, feats, err := s.rows(lo, hi)
	if err != nil {
		return nil, err
	}
	var ghosts []int32
	for _, c := range adj.ColIdx {
		if int(c) < lo || int(c) >= hi {
			ghosts = append(ghosts, c)
		}
	}
	slices.Sort(ghosts)
	ghosts = slices.Clip(slices.Compact(ghosts))
	deg := make([]int32, len(ghosts))
	orig, ghostOrig := make([]int32, hi-lo), make([]int32, len(ghosts))
	for v := lo; v < hi; v++ {
		orig[v-lo] = s.original(int32(v))
	}
	for i, g := range ghosts {
		deg[i] = s.degree[g]
		ghostOrig[i] = s.original(g)
	}
	d := &graph.PartitionData{
		Part: p, Parts: len(bounds) - 1, Bounds: bounds, Adj: adj, GhostIDs: ghosts, GhostDegree: deg, OrigIDs: orig, GhostOrigIDs: ghostOrig,
		Features: feats, Labels: s.labels[lo:hi], NumClasses: s.classes, Meta: s.meta,
	}
	local := [3]*[]int32{&d.Train, &d.Val, &d.Test}
	for k, ids := range s.splits {
		a, _ := slices.BinarySearch(ids, int32(lo))
		b, _ := slices.BinarySearch(ids, int32(hi))
		out := make([]int32, b-a)
		for i, id := range ids[a:b] {
			out[i] = id - int32(lo)
		}
		*local[k] = out
	}
	return d, nil
}

// original returns the original id of vertex v.
func (s *source) original(v int32) int32 {
	if s.perm == nil {
		return v
	}
	return s.perm[v]
}

// sliceRows returns rows [lo, hi) of m, sharing its column indices.
func sliceRows(m *tensor.CSR, lo, hi int) *tensor.CSR {
	a, b := m.RowPtr[lo], m.RowPtr[hi]
	out := &tensor.CSR{Rows: hi - lo, Cols: m.Cols, RowPtr: make([]int64, hi-lo+1), ColIdx: m.ColIdx[a:b]}
	for i := range out.RowPtr {
		out.RowPtr[i] = m.RowPtr[lo+i] - a
	}
	if m.Val != nil {
		out.Val = m.Val[a:b]
	}
	return out
}

// sliceFeatures returns feature rows [lo, hi), sharing storage.
func FeatureRows(f graph.Features, lo, hi int) graph.Features {
	switch {
	case f.Sparse != nil:
		return graph.Features{Sparse: sliceRows(f.Sparse, lo, hi)}
	case f.Dense != nil:
		return graph.Features{Dense: f.Dense.RowSlice(lo, hi)}
	}
	return graph.Features{}
}

// permutedRows returns the rows [lo, hi) of the renumbered adjacency: new row v is old row
// perm[v] with its columns renumbered by inv and sorted.
func permutedRows(adj *tensor.CSR, perm, inv []int32, lo, hi int) *tensor.CSR {
	out := &tensor.CSR{Rows: hi - lo, Cols: adj.Cols, RowPtr: make([]int64, hi-lo+1)}
	for v := lo; v < hi; v++ {
		out.RowPtr[v-lo+1] = out.RowPtr[v-lo] + int64(adj.Degree(int(perm[v])))
	}
	out.ColIdx = make([]int32, out.RowPtr[hi-lo])
	for v := lo; v < hi; v++ {
		o := perm[v]
		row := out.ColIdx[out.RowPtr[v-lo]:out.RowPtr[v-lo+1]]
		for i, c := range adj.ColIdx[adj.RowPtr[o]:adj.RowPtr[o+1]] {
			row[i] = inv[c]
		}
		slices.Sort(row)
	}
	return out
}

// permutedFeatures returns the feature rows of new ids [lo, hi) (old rows perm[lo:hi]).
func permutedFeatures(f graph.Features, perm []int32, lo, hi int) graph.Features {
	switch {
	case f.Sparse != nil:
		x := f.Sparse
		out := &tensor.CSR{Rows: hi - lo, Cols: x.Cols, RowPtr: make([]int64, hi-lo+1)}
		for v := lo; v < hi; v++ {
			o := perm[v]
			a, b := x.RowPtr[o], x.RowPtr[o+1]
			out.ColIdx = append(out.ColIdx, x.ColIdx[a:b]...)
			if x.Val != nil {
				out.Val = append(out.Val, x.Val[a:b]...)
			}
			out.RowPtr[v-lo+1] = int64(len(out.ColIdx))
		}
		return graph.Features{Sparse: out}
	case f.Dense != nil:
		out := tensor.NewDense(hi-lo, f.Dense.Cols)
		for v := lo; v < hi; v++ {
			copy(out.Row(v-lo), f.Dense.Row(int(perm[v])))
		}
		return graph.Features{Dense: out}
	}
	return graph.Features{}
}
