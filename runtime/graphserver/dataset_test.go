package graphserver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

// TestLoadPartition: a graph server's partition is the same whether it is read from its own
// file of a partitioned directory (checked against the manifest) or cut from the whole dataset
// in memory by the default plan; a partition file that does not match its manifest is refused.
func TestLoadPartition(t *testing.T) {
	ctx := context.Background()
	whole, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := partition.Default(whole.Adj, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := partition.DatasetPart(whole, plan, 1)
	if err != nil {
		t.Fatal(err)
	}
	parts := t.TempDir()
	if _, err := partition.WriteDataset(whole, plan, parts); err != nil {
		t.Fatal(err)
	}
	builtin := jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: "cora"}
	pvc := jobconfig.Dataset{Source: jobconfig.SourcePVC, Path: parts}
	for name, d := range map[string]jobconfig.Dataset{"whole": builtin, "partition files": pvc} {
		got, err := LoadPartition(ctx, d, source.Options{Dir: t.TempDir()}, 1, 2)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Part != 1 || got.Parts != 2 || !slices.Equal(got.Bounds, want.Bounds) || got.Rows() != want.Rows() ||
			!slices.Equal(got.Adj.ColIdx, want.Adj.ColIdx) || !slices.Equal(got.Labels, want.Labels) ||
			!slices.Equal(got.GhostIDs, want.GhostIDs) || !slices.Equal(got.Train, want.Train) {
			t.Errorf("%s: partition %d/%d of %d rows, %d ghosts, want 1/2 of %d rows, %d ghosts, the same as cut in memory",
				name, got.Part, got.Parts, got.Rows(), len(got.GhostIDs), want.Rows(), len(want.GhostIDs))
		}
	}
	other, err := partition.DatasetPart(whole, plan, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(parts, graph.PartitionFileName(1, 2))
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}
	if err := graph.WritePartitionFile(own, other); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPartition(ctx, pvc, source.Options{}, 1, 2); err == nil || !strings.Contains(err.Error(), graph.PartitionFileName(1, 2)) {
		t.Errorf("a partition file of another part: %v, want an error naming %s", err, graph.PartitionFileName(1, 2))
	}
}
