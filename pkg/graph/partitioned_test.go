package graph

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wholePartition returns the tiny dataset as partition 0 of 1, its vertices named by the
// original ids orig.
func wholePartition(t *testing.T, orig []int32) *PartitionData {
	t.Helper()
	d := loadTiny(t)
	return &PartitionData{
		Part: 0, Parts: 1, Bounds: []int64{0, int64(d.NumNodes())}, Adj: d.Adj, Features: d.Features,
		Labels: d.Labels, Train: d.Train, Val: d.Val, Test: d.Test, NumClasses: d.NumClasses, Meta: d.Meta,
		OrigIDs: orig,
	}
}

// TestPartitionOriginalIDs: the original ids round-trip through a partition file; repeated ids
// are refused on writing; a file without them (written before they existed) is refused as
// another format version, naming the file.
func TestPartitionOriginalIDs(t *testing.T) {
	n := loadTiny(t).NumNodes()
	orig := make([]int32, n)
	for i := range orig {
		orig[i] = int32(n - 1 - i)
	}
	path := filepath.Join(t.TempDir(), PartitionFileName(0, 1))
	if err := WritePartitionFile(path, wholePartition(t, orig)); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPartitionFile(path, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.OrigIDs, orig) {
		t.Errorf("original ids %v, want %v", got.OrigIDs, orig)
	}
	repeated := slices.Clone(orig)
	repeated[1] = repeated[0]
	if err := WritePartitionFile(path+".bad", wholePartition(t, repeated)); !errors.Is(err, ErrInvalid) {
		t.Errorf("repeated original id: %v, want ErrInvalid", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	for i := range le.Uint32(raw[12:]) { // the table entry of the ids: an unknown kind
		if e := raw[headerSize+i*sectionEntrySize:]; sectionKind(le.Uint32(e)) == secOrigIDs {
			le.PutUint32(e, 99)
		}
	}
	fixChecksums(raw)
	old := filepath.Join(t.TempDir(), PartitionFileName(0, 1))
	if err := os.WriteFile(old, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadPartitionFile(old, 0, 1)
	t.Logf("without ids: %v", err)
	if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), old) {
		t.Errorf("a file without original ids: %v, want ErrUnsupportedVersion naming it", err)
	}
}
