package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
)

// defaultPartitionMethod cuts the partitions of train --graph-servers.
const defaultPartitionMethod = partition.DefaultMethod

// preparePartitions writes src as parts partition files into dir, cut by method: streaming from
// a prepared whole-graph file, or through memory from any other source. It returns as soon as
// ctx ends (SIGTERM, SIGINT): the cut of a large graph takes minutes and has no point to stop
// at, so it goes on in the background until the process, whose command returns, exits.
func preparePartitions(ctx context.Context, src, dir string, parts int, method partition.Method, out io.Writer) error {
	done := make(chan error, 1)
	go func() { done <- cutPartitions(src, dir, parts, method, out) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("cutting %s into %d partitions: stopped: %w", src, parts, context.Cause(ctx))
	}
}

// cutPartitions is preparePartitions without its context.
func cutPartitions(src, dir string, parts int, method partition.Method, out io.Writer) error {
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

// trainPartitions returns the directory of partition files the graph servers of a run of
// `dorylus train --graph-servers parts` read, and its manifest: src itself when `dorylus
// prepare --partitions` wrote it (checked against parts and the files' headers, without
// reading the graph), else src cut by the default method into a directory under work (until
// ctx ends).
func trainPartitions(ctx context.Context, src, work string, parts int) (string, *partition.Manifest, error) {
	dir := src
	if !partition.HasManifest(src) && !hasPartitionFiles(src) {
		dir = filepath.Join(work, "partitions")
		if err := preparePartitions(ctx, src, dir, parts, defaultPartitionMethod, io.Discard); err != nil {
			return "", nil, err
		}
	}
	dir, err := filepath.Abs(dir) // the servers' run config names it
	if err != nil {
		return "", nil, err
	}
	m, err := partition.ReadManifest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("%s holds partition files but no %s: written by an older dorylus prepare; run dorylus prepare --partitions again", dir, partition.ManifestFileName)
	}
	if err != nil {
		return "", nil, err
	}
	if m.Features == 0 {
		return "", nil, fmt.Errorf("dataset %s in %s: %w", m.Dataset, dir, graph.ErrNoFeatures)
	}
	if err := m.Require(dir, parts); err != nil {
		return "", nil, fmt.Errorf("--graph-servers %d: %w", parts, err)
	}
	return dir, m, m.CheckHeaders(dir)
}

// hasPartitionFiles reports whether dir holds files named as partition files.
func hasPartitionFiles(dir string) bool {
	found, _ := filepath.Glob(filepath.Join(dir, graph.PartitionFileGlob))
	return len(found) > 0
}
