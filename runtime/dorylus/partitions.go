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

// trainPartitions returns the directory of partition files the graph servers of a run of
// `dorylus train --graph-servers parts` read, and its manifest: src itself when `dorylus
// prepare --partitions` wrote it (checked against parts and the files' headers, without
// reading the graph), else src cut by the default method into a directory under work (until
// ctx ends).
func trainPartitions(ctx context.Context, src, work string, parts int) (string, *partition.Manifest, error) {
	dir := src
	if !partition.HasManifest(src) && !partition.HasFiles(src) {
		dir = filepath.Join(work, "partitions")
		if err := partition.Cut(ctx, src, dir, parts, defaultPartitionMethod, io.Discard); err != nil {
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
