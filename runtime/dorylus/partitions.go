package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
)

// defaultPartitionMethod cuts the partitions of train --graph-servers.
const defaultPartitionMethod = partition.DefaultMethod

// preparePartitions writes src as parts partition files into dir, cut by method: streaming from
// a prepared whole-graph file, or through memory from any other source.
func preparePartitions(src, dir string, parts int, method partition.Method, out io.Writer) error {
	if graph.IsPreparedFile(src) || graph.IsPreparedFile(filepath.Join(src, graph.PreparedFileName)) {
		_, q, err := partition.WritePreparedWith(src, parts, dir, method)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %d partitions (%s) of %s to %s (streamed): %v\n", parts, method, src, dir, q)
		return nil
	}
	d, err := graph.Load(src, graph.LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		return err
	}
	_, q, err := partitionDataset(d, parts, method, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d partitions (%s) of %s to %s: %v\n", parts, method, d.Name, dir, q)
	return nil
}

// partitionDataset cuts d into parts by method and writes them.
func partitionDataset(d *graph.Dataset, parts int, method partition.Method, dir string) (partition.Plan, partition.Quality, error) {
	plan, err := partition.New(d.Adj, parts, method)
	if err != nil {
		return plan, partition.Quality{}, err
	}
	q, err := partition.WriteDataset(d, plan, dir)
	return plan, q, err
}
