package partition

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// TestCutStreamsFromAPreparedCopy: a dataset that is not a prepared file (Cora's text layout)
// is cut through a prepared copy of it, which is gone after, into the same partition files,
// byte for byte, as the cut of the graph in memory.
func TestCutStreamsFromAPreparedCopy(t *testing.T) {
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Methods() {
		t.Run(string(m), func(t *testing.T) {
			inMemory, parent := t.TempDir(), t.TempDir()
			plan, err := New(d.Adj, 3, m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := WriteDataset(d, plan, inMemory); err != nil {
				t.Fatal(err)
			}
			streamed := filepath.Join(parent, "parts")
			if err := Cut(t.Context(), "cora", streamed, 3, m, io.Discard); err != nil {
				t.Fatal(err)
			}
			if left, _ := os.ReadDir(parent); len(left) != 1 {
				t.Errorf("beside the partitions: %v, want only them", left)
			}
			for p := range 3 {
				name := graph.PartitionFileName(p, 3)
				want, err := os.ReadFile(filepath.Join(inMemory, name))
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(streamed, name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: the streamed cut's file (%d bytes) differs from the in-memory cut's (%d bytes)", name, len(got), len(want))
				}
			}
		})
	}
}
