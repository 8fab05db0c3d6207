package graph

import (
	"bytes"
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

// TestPartitionUnknownSection: a partition file's section of a kind a later writer adds is
// skipped once its checksum is verified, as in a whole-graph file.
func TestPartitionUnknownSection(t *testing.T) {
	orig := make([]int32, loadTiny(t).NumNodes())
	for i := range orig {
		orig[i] = int32(i)
	}
	h, secs, err := partitionSections(wholePartition(t, orig))
	if err != nil {
		t.Fatal(err)
	}
	secs = append(secs, outSection{kind: 500, data: []byte("a section of a later version")})
	var buf bytes.Buffer
	if err := writeSections(&buf, h, secs, "p"); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	back, err := readPartition(bytes.NewReader(b), int64(len(b)), "p")
	if err != nil || !slices.Equal(back.OrigIDs, orig) {
		t.Fatalf("read back: %v", err)
	}
	b[len(b)-1] ^= 1
	if _, err := readPartition(bytes.NewReader(b), int64(len(b)), "p"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "kind 500") {
		t.Fatalf("corrupt unknown section: %v", err)
	}
}

// TestPartitionFileNames: a partition file's name reads back as its partition and count, and
// the glob matches it; names of other files do not parse.
func TestPartitionFileNames(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {3, 4}, {255, 256}} {
		name := PartitionFileName(c[0], c[1])
		if p, parts, ok := ParsePartitionFileName(name); !ok || p != c[0] || parts != c[1] {
			t.Errorf("%s reads as %d of %d, %v", name, p, parts, ok)
		}
		if ok, err := filepath.Match(PartitionFileGlob, name); !ok || err != nil {
			t.Errorf("%s does not match %s: %v", name, PartitionFileGlob, err)
		}
	}
	for _, name := range []string{PreparedFileName, "part-00004-of-00004.dorylus", "part-0-of-2.dorylus", "part-00000-of-00002.dorylus.tmp"} {
		if p, parts, ok := ParsePartitionFileName(name); ok {
			t.Errorf("%s reads as partition %d of %d", name, p, parts)
		}
	}
}
