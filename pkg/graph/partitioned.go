package graph

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Sections of a partition file, beyond those of version 1 (a whole-graph reader skips them).
const (
	secPartBounds  sectionKind = 64 // int64 × (P+1): partition q owns global ids [b[q], b[q+1])
	secGhostIDs    sectionKind = 65 // int32 × G: sorted global ids of the ghost vertices
	secGhostDegree sectionKind = 66 // int32 × G: each ghost's adjacency entries in the whole graph
	secOrigIDs     sectionKind = 67 // int32 × rows: each owned row's id before renumbering
	secGhostOrig   sectionKind = 68 // int32 × G: each ghost's id before renumbering
)

// PartitionFileName returns the name of the file of partition p of parts inside a partitioned
// dataset directory.
func PartitionFileName(p, parts int) string {
	return fmt.Sprintf("part-%05d-of-%05d.dorylus", p, parts)
}

// PartitionData is the content of one partition file: the vertices partition Part of Parts owns,
// a contiguous range of global ids, with their adjacency rows, features, labels and split
// members, and what a graph server needs to know of the rest of the graph (the partition bounds
// and the whole-graph degree of every ghost vertex, for the GCN normalisation).
//
// In the file (the prepared format with the header's p and P set) the header's node count is
// the number of owned rows, sections adj_rowptr and adj_colidx hold their rows with global
// column ids, labels holds their labels, train/val/test hold local row indices, meta holds the
// whole graph's Meta, and sections 64-68 hold Bounds, GhostIDs, GhostDegree, OrigIDs and
// GhostOrigIDs. A partitioning may renumber the vertices; dropout masks are keyed by the
// original ids, so that every cut draws the masks of a single-process run. Sections 67 and 68
// came last: a file without them predates the original ids and is refused with
// ErrUnsupportedVersion.
type PartitionData struct {
	Part, Parts      int
	Bounds           []int64     // len Parts+1; partition q owns global ids [Bounds[q], Bounds[q+1])
	Adj              *tensor.CSR // owned rows × all N global columns; no self loops, Val nil
	GhostIDs         []int32     // sorted global ids of the non-owned vertices Adj refers to
	GhostDegree      []int32     // whole-graph adjacency entries of each ghost vertex
	OrigIDs          []int32     // each owned row's vertex id in the dataset as loaded
	GhostOrigIDs     []int32     // each ghost's vertex id in the dataset as loaded
	Features         Features    // owned rows; zero value for a graph-only dataset
	Labels           []int32     // owned rows; -1 unlabelled
	Train, Val, Test []int32     // sorted local row indices
	NumClasses       int
	Meta             Meta // the whole graph's meta
}

// Lo returns the global id of the first owned vertex.
func (d *PartitionData) Lo() int { return int(d.Bounds[d.Part]) }

// Rows returns the number of owned vertices.
func (d *PartitionData) Rows() int { return d.Adj.Rows }

// Validate checks the invariants of a PartitionData and returns an error wrapping ErrInvalid for
// the first one broken.
func (d *PartitionData) Validate() error {
	name := fmt.Sprintf("partition %d of %d", d.Part, d.Parts)
	if d.Parts < 1 || d.Part < 0 || d.Part >= d.Parts || len(d.Bounds) != d.Parts+1 {
		return invalidf("%s: %d bounds", name, len(d.Bounds))
	}
	n := int64(d.Meta.NumNodes)
	if d.Bounds[0] != 0 || d.Bounds[d.Parts] != n {
		return invalidf("%s: bounds %d..%d do not cover the %d nodes", name, d.Bounds[0], d.Bounds[d.Parts], n)
	}
	for q := range d.Parts {
		if d.Bounds[q+1] < d.Bounds[q] {
			return invalidf("%s: bounds decrease at partition %d", name, q)
		}
	}
	lo, hi := d.Bounds[d.Part], d.Bounds[d.Part+1]
	if d.Adj == nil || d.Adj.Val != nil || int64(d.Adj.Rows) != hi-lo || int64(d.Adj.Cols) != n {
		return invalidf("%s: adjacency must be %d×%d without values", name, hi-lo, n)
	}
	if err := validateCSR(d.Adj); err != nil {
		return invalidf("%s: adjacency: %v", name, err)
	}
	if len(d.GhostDegree) != len(d.GhostIDs) {
		return invalidf("%s: %d ghost degrees for %d ghosts", name, len(d.GhostDegree), len(d.GhostIDs))
	}
	prev := int32(-1)
	ghost := make([]uint64, (n+63)/64) // bit g: g is a ghost
	for i, g := range d.GhostIDs {
		if g <= prev || int64(g) >= n || (int64(g) >= lo && int64(g) < hi) || d.GhostDegree[i] < 1 {
			return invalidf("%s: ghost %d (id %d, degree %d) out of order, owned, or isolated", name, i, g, d.GhostDegree[i])
		}
		prev = g
		ghost[g/64] |= 1 << (g % 64)
	}
	if err := d.validateOrigIDs(name); err != nil {
		return err
	}
	for r := range d.Adj.Rows {
		for _, c := range d.Adj.ColIdx[d.Adj.RowPtr[r]:d.Adj.RowPtr[r+1]] {
			switch {
			case int64(c) == lo+int64(r):
				return invalidf("%s: self loop at node %d", name, c)
			case int64(c) >= lo && int64(c) < hi:
			default:
				if ghost[c/64]&(1<<(c%64)) == 0 {
					return invalidf("%s: node %d has neighbour %d, which is not a ghost", name, lo+int64(r), c)
				}
			}
		}
	}
	if _, err := validateFeatures(d.Features, d.Adj.Rows); err != nil {
		return fmt.Errorf("%w (%s)", err, name)
	}
	if d.NumClasses < 0 || d.NumClasses > maxClasses || d.NumClasses != d.Meta.NumClasses {
		return invalidf("%s: %d classes, meta says %d", name, d.NumClasses, d.Meta.NumClasses)
	}
	if len(d.Labels) != d.Adj.Rows {
		return invalidf("%s: %d labels for %d rows", name, len(d.Labels), d.Adj.Rows)
	}
	for i, l := range d.Labels {
		if l < -1 || int(l) >= d.NumClasses {
			return invalidf("%s: row %d has label %d outside [-1, %d)", name, i, l, d.NumClasses)
		}
	}
	for s, ids := range [][]int32{d.Train, d.Val, d.Test} {
		prev := int32(-1)
		for _, id := range ids {
			if id <= prev || int(id) >= d.Adj.Rows || d.Labels[id] < 0 {
				return invalidf("%s: %s split: row %d out of order, out of range or unlabelled", name, splitNames[s], id)
			}
			prev = id
		}
	}
	return nil
}

// validateOrigIDs checks that OrigIDs and GhostOrigIDs name every owned row and ghost by a
// distinct id of the graph.
func (d *PartitionData) validateOrigIDs(name string) error {
	n := d.Meta.NumNodes
	if len(d.OrigIDs) != d.Adj.Rows || len(d.GhostOrigIDs) != len(d.GhostIDs) {
		return invalidf("%s: %d and %d original ids for %d rows and %d ghosts", name, len(d.OrigIDs), len(d.GhostOrigIDs), d.Adj.Rows, len(d.GhostIDs))
	}
	seen := make([]uint64, (n+63)/64)
	for _, ids := range [2][]int32{d.OrigIDs, d.GhostOrigIDs} {
		for _, id := range ids {
			if id < 0 || int(id) >= n || seen[id/64]&(1<<(id%64)) != 0 {
				return invalidf("%s: original id %d out of range or repeated", name, id)
			}
			seen[id/64] |= 1 << (id % 64)
		}
	}
	return nil
}

// LocalOrigIDs returns the original id of every owned row, then of every ghost.
func (d *PartitionData) LocalOrigIDs() []int32 {
	return append(slices.Clip(d.OrigIDs), d.GhostOrigIDs...)
}

// WritePartitionFile writes d to path in the prepared format, atomically (see WritePreparedFile).
func WritePartitionFile(path string, d *PartitionData) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("graph: write partition %s: %w", path, err)
	}
	meta, err := json.Marshal(d.Meta)
	if err != nil {
		return fmt.Errorf("graph: write partition %s: meta: %w", path, err)
	}
	secs := append(graphSections(meta, d.Adj, d.Features, d.Labels, d.Train, d.Val, d.Test),
		outSection{secPartBounds, leBytes(d.Bounds)},
		outSection{secGhostIDs, leBytes(d.GhostIDs)},
		outSection{secGhostDegree, leBytes(d.GhostDegree)},
		outSection{secOrigIDs, leBytes(d.OrigIDs)},
		outSection{secGhostOrig, leBytes(d.GhostOrigIDs)})
	h := prepHeader{
		version: PreparedVersion, part: uint32(d.Part), parts: uint32(d.Parts),
		nodes: uint64(d.Adj.Rows), edges: uint64(len(d.Adj.ColIdx)),
		features: uint32(d.Features.Cols()), classes: uint32(d.NumClasses),
	}
	return writeAtomically(path, func(w io.Writer) error { return writeSections(w, h, secs, path) })
}

// writeAtomically writes a file through a synced temporary file renamed over path.
func writeAtomically(path string, fill func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("graph: write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := fill(f); err != nil {
		return err
	}
	for _, step := range []func() error{func() error { return f.Chmod(0o644) }, f.Sync, f.Close} {
		if err := step(); err != nil {
			return fmt.Errorf("graph: write %s: %w", path, err)
		}
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("graph: write %s: %w", path, err)
	}
	return nil
}

// ReadPartitionFile reads partition p of parts from dir (a directory written by a partitioning
// prepare) or from a partition file's path, verifying every checksum and running Validate. It
// reads nothing of the other partitions.
func ReadPartitionFile(path string, p, parts int) (*PartitionData, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, PartitionFileName(p, parts))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("graph: read partition: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("graph: read partition: %w", err)
	}
	d, err := readPartition(f, st.Size(), path)
	if err != nil {
		return nil, err
	}
	if d.Part != p || d.Parts != parts {
		return nil, fmt.Errorf("graph: read partition %s: holds partition %d of %d, want %d of %d: %w", path, d.Part, d.Parts, p, parts, ErrInvalid)
	}
	return d, nil
}

// readPartition reads one partition file of size bytes.
func readPartition(r io.ReaderAt, size int64, name string) (*PartitionData, error) {
	view, part, parts, err := wholeGraphView(r, size, name)
	if err != nil {
		return nil, err
	}
	p := &prepReader{r: view, name: name}
	h, entries, err := p.readHeader(size)
	if err != nil {
		return nil, err
	}
	byKind := make(map[sectionKind]sectionEntry, len(entries))
	for _, e := range entries {
		byKind[e.kind] = e
	}
	for _, k := range []sectionKind{secOrigIDs, secGhostOrig} {
		if _, ok := byKind[k]; !ok {
			return nil, fmt.Errorf("graph: read partition %s: no original vertex ids (section %d): written by an older dorylus, run dorylus prepare --partitions again: %w", name, k, ErrUnsupportedVersion)
		}
	}
	// Every section is read whole; check its presence and length first.
	n, nnz := h.nodes, h.edges
	want := map[sectionKind]uint64{
		secMeta: math.MaxUint64, secAdjRowPtr: (n + 1) * 8, secAdjColIdx: nnz * 4, secLabels: n * 4,
		secTrain: math.MaxUint64, secVal: math.MaxUint64, secTest: math.MaxUint64,
		secPartBounds: (uint64(parts) + 1) * 8, secGhostIDs: math.MaxUint64, secGhostDegree: math.MaxUint64,
		secOrigIDs: n * 4, secGhostOrig: math.MaxUint64,
	}
	for k, length := range want {
		e, ok := byKind[k]
		switch {
		case !ok:
			return nil, p.corrupt("section %v missing", k)
		case length != math.MaxUint64 && e.length != length:
			return nil, p.corrupt("section %v is %d bytes, the header's sizes say %d", k, e.length, length)
		case k >= secPartBounds && e.length%uint64(partitionElem(k)) != 0:
			return nil, p.corrupt("section %v: length %d is not a whole number of elements", k, e.length)
		}
	}
	d := &PartitionData{Part: part, Parts: parts, NumClasses: int(h.classes)}
	adj := &tensor.CSR{Rows: int(n)}
	d.Adj = adj
	var metaRaw []byte
	reads := []func() error{
		func() (err error) { metaRaw, err = readSection[byte](p, byKind[secMeta]); return err },
		func() error { return readTo(p, byKind[secAdjRowPtr], &adj.RowPtr) },
		func() error { return readTo(p, byKind[secAdjColIdx], &adj.ColIdx) },
		func() error { return readTo(p, byKind[secLabels], &d.Labels) },
		func() error { return readTo(p, byKind[secTrain], &d.Train) },
		func() error { return readTo(p, byKind[secVal], &d.Val) },
		func() error { return readTo(p, byKind[secTest], &d.Test) },
		func() error { return readTo(p, byKind[secPartBounds], &d.Bounds) },
		func() error { return readTo(p, byKind[secGhostIDs], &d.GhostIDs) },
		func() error { return readTo(p, byKind[secGhostDegree], &d.GhostDegree) },
		func() error { return readTo(p, byKind[secOrigIDs], &d.OrigIDs) },
		func() error { return readTo(p, byKind[secGhostOrig], &d.GhostOrigIDs) },
	}
	nf := uint64(h.features)
	switch _, dense := byKind[secFeatDense]; {
	case dense:
		if nf == 0 || n > h.fileSize/4/nf {
			return nil, p.corrupt("header: %d rows × %d features do not fit in the file", n, nf)
		}
		if e := byKind[secFeatDense]; e.length != n*nf*4 {
			return nil, p.corrupt("section %v is %d bytes, want %d", secFeatDense, e.length, n*nf*4)
		}
		x := &tensor.Dense{Rows: int(n), Cols: int(nf)}
		d.Features.Dense = x
		reads = append(reads, func() error { return readTo(p, byKind[secFeatDense], &x.Data) })
	default:
		if _, ok := byKind[secFeatRowPtr]; !ok {
			if h.features != 0 {
				return nil, p.corrupt("header says %d feature columns but there is no feature section", h.features)
			}
			break
		}
		e, ok := byKind[secFeatColIdx]
		if !ok || byKind[secFeatRowPtr].length != (n+1)*8 {
			return nil, p.corrupt("sparse feature sections missing or of the wrong size")
		}
		x := &tensor.CSR{Rows: int(n), Cols: int(nf)}
		d.Features.Sparse = x
		reads = append(reads,
			func() error { return readTo(p, byKind[secFeatRowPtr], &x.RowPtr) },
			func() error { return readTo(p, e, &x.ColIdx) })
		if v, ok := byKind[secFeatVal]; ok {
			if v.length != e.length {
				return nil, p.corrupt("section %v is %d bytes, want %d", secFeatVal, v.length, e.length)
			}
			reads = append(reads, func() error { return readTo(p, v, &x.Val) })
		}
	}
	errs := make([]error, len(reads))
	parallelChunks(len(reads), func(i int) { errs[i] = reads[i]() })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(metaRaw, &d.Meta); err != nil {
		return nil, p.corrupt("section meta: bad JSON: %v", err)
	}
	adj.Cols = d.Meta.NumNodes
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("graph: read partition %s: %w: %w", name, ErrCorrupt, err)
	}
	return d, nil
}

// partitionElem is the element size of a partition section.
func partitionElem(k sectionKind) int {
	if k == secPartBounds {
		return 8
	}
	return 4
}

// wholeGraphView checks the header checksum of a partition file and returns a view of it in
// which the header says partition 0 of 1 (with the checksum recomputed), so that the
// whole-graph header reader applies every other check unchanged; it also returns the real p and
// P. (The header reader refuses partition files; a parameter there would make this view
// unnecessary.)
func wholeGraphView(r io.ReaderAt, size int64, name string) (io.ReaderAt, int, int, error) {
	head, err := checkedHead(r, size, name)
	if err != nil {
		return nil, 0, 0, err
	}
	le := binary.LittleEndian
	part, parts := le.Uint32(head[24:]), le.Uint32(head[28:])
	if parts < 1 || part >= parts || parts > math.MaxInt32 {
		return nil, 0, 0, fmt.Errorf("graph: read partition %s: header: partition %d of %d: %w", name, part, parts, ErrCorrupt)
	}
	le.PutUint32(head[24:], 0)
	le.PutUint32(head[28:], 1)
	le.PutUint32(head[60:], headerChecksum(head))
	return patchedReader{r, head}, int(part), int(parts), nil
}

// checkedHead reads the header and section table of a prepared file of size bytes and checks
// the header's checksum.
func checkedHead(r io.ReaderAt, size int64, name string) ([]byte, error) {
	var fixed [headerSize]byte
	if k, _ := r.ReadAt(fixed[:], 0); k < headerSize || string(fixed[:len(preparedMagic)]) != preparedMagic {
		return nil, fmt.Errorf("graph: read partition %s: %w (bad magic or short header)", name, ErrNotPrepared)
	}
	le := binary.LittleEndian
	sections := le.Uint32(fixed[12:])
	if sections > maxSections || headerSize+int64(sections)*sectionEntrySize > size {
		return nil, fmt.Errorf("graph: read partition %s: header: section table of %d entries does not fit: %w", name, sections, ErrCorrupt)
	}
	head := make([]byte, headerSize+int(sections)*sectionEntrySize)
	copy(head, fixed[:])
	if _, err := r.ReadAt(head[headerSize:], headerSize); err != nil {
		return nil, fmt.Errorf("graph: read partition %s: section table: %v: %w", name, err, ErrCorrupt)
	}
	if got, want := headerChecksum(head), le.Uint32(fixed[60:]); got != want {
		return nil, fmt.Errorf("graph: read partition %s: header: checksum mismatch (CRC-32C %08x, stored %08x): %w", name, got, want, ErrCorrupt)
	}
	return head, nil
}

// PartitionFileChecksum returns the size of the partition file at path and the CRC-32C its header stores,
// after checking it. That checksum covers the section table, which holds every section's
// CRC-32C, so it names the file's whole content once the sections are verified (as
// ReadPartitionFile does); it is read without reading the sections.
func PartitionFileChecksum(path string) (uint32, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("graph: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("graph: %w", err)
	}
	head, err := checkedHead(f, st.Size(), path)
	if err != nil {
		return 0, 0, err
	}
	return binary.LittleEndian.Uint32(head[60:]), st.Size(), nil
}

// patchedReader reads r with its first len(head) bytes replaced by head.
type patchedReader struct {
	r    io.ReaderAt
	head []byte
}

// ReadAt implements io.ReaderAt.
func (p patchedReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	if off < int64(len(p.head)) {
		copy(b[:n], p.head[off:])
	}
	return n, err
}
