package graph

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/datasets"
)

func loadCora(t testing.TB) *Dataset {
	t.Helper()
	d, err := LoadText(datasets.Cora, "cora")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readBytes(b []byte) (*Dataset, error) {
	return readPrepared(bytes.NewReader(b), int64(len(b)), "test.dorylus")
}

// tableOf returns the section entries of a well-formed prepared file.
func tableOf(t *testing.T, b []byte) []sectionEntry {
	t.Helper()
	p := &prepReader{r: bytes.NewReader(b), name: "t"}
	_, entries, err := p.readHeader(int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestPreparedRoundTrip(t *testing.T) {
	for _, d := range []*Dataset{loadTiny(t), loadCora(t)} {
		b := preparedBytes(t, d)
		back, err := readBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffDatasets(d, back); diff != "" {
			t.Fatalf("%s: round trip differs in %s", d.Name, diff)
		}
		for _, e := range tableOf(t, b) {
			if e.offset%sectionAlign != 0 {
				t.Errorf("section %s at offset %d, not 64-byte aligned", e.kind, e.offset)
			}
		}
	}
}

func TestPreparedDenseAndValNil(t *testing.T) {
	d, err := RMAT(RMATParams{Nodes: 300, Edges: 2000, Features: 3, Classes: 4, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	back, err := readBytes(preparedBytes(t, d))
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDatasets(d, back); diff != "" {
		t.Fatalf("dense round trip differs in %s", diff)
	}
	tiny := loadTiny(t)
	tiny.Features.Sparse.Val = nil // all ones
	nz := int64(len(tiny.Features.Sparse.ColIdx))
	tiny.Meta.NumFeatureNonzeros = &nz
	back, err = readBytes(preparedBytes(t, tiny))
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDatasets(tiny, back); diff != "" || back.Features.Sparse.Val != nil {
		t.Fatalf("Val-nil round trip differs in %q", diff)
	}
}

func TestPreparedFileAndDir(t *testing.T) {
	d := loadTiny(t)
	dir := t.TempDir()
	path := filepath.Join(dir, PreparedFileName)
	if err := WritePreparedFile(path, d); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries after an atomic write, want 1", len(entries))
	}
	if !IsPreparedFile(path) {
		t.Fatal("IsPreparedFile = false")
	}
	for _, p := range []string{path, dir} {
		back, err := ReadPrepared(p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffDatasets(d, back); diff != "" {
			t.Fatalf("differs in %s", diff)
		}
	}
	// An invalid dataset is refused and leaves no file behind.
	bad := loadTiny(t)
	bad.Labels[0] = 9
	if err := WritePreparedFile(filepath.Join(dir, "bad"), bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("WritePreparedFile(invalid) = %v, want ErrInvalid", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a failed write left %d entries", len(entries))
	}
	if _, err := ReadPrepared(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestPreparedCorruptSection flips one byte inside each section and expects the reader to name
// that section and report ErrCorrupt.
func TestPreparedCorruptSection(t *testing.T) {
	good := preparedBytes(t, loadCora(t))
	for _, e := range tableOf(t, good) {
		for _, at := range []uint64{0, e.length / 2, e.length - 1} {
			b := bytes.Clone(good)
			b[e.offset+at] ^= 0x10
			_, err := readBytes(b)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "section "+e.kind.String()+":") ||
				!strings.Contains(err.Error(), "test.dorylus") || !strings.Contains(err.Error(), "checksum") {
				t.Errorf("byte %d of section %s flipped: %v", at, e.kind, err)
			}
		}
	}
}

func TestPreparedCorruptHeader(t *testing.T) {
	good := preparedBytes(t, loadCora(t))
	check := func(name string, b []byte, sentinel error, want string) {
		t.Helper()
		_, err := readBytes(b)
		if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "test.dorylus") {
			t.Errorf("%s: %v, want %v containing %q", name, err, sentinel, want)
		}
	}
	for i := 0; i < headerSize+sectionEntrySize*7; i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		_, err := readBytes(b)
		if err == nil {
			t.Errorf("byte %d of the header flipped: accepted", i)
		}
	}
	b := bytes.Clone(good)
	b[0] = 'X'
	check("magic", b, ErrNotPrepared, "bad magic")
	b = bytes.Clone(good)
	binary.LittleEndian.PutUint32(b[8:], 2)
	check("version", b, ErrUnsupportedVersion, "version 2")
	b = bytes.Clone(good)
	b[70] ^= 1 // in the section table
	check("table", b, ErrCorrupt, "header: checksum mismatch")

	// Fields behind the header checksum, with the checksums fixed up.
	mutate := func(name, want string, f func(b []byte)) {
		b := bytes.Clone(good)
		f(b)
		fixChecksums(b)
		check(name, b, ErrCorrupt, want)
	}
	le := binary.LittleEndian
	mutate("partition", "partition 1 of 2", func(b []byte) { le.PutUint32(b[24:], 1); le.PutUint32(b[28:], 2) })
	mutate("nodes", "is", func(b []byte) { le.PutUint64(b[32:], 2707) })
	mutate("section past end", "out of bounds", func(b []byte) { le.PutUint64(b[headerSize+16:], uint64(len(b))) })
	mutate("misaligned", "misaligned", func(b []byte) { le.PutUint64(b[headerSize+8:], le.Uint64(b[headerSize+8:])+4) })
	mutate("duplicate kind", "listed twice", func(b []byte) { le.PutUint32(b[headerSize+sectionEntrySize:], uint32(secMeta)) })
	mutate("missing section", "section labels missing", func(b []byte) { le.PutUint32(b[headerSize+3*sectionEntrySize:], 999) })
	mutate("flags", "unknown flags", func(b []byte) { le.PutUint32(b[56:], 1) })
	mutate("overlap", "overlap", func(b []byte) {
		le.PutUint64(b[headerSize+2*sectionEntrySize+8:], le.Uint64(b[headerSize+sectionEntrySize+8:]))
	})
	// Content that passes its checksum but breaks an invariant: an edge without its reverse.
	mutate("asymmetric", "no reverse", func(b []byte) {
		e := tableOf(t, good)[2] // adj_colidx
		le.PutUint32(b[e.offset:], le.Uint32(b[e.offset:])+1)
	})
	_, err := readBytes(func() []byte {
		b := bytes.Clone(good)
		e := tableOf(t, good)[2]
		le.PutUint32(b[e.offset:], le.Uint32(b[e.offset:])+1)
		fixChecksums(b)
		return b
	}())
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("invariant failure %v does not wrap ErrInvalid", err)
	}
}

func TestPreparedTruncated(t *testing.T) {
	good := preparedBytes(t, loadCora(t))
	for _, n := range []int{0, 3, 8, 40, headerSize - 1, headerSize, headerSize + 10, 1000, len(good) / 2, len(good) - 1} {
		_, err := readBytes(good[:n])
		if err == nil || !strings.Contains(err.Error(), "test.dorylus") {
			t.Errorf("truncated to %d bytes: %v", n, err)
		}
		if n >= len(preparedMagic) && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated")) {
			t.Errorf("truncated to %d bytes: %v, want ErrCorrupt naming the truncation", n, err)
		}
	}
	if _, err := readBytes(append(bytes.Clone(good), 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
	// On disk too.
	path := filepath.Join(t.TempDir(), "cut.dorylus")
	if err := os.WriteFile(path, good[:len(good)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPrepared(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("truncated file: %v", err)
	}
}

// TestPreparedUnknownSection checks that a section kind a later writer adds is skipped once its
// checksum is verified.
func TestPreparedUnknownSection(t *testing.T) {
	d := loadTiny(t)
	h, secs, err := preparedSections(d)
	if err != nil {
		t.Fatal(err)
	}
	secs = append(secs, outSection{kind: 500, data: []byte("a partition map of a later version")})
	var buf bytes.Buffer
	if err := writeSections(&buf, h, secs, d.Name); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	back, err := readBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDatasets(d, back); diff != "" {
		t.Fatalf("differs in %s", diff)
	}
	b[len(b)-1] ^= 1
	if _, err := readBytes(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "kind 500") {
		t.Fatalf("corrupt unknown section: %v", err)
	}
}
