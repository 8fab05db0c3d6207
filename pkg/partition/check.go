package partition

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// CheckFiles reads every partition file of parts in dir (verifying its checksums, as a graph
// server does) and checks that they are one partitioning of one dataset: the same graph (name,
// vertices, edges, classes, features), the same bounds, and together every vertex and adjacency
// entry once. It returns the partitioning's quality, or an error naming the first file that does
// not belong and why.
func CheckFiles(dir string, parts int) (Quality, error) {
	if parts < 1 {
		return Quality{}, fmt.Errorf("partition: check %s: %d parts: %w", dir, parts, ErrPlan)
	}
	stats := make([]partStats, parts)
	var first *graph.PartitionData // file 0's graph and bounds, without its rows
	for p := range parts {
		path := filepath.Join(dir, graph.PartitionFileName(p, parts))
		d, err := graph.ReadPartitionFile(path, p, parts)
		if err != nil {
			return Quality{}, err
		}
		if first == nil {
			first = &graph.PartitionData{Bounds: d.Bounds, Meta: d.Meta, NumClasses: d.NumClasses}
		} else if err := sameSet(first, d); err != nil {
			return Quality{}, fmt.Errorf("partition: %s does not belong with %s: %w: %w", path,
				graph.PartitionFileName(0, parts), err, graph.ErrInvalid)
		}
		lo, hi := d.Bounds[p], d.Bounds[p+1]
		stats[p] = partStats{rows: int64(d.Rows()), entries: d.Adj.NNZ(), ghosts: int64(len(d.GhostIDs))}
		for _, c := range d.Adj.ColIdx {
			if int64(c) < lo || int64(c) >= hi {
				stats[p].cut++
			}
		}
	}
	q := quality(stats)
	if q.Entries != first.Meta.NumEdges {
		return Quality{}, fmt.Errorf("partition: files in %s hold %d adjacency entries, the dataset %s has %d: %w", dir, q.Entries, first.Meta.Name, first.Meta.NumEdges, graph.ErrInvalid)
	}
	return q, nil
}

// sameSet reports how partition file b differs from a of the same partitioning.
func sameSet(a, b *graph.PartitionData) error {
	ma, mb := a.Meta, b.Meta
	switch {
	case ma.Name != mb.Name || ma.NumNodes != mb.NumNodes || ma.NumEdges != mb.NumEdges:
		return fmt.Errorf("dataset %s (%d vertices, %d directed edges), not %s (%d vertices, %d directed edges)", mb.Name, mb.NumNodes, mb.NumEdges, ma.Name, ma.NumNodes, ma.NumEdges)
	case a.NumClasses != b.NumClasses || ma.NumFeatures != mb.NumFeatures:
		return fmt.Errorf("%d classes and %d features, not %d and %d", b.NumClasses, mb.NumFeatures, a.NumClasses, ma.NumFeatures)
	case !slices.Equal(a.Bounds, b.Bounds):
		return fmt.Errorf("another partitioning of %s (bounds %v, not %v)", mb.Name, shortBounds(b.Bounds), shortBounds(a.Bounds))
	}
	return nil
}

// shortBounds returns at most the first 9 bounds, for messages.
func shortBounds(b []int64) []int64 { return b[:min(len(b), 9)] }
