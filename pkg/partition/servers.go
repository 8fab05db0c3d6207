package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// ForServers returns the directory of partition files the parts graph servers of a run
// read, absolute, and its manifest: src itself when dorylus prepare --partitions wrote it
// (checked against parts and the files' headers, without reading the graph), else src cut by
// DefaultMethod into work/partitions (until ctx ends). A directory of another part count, a
// dataset without features or partition files without a manifest are refused naming it.
func ForServers(ctx context.Context, src, work string, parts int) (string, *Manifest, error) {
	dir := src
	if !HasManifest(src) && !HasFiles(src) {
		dir = filepath.Join(work, "partitions")
		if err := Cut(ctx, src, dir, parts, DefaultMethod, io.Discard); err != nil {
			return "", nil, err
		}
	}
	dir, err := filepath.Abs(dir) // the servers' run config names it
	if err != nil {
		return "", nil, err
	}
	m, err := ReadManifest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("%s holds partition files but no %s: written by an older dorylus prepare; run dorylus prepare --partitions again", dir, ManifestFileName)
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
