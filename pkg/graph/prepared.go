package graph

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

const (
	// PreparedFileName is the name of the whole-graph file inside a prepared dataset directory.
	PreparedFileName = "dataset.dorylus"
	// PreparedVersion is the version of the prepared format this build writes and reads.
	PreparedVersion = 1
)

const (
	preparedMagic    = "DORYGRPH"
	headerSize       = 64
	sectionEntrySize = 32
	sectionAlign     = 64
	maxSections      = 1024
)

// sectionKind identifies what a section of a prepared file holds.
type sectionKind uint32

const (
	secMeta       sectionKind = 1  // meta.json as JSON
	secAdjRowPtr  sectionKind = 2  // adjacency row offsets, int64, N+1
	secAdjColIdx  sectionKind = 3  // adjacency column indices, int32, nnz
	secFeatRowPtr sectionKind = 4  // sparse feature row offsets, int64, N+1
	secFeatColIdx sectionKind = 5  // sparse feature columns, int32
	secFeatVal    sectionKind = 6  // sparse feature values, float32 (absent: all ones)
	secFeatDense  sectionKind = 7  // dense features, float32, N×F row-major
	secLabels     sectionKind = 8  // labels, int32, N
	secTrain      sectionKind = 9  // train node ids, int32
	secVal        sectionKind = 10 // val node ids, int32
	secTest       sectionKind = 11 // test node ids, int32
)

var sectionInfo = map[sectionKind]struct {
	name string
	elem int
}{
	secMeta: {"meta", 1}, secAdjRowPtr: {"adj_rowptr", 8}, secAdjColIdx: {"adj_colidx", 4},
	secFeatRowPtr: {"feat_rowptr", 8}, secFeatColIdx: {"feat_colidx", 4}, secFeatVal: {"feat_val", 4},
	secFeatDense: {"feat_dense", 4}, secLabels: {"labels", 4},
	secTrain: {"train", 4}, secVal: {"val", 4}, secTest: {"test", 4},
}

func (k sectionKind) String() string {
	if info, ok := sectionInfo[k]; ok {
		return info.name
	}
	return fmt.Sprintf("kind %d", uint32(k))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// hostLittleEndian reports whether typed slices can be viewed as little-endian bytes directly.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// prepHeader is the fixed part of the header.
type prepHeader struct {
	version     uint32
	sections    uint32
	fileSize    uint64
	part, parts uint32
	nodes       uint64
	edges       uint64
	features    uint32
	classes     uint32
	flags       uint32
}

// sectionEntry is one row of the section table.
type sectionEntry struct {
	kind   sectionKind
	elem   uint32
	offset uint64
	length uint64
	crc    uint32
}

// bytesOf views a slice of fixed-size numbers as its bytes in host order.
func bytesOf[T int32 | int64 | float32 | uint64](s []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// leBytes returns the little-endian bytes of s: a view on a little-endian host, a copy otherwise.
func leBytes[T int32 | int64 | float32](s []T) []byte {
	b := bytesOf(s)
	if hostLittleEndian || len(b) == 0 {
		return b
	}
	c := slices.Clone(b)
	var zero T
	swapBytes(c, int(unsafe.Sizeof(zero)))
	return c
}

// swapBytes reverses the byte order of each elem-byte element of b in place.
func swapBytes(b []byte, elem int) {
	for i := 0; i+elem <= len(b); i += elem {
		slices.Reverse(b[i : i+elem])
	}
}

func alignUp(x uint64) uint64 { return (x + sectionAlign - 1) &^ (sectionAlign - 1) }

type outSection struct {
	kind sectionKind
	data []byte // little-endian
}

// WritePrepared writes d in the prepared binary format (see the package documentation).
func WritePrepared(w io.Writer, d *Dataset) error {
	h, secs, err := preparedSections(d)
	if err != nil {
		return err
	}
	return writeSections(w, h, secs, d.Name)
}

// graphSections returns the sections every prepared file has: meta, adjacency, labels, splits
// and, when present, features.
func graphSections(meta []byte, adj *tensor.CSR, f Features, labels, train, val, test []int32) []outSection {
	secs := []outSection{
		{secMeta, meta},
		{secAdjRowPtr, leBytes(adj.RowPtr)},
		{secAdjColIdx, leBytes(adj.ColIdx)},
		{secLabels, leBytes(labels)},
		{secTrain, leBytes(train)},
		{secVal, leBytes(val)},
		{secTest, leBytes(test)},
	}
	switch {
	case f.Sparse != nil:
		secs = append(secs, outSection{secFeatRowPtr, leBytes(f.Sparse.RowPtr)}, outSection{secFeatColIdx, leBytes(f.Sparse.ColIdx)})
		if f.Sparse.Val != nil {
			secs = append(secs, outSection{secFeatVal, leBytes(f.Sparse.Val)})
		}
	case f.Dense != nil:
		secs = append(secs, outSection{secFeatDense, leBytes(f.Dense.Data)})
	}
	return secs
}

// preparedSections returns the header fields and the sections that represent d.
func preparedSections(d *Dataset) (prepHeader, []outSection, error) {
	if err := d.Validate(); err != nil {
		return prepHeader{}, nil, fmt.Errorf("graph: write prepared: %w", err)
	}
	meta, err := json.Marshal(d.Meta)
	if err != nil {
		return prepHeader{}, nil, fmt.Errorf("graph: write prepared %s: meta: %w", d.Name, err)
	}
	secs := graphSections(meta, d.Adj, d.Features, d.Labels, d.Train, d.Val, d.Test)
	h := prepHeader{
		version: PreparedVersion, part: 0, parts: 1,
		nodes: uint64(d.NumNodes()), edges: uint64(len(d.Adj.ColIdx)),
		features: uint32(d.NumFeatures()), classes: uint32(d.NumClasses),
	}
	return h, secs, nil
}

// writeSections lays the sections out after the header, 64-byte aligned, and writes the file.
func writeSections(w io.Writer, h prepHeader, secs []outSection, name string) error {
	h.sections = uint32(len(secs))
	entries := make([]sectionEntry, len(secs))
	tableEnd := headerSize + uint64(len(secs))*sectionEntrySize
	off := alignUp(tableEnd)
	for i, s := range secs {
		elem := uint32(1)
		if info, ok := sectionInfo[s.kind]; ok {
			elem = uint32(info.elem)
		}
		entries[i] = sectionEntry{kind: s.kind, elem: elem, offset: off,
			length: uint64(len(s.data)), crc: crc32.Checksum(s.data, castagnoli)}
		h.fileSize = off + uint64(len(s.data))
		off = alignUp(h.fileSize)
	}
	if _, err := w.Write(encodeHeader(h, entries)); err != nil {
		return fmt.Errorf("graph: write prepared %s: %w", name, err)
	}
	var pad [sectionAlign]byte
	pos := tableEnd
	for i, s := range secs {
		if _, err := w.Write(pad[:entries[i].offset-pos]); err != nil {
			return fmt.Errorf("graph: write prepared %s: %w", name, err)
		}
		if _, err := w.Write(s.data); err != nil {
			return fmt.Errorf("graph: write prepared %s: section %s: %w", name, s.kind, err)
		}
		pos = entries[i].offset + entries[i].length
	}
	return nil
}

// encodeHeader returns the header and section table with the header checksum filled in.
func encodeHeader(h prepHeader, entries []sectionEntry) []byte {
	b := make([]byte, headerSize+len(entries)*sectionEntrySize)
	le := binary.LittleEndian
	copy(b, preparedMagic)
	le.PutUint32(b[8:], h.version)
	le.PutUint32(b[12:], h.sections)
	le.PutUint64(b[16:], h.fileSize)
	le.PutUint32(b[24:], h.part)
	le.PutUint32(b[28:], h.parts)
	le.PutUint64(b[32:], h.nodes)
	le.PutUint64(b[40:], h.edges)
	le.PutUint32(b[48:], h.features)
	le.PutUint32(b[52:], h.classes)
	le.PutUint32(b[56:], h.flags)
	for i, e := range entries {
		t := b[headerSize+i*sectionEntrySize:]
		le.PutUint32(t[0:], uint32(e.kind))
		le.PutUint32(t[4:], e.elem)
		le.PutUint64(t[8:], e.offset)
		le.PutUint64(t[16:], e.length)
		le.PutUint32(t[24:], e.crc)
	}
	le.PutUint32(b[60:], headerChecksum(b))
	return b
}

// headerChecksum is the CRC-32C of the header (without its checksum field) and the section table.
func headerChecksum(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:60])
	return crc32.Update(c, castagnoli, b[headerSize:])
}

// WritePreparedFile writes d to path in the prepared format, atomically: through a temporary
// file in the same directory that is synced and then renamed over path.
func WritePreparedFile(path string, d *Dataset) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("graph: write prepared %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := WritePrepared(f, d); err != nil {
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("graph: write prepared %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("graph: write prepared %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("graph: write prepared %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("graph: write prepared %s: %w", path, err)
	}
	return nil
}

// IsPreparedFile reports whether the file at path starts with the prepared-format magic.
func IsPreparedFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [len(preparedMagic)]byte
	_, err = io.ReadFull(f, m[:])
	return err == nil && string(m[:]) == preparedMagic
}

// ReadPrepared reads a prepared dataset from path, a file or a directory holding
// PreparedFileName. It verifies every checksum and runs Validate; a truncated, corrupted or
// inconsistent file is refused with an error naming the file and the section.
func ReadPrepared(path string) (*Dataset, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, PreparedFileName)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("graph: read prepared: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("graph: read prepared: %w", err)
	}
	return readPrepared(f, st.Size(), path)
}

// prepReader reads one prepared file.
type prepReader struct {
	r    io.ReaderAt
	name string
}

func (p *prepReader) corrupt(format string, args ...any) error {
	return fmt.Errorf("graph: read prepared %s: %s: %w", p.name, fmt.Sprintf(format, args...), ErrCorrupt)
}

func readPrepared(r io.ReaderAt, size int64, name string) (*Dataset, error) {
	p := &prepReader{r: r, name: name}
	h, entries, err := p.readHeader(size)
	if err != nil {
		return nil, err
	}
	s := newSectionReads(p, entries, nil)
	d := &Dataset{NumClasses: int(h.classes)}
	adj := &tensor.CSR{Rows: int(h.nodes), Cols: int(h.nodes)}
	d.Adj = adj
	var metaRaw []byte
	s.graph(h, &metaRaw, adj, &d.Labels, &d.Train, &d.Val, &d.Test, &d.Features)
	if err := s.run(); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(metaRaw, &d.Meta); err != nil {
		return nil, p.corrupt("section meta: bad JSON: %v", err)
	}
	d.Name = d.Meta.Name
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("graph: read prepared %s: %w: %w", name, ErrCorrupt, err)
	}
	return d, nil
}

// readHeader reads and checks the header and section table of a whole-graph file.
func (p *prepReader) readHeader(size int64) (prepHeader, []sectionEntry, error) {
	return p.readHeaderOf(size, false)
}

// readHeaderOf reads and checks the header and section table of a whole-graph file (partition
// 0 of 1), or with partition of a partition file.
func (p *prepReader) readHeaderOf(size int64, partition bool) (prepHeader, []sectionEntry, error) {
	var h prepHeader
	var fixed [headerSize]byte
	k, _ := p.r.ReadAt(fixed[:], 0)
	if k < len(preparedMagic) || string(fixed[:len(preparedMagic)]) != preparedMagic {
		if k < len(preparedMagic) && k > 0 && string(fixed[:k]) == preparedMagic[:k] {
			return h, nil, p.corrupt("truncated to %d bytes", size)
		}
		return h, nil, fmt.Errorf("graph: read prepared %s: %w (bad magic)", p.name, ErrNotPrepared)
	}
	if k < headerSize {
		return h, nil, p.corrupt("truncated to %d bytes, inside the header", size)
	}
	le := binary.LittleEndian
	h = prepHeader{
		version: le.Uint32(fixed[8:]), sections: le.Uint32(fixed[12:]), fileSize: le.Uint64(fixed[16:]),
		part: le.Uint32(fixed[24:]), parts: le.Uint32(fixed[28:]), nodes: le.Uint64(fixed[32:]),
		edges: le.Uint64(fixed[40:]), features: le.Uint32(fixed[48:]), classes: le.Uint32(fixed[52:]),
		flags: le.Uint32(fixed[56:]),
	}
	if h.version != PreparedVersion {
		return h, nil, fmt.Errorf("graph: read prepared %s: %w %d (this build reads version %d)", p.name, ErrUnsupportedVersion, h.version, PreparedVersion)
	}
	if uint64(size) < h.fileSize {
		return h, nil, p.corrupt("truncated: %d bytes, the header says %d", size, h.fileSize)
	}
	if uint64(size) > h.fileSize {
		return h, nil, p.corrupt("%d bytes, the header says %d (trailing data)", size, h.fileSize)
	}
	if h.sections > maxSections || headerSize+uint64(h.sections)*sectionEntrySize > h.fileSize {
		return h, nil, p.corrupt("header: section table of %d entries does not fit", h.sections)
	}
	b := make([]byte, headerSize+int(h.sections)*sectionEntrySize)
	copy(b, fixed[:])
	if _, err := p.r.ReadAt(b[headerSize:], headerSize); err != nil {
		return h, nil, p.corrupt("header: section table: %v", err)
	}
	if got, want := headerChecksum(b), le.Uint32(fixed[60:]); got != want {
		return h, nil, p.corrupt("header: checksum mismatch (CRC-32C %08x, stored %08x)", got, want)
	}
	switch {
	case partition && (h.parts < 1 || h.part >= h.parts || h.parts > math.MaxInt32):
		return h, nil, p.corrupt("header: partition %d of %d", h.part, h.parts)
	case !partition && (h.parts != 1 || h.part != 0):
		return h, nil, p.corrupt("header: file holds partition %d of %d; this reader reads whole-graph files (0 of 1)", h.part, h.parts)
	case h.nodes > math.MaxInt32 || h.edges > h.fileSize/4 || uint64(h.features) > math.MaxInt32 || h.classes > maxClasses:
		return h, nil, p.corrupt("header: impossible sizes (nodes %d, edges %d, features %d, classes %d)", h.nodes, h.edges, h.features, h.classes)
	case h.flags != 0:
		return h, nil, p.corrupt("header: unknown flags %#x", h.flags)
	}
	entries := make([]sectionEntry, h.sections)
	tableEnd := headerSize + uint64(h.sections)*sectionEntrySize
	seen := make(map[sectionKind]bool, len(entries))
	for i := range entries {
		t := b[headerSize+i*sectionEntrySize:]
		e := sectionEntry{kind: sectionKind(le.Uint32(t[0:])), elem: le.Uint32(t[4:]), offset: le.Uint64(t[8:]),
			length: le.Uint64(t[16:]), crc: le.Uint32(t[24:])}
		switch info, known := sectionInfo[e.kind]; {
		case seen[e.kind]:
			return h, nil, p.corrupt("section %s: listed twice", e.kind)
		case e.offset%sectionAlign != 0 || e.offset < tableEnd || e.offset > h.fileSize || e.length > h.fileSize-e.offset:
			return h, nil, p.corrupt("section %s: bytes %d+%d out of bounds or misaligned (file %d bytes)", e.kind, e.offset, e.length, h.fileSize)
		case known && (e.elem != uint32(info.elem) || e.length%uint64(info.elem) != 0):
			return h, nil, p.corrupt("section %s: element size %d and length %d, want elements of %d bytes", e.kind, e.elem, e.length, info.elem)
		case le.Uint32(t[28:]) != 0:
			return h, nil, p.corrupt("section %s: reserved field set", e.kind)
		}
		seen[e.kind] = true
		entries[i] = e
	}
	byOffset := slices.Clone(entries)
	slices.SortFunc(byOffset, func(a, b sectionEntry) int { return cmp.Compare(a.offset, b.offset) })
	for i := 1; i < len(byOffset); i++ {
		if prev := byOffset[i-1]; prev.offset+prev.length > byOffset[i].offset {
			return h, nil, p.corrupt("sections %s and %s overlap", prev.kind, byOffset[i].kind)
		}
	}
	return h, entries, nil
}

// readSection reads section e into a new slice of T and verifies its checksum.
func readSection[T byte | int32 | int64 | float32](p *prepReader, e sectionEntry) ([]T, error) {
	var zero T
	elem := uint64(unsafe.Sizeof(zero))
	s := make([]T, e.length/elem)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(elem))
	if _, err := p.r.ReadAt(b, int64(e.offset)); err != nil && !(errors.Is(err, io.EOF) && len(b) == 0) {
		return nil, p.corrupt("section %s: %v", e.kind, err)
	}
	if got := crc32.Checksum(b, castagnoli); got != e.crc {
		return nil, p.corrupt("section %s: checksum mismatch (CRC-32C %08x, stored %08x)", e.kind, got, e.crc)
	}
	if !hostLittleEndian && elem > 1 {
		swapBytes(b, int(elem))
	}
	return s, nil
}

// readTo reads section e into *dst.
func readTo[T int32 | int64 | float32](p *prepReader, e sectionEntry, dst *[]T) error {
	s, err := readSection[T](p, e)
	*dst = s
	return err
}

// verifyUnknown checks the checksum of a section this reader does not interpret.
func (p *prepReader) verifyUnknown(e sectionEntry) error {
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(p.r, int64(e.offset), int64(e.length))); err != nil {
		return p.corrupt("section %s: %v", e.kind, err)
	}
	if got := h.Sum32(); got != e.crc {
		return p.corrupt("section %s: checksum mismatch (CRC-32C %08x, stored %08x)", e.kind, got, e.crc)
	}
	return nil
}
