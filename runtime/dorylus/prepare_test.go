package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// TestPrepareLayout writes Cora through `dorylus prepare --layout` in the text, OGB and NumPy
// layouts (a directory and a .npz) and reads each back as the same graph, labels, splits and
// features; an unknown layout and a layout with --partitions are refused.
func TestPrepareLayout(t *testing.T) {
	want, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ layout, name string }{{"text", "cora"}, {"ogb", "cora"}, {"numpy", "cora"}, {"numpy", "cora.npz"}} {
		dst := filepath.Join(t.TempDir(), c.name)
		if out, logs, err := run(t, "prepare", "--layout", c.layout, "cora", dst); err != nil || !strings.Contains(out, "("+c.layout+" layout)") {
			t.Fatalf("prepare --layout %s: %v, %q\n%s", c.layout, err, out, logs)
		}
		got, err := graph.Load(dst, graph.LoadOptions{})
		if err != nil {
			t.Fatalf("%s layout: %v", c.layout, err)
		}
		switch {
		case !slices.Equal(got.Adj.RowPtr, want.Adj.RowPtr) || !slices.Equal(got.Adj.ColIdx, want.Adj.ColIdx):
			t.Errorf("%s layout: another adjacency", c.name)
		case !slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.Train, want.Train) || !slices.Equal(got.Val, want.Val) || !slices.Equal(got.Test, want.Test):
			t.Errorf("%s layout: other labels or splits", c.name)
		case got.NumFeatures() != want.NumFeatures() || got.Features.Nonzeros() != want.Features.Nonzeros():
			t.Errorf("%s layout: %d features, %d nonzeros; want %d, %d", c.name, got.NumFeatures(), got.Features.Nonzeros(), want.NumFeatures(), want.Features.Nonzeros())
		}
	}
	for _, args := range [][]string{{"--layout", "csv"}, {"--layout", "ogb", "--partitions", "2"}} {
		if _, _, err := run(t, append(append([]string{"prepare"}, args...), "cora", t.TempDir())...); err == nil || !strings.Contains(err.Error(), "--layout") {
			t.Errorf("prepare %v: %v, want a refusal naming --layout", args, err)
		}
	}
}
