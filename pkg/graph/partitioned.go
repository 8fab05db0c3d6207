package graph

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
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
	return fmt.Sprintf(partitionFileFormat, p, parts)
}

// partitionFileFormat spells PartitionFileName.
const partitionFileFormat = "part-%05d-of-%05d.dorylus"

// PartitionFileGlob matches the name of every partition file (filepath.Match), and of no
// other file of a dataset directory.
const PartitionFileGlob = "part-*-of-*.dorylus"

// ParsePartitionFileName returns the partition p of parts whose file PartitionFileName names
// name.
func ParsePartitionFileName(name string) (p, parts int, ok bool) {
	if _, err := fmt.Sscanf(name, partitionFileFormat, &p, &parts); err != nil || p < 0 || p >= parts || PartitionFileName(p, parts) != name {
		return 0, 0, false
	}
	return p, parts, true
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
	h, secs, err := partitionSections(d)
	if err != nil {
		return fmt.Errorf("graph: write partition %s: %w", path, err)
	}
	return writeAtomically(path, func(w io.Writer) error { return writeSections(w, h, secs, path) })
}

// partitionSections returns the header and sections of d's partition file.
func partitionSections(d *PartitionData) (prepHeader, []outSection, error) {
	meta, err := json.Marshal(d.Meta)
	if err != nil {
		return prepHeader{}, nil, fmt.Errorf("meta: %w", err)
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
	return h, secs, nil
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

// partitionKinds are the sections of a partition file beyond a whole graph's, and their
// element sizes.
var partitionKinds = map[sectionKind]int{secPartBounds: 8, secGhostIDs: 4, secGhostDegree: 4, secOrigIDs: 4, secGhostOrig: 4}

// readPartition reads one partition file of size bytes.
func readPartition(r io.ReaderAt, size int64, name string) (*PartitionData, error) {
	p := &prepReader{r: r, name: name}
	h, entries, err := p.readHeaderOf(size, true)
	if err != nil {
		return nil, err
	}
	s := newSectionReads(p, entries, partitionKinds)
	for _, k := range []sectionKind{secOrigIDs, secGhostOrig} {
		if !s.has(k) {
			return nil, fmt.Errorf("graph: read partition %s: no original vertex ids (section %d): written by an older dorylus, run dorylus prepare --partitions again: %w", name, k, ErrUnsupportedVersion)
		}
	}
	d := &PartitionData{Part: int(h.part), Parts: int(h.parts), NumClasses: int(h.classes)}
	adj := &tensor.CSR{Rows: int(h.nodes)}
	d.Adj = adj
	var metaRaw []byte
	s.graph(h, &metaRaw, adj, &d.Labels, &d.Train, &d.Val, &d.Test, &d.Features)
	s.plan(secPartBounds, (uint64(h.parts)+1)*8, func(e sectionEntry) error { return readTo(p, e, &d.Bounds) })
	s.plan(secGhostIDs, anyLength, func(e sectionEntry) error { return readTo(p, e, &d.GhostIDs) })
	s.plan(secGhostDegree, anyLength, func(e sectionEntry) error { return readTo(p, e, &d.GhostDegree) })
	s.plan(secOrigIDs, h.nodes*4, func(e sectionEntry) error { return readTo(p, e, &d.OrigIDs) })
	s.plan(secGhostOrig, anyLength, func(e sectionEntry) error { return readTo(p, e, &d.GhostOrigIDs) })
	if err := s.run(); err != nil {
		return nil, err
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
