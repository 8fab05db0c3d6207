package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
)

// preparePartitions writes src as parts partition files into dir: streaming from a prepared
// whole-graph file with the contiguous cut, or through memory (any source, or with refine).
func preparePartitions(src, dir string, parts int, refine bool, out io.Writer) error {
	prepared := graph.IsPreparedFile(src) || graph.IsPreparedFile(filepath.Join(src, graph.PreparedFileName))
	if prepared && !refine {
		_, q, err := partition.WritePrepared(src, parts, dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %d partitions of %s to %s (streamed): %v\n", parts, src, dir, q)
		return nil
	}
	d, err := graph.Load(src, graph.LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		return err
	}
	_, q, err := partitionDataset(d, parts, refine, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d partitions of %s to %s: %v\n", parts, d.Name, dir, q)
	return nil
}

// partitionDataset cuts d into parts (refined by label propagation if asked) and writes them.
func partitionDataset(d *graph.Dataset, parts int, refine bool, dir string) (partition.Plan, partition.Quality, error) {
	plan, err := partition.Contiguous(d.Adj.RowPtr, parts)
	if err != nil {
		return plan, partition.Quality{}, err
	}
	if refine {
		if plan, err = partition.Refine(d.Adj, plan, partition.RefineOptions{}); err != nil {
			return plan, partition.Quality{}, err
		}
	}
	q, err := partition.WriteDataset(d, plan, dir)
	return plan, q, err
}
