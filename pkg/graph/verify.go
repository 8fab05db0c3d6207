package graph

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// PreparedInfo is what VerifyPrepared learns from a prepared file's header.
type PreparedInfo struct {
	Part, Parts int   // the partition the file holds (a whole-graph file: 0 of 1)
	Size        int64 // the file's size in bytes
}

// VerifyPrepared reads a prepared file (whole-graph or partition) from r in one pass, without
// decoding it: it checks the header, its checksum and the section table as ReadPrepared does,
// and the CRC-32C of every section, and that the stream ends where the header says. A
// downloader can tee a file through it so that it is known good before it is published. name
// labels the errors, which wrap ErrNotPrepared or ErrCorrupt.
func VerifyPrepared(r io.Reader, name string) (PreparedInfo, error) {
	var fixed [headerSize]byte
	if k, err := io.ReadFull(r, fixed[:]); err != nil {
		if k >= len(preparedMagic) && string(fixed[:len(preparedMagic)]) == preparedMagic {
			return PreparedInfo{}, fmt.Errorf("graph: verify %s: truncated to %d bytes, inside the header: %w", name, k, ErrCorrupt)
		}
		return PreparedInfo{}, fmt.Errorf("graph: verify %s: %w (bad magic; %d bytes)", name, ErrNotPrepared, k)
	}
	if string(fixed[:len(preparedMagic)]) != preparedMagic {
		return PreparedInfo{}, fmt.Errorf("graph: verify %s: %w (bad magic)", name, ErrNotPrepared)
	}
	le := binary.LittleEndian
	sections, size := le.Uint32(fixed[12:]), le.Uint64(fixed[16:])
	if sections > maxSections || headerSize+uint64(sections)*sectionEntrySize > size {
		return PreparedInfo{}, fmt.Errorf("graph: verify %s: header: section table of %d entries does not fit: %w", name, sections, ErrCorrupt)
	}
	head := make([]byte, headerSize+int(sections)*sectionEntrySize)
	copy(head, fixed[:])
	if _, err := io.ReadFull(r, head[headerSize:]); err != nil {
		return PreparedInfo{}, fmt.Errorf("graph: verify %s: section table: %v: %w", name, err, ErrCorrupt)
	}
	// The header checks of the readers, on the bytes read so far: a whole graph is partition 0
	// of 1.
	p := &prepReader{r: bytes.NewReader(head), name: name}
	hd, entries, err := p.readHeaderOf(int64(size), true)
	if err != nil {
		return PreparedInfo{}, err
	}
	part, parts := int(hd.part), int(hd.parts)
	slices.SortFunc(entries, func(a, b sectionEntry) int { return cmp.Compare(a.offset, b.offset) })
	pos := uint64(len(head))
	h := crc32.New(castagnoli)
	for _, e := range entries {
		if _, err := io.CopyN(io.Discard, r, int64(e.offset-pos)); err != nil {
			return PreparedInfo{}, p.corrupt("truncated before section %s: %v", e.kind, err)
		}
		h.Reset()
		if _, err := io.CopyN(h, r, int64(e.length)); err != nil {
			return PreparedInfo{}, p.corrupt("section %s truncated: %v", e.kind, err)
		}
		if got := h.Sum32(); got != e.crc {
			return PreparedInfo{}, p.corrupt("section %s: checksum mismatch (CRC-32C %08x, stored %08x)", e.kind, got, e.crc)
		}
		pos = e.offset + e.length
	}
	if _, err := io.CopyN(io.Discard, r, int64(size-pos)); err != nil {
		return PreparedInfo{}, p.corrupt("truncated after the last section: %v", err)
	}
	if k, _ := io.CopyN(io.Discard, r, 1); k != 0 {
		return PreparedInfo{}, p.corrupt("trailing data after the %d bytes the header says", size)
	}
	return PreparedInfo{Part: part, Parts: parts, Size: int64(size)}, nil
}
