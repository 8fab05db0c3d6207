package partition

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// Cut writes src as parts partition files into dir, cut by method: streaming from
// a prepared whole-graph file, or through memory from any other source. It returns as soon as
// ctx ends (SIGTERM, SIGINT): the cut of a large graph takes minutes and has no point to stop
// at, so it goes on in the background until the process, whose command returns, exits.
func Cut(ctx context.Context, src, dir string, parts int, method Method, out io.Writer) error {
	done := make(chan error, 1)
	go func() { done <- cut(src, dir, parts, method, out) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("cutting %s into %d partitions: stopped: %w", src, parts, context.Cause(ctx))
	}
}

// cut is Cut without its context. A source that is not a prepared file
// is first written as one, in a folder beside dir that is removed after, and the graph it loaded
// released: the cut then streams from that file, so that its peak is the larger of the load's
// and the streamed cut's rather than their sum.
func cut(src, dir string, parts int, method Method, out io.Writer) error {
	whole := src
	if !graph.IsPreparedFile(src) && !graph.IsPreparedFile(filepath.Join(src, graph.PreparedFileName)) {
		tmp, err := wholeGraphDir(dir)
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		whole = filepath.Join(tmp, graph.PreparedFileName)
		if err := graph.Prepare(src, whole); err != nil {
			return err
		}
		debug.FreeOSMemory() // the loaded graph is garbage now
	}
	_, q, err := WritePreparedWith(whole, parts, dir, method)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d partitions (%s) of %s to %s (streamed): %v\n", parts, method, src, dir, q)
	return nil
}

// wholeGraphDir makes the folder, beside partition folder dir, that holds the prepared file of
// the whole graph while it is cut.
func wholeGraphDir(dir string) (string, error) {
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("cutting partitions into %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, ".whole-graph-*")
	if err != nil {
		return "", fmt.Errorf("cutting partitions into %s: %w", dir, err)
	}
	return tmp, nil
}

// HasFiles reports whether dir holds files named as partition files.
func HasFiles(dir string) bool {
	found, _ := filepath.Glob(filepath.Join(dir, graph.PartitionFileGlob))
	return len(found) > 0
}
