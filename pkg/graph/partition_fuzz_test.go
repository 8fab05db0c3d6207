package graph

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/hostile"
)

// partitionBudget bounds what reading a partition file of n bytes may allocate: every section is
// read whole, so in proportion to the file's bytes, never to the counts its header declares.
var partitionBudget = hostile.Budget{Fixed: 256 << 10, PerByte: 24}

// FuzzReadPartition feeds arbitrary bytes to the partition-file reader, optionally with the
// checksums fixed up so that the structural checks behind them are reached: it must never panic,
// every refusal must say the file is damaged or of another format, what it accepts must be valid,
// and memory must follow the input's size.
func FuzzReadPartition(f *testing.F) {
	path := filepath.Join(f.TempDir(), PartitionFileName(0, 1))
	n := loadTiny(f).NumNodes()
	orig := make([]int32, n)
	for i := range orig {
		orig[i] = int32(i)
	}
	d := loadTiny(f)
	whole := &PartitionData{
		Part: 0, Parts: 1, Bounds: []int64{0, int64(n)}, Adj: d.Adj, Features: d.Features,
		Labels: d.Labels, Train: d.Train, Val: d.Val, Test: d.Test, NumClasses: d.NumClasses, Meta: d.Meta,
		OrigIDs: orig,
	}
	if err := WritePartitionFile(path, whole); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, false)
	f.Add(seed, true)
	f.Add(preparedBytes(f, d), true) // a whole-graph file is not a partition file
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = bytes.Clone(data)
			fixChecksums(data)
		}
		var got *PartitionData
		var err error
		partitionBudget.Check(t, len(data), "readPartition", func() {
			got, err = readPartition(bytes.NewReader(data), int64(len(data)), "part")
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotPrepared) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("readPartition: %v: not a corrupt, invalid or unsupported file", err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("readPartition accepted an invalid partition: %v", err)
		}
	})
}
