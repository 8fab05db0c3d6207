package graph

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// RowReader reads a whole-graph prepared file one range of rows at a time, so that a dataset
// can be partitioned without holding its adjacency or features in memory: it keeps the row
// offsets, labels and splits (O(N)) and reads each range's adjacency and feature rows on
// demand. The ranges must be read in order and cover every row; the checksums of the streamed
// sections are verified as they go and checked by Finish.
type RowReader struct {
	f          *os.File
	p          *prepReader
	byKind     map[sectionKind]sectionEntry
	meta       Meta
	rowPtr     []int64 // adjacency row offsets, N+1
	labels     []int32
	train      []int32
	val        []int32
	test       []int32
	classes    int
	features   int
	featRowPtr []int64 // sparse features: row offsets, N+1; nil otherwise
	next       int     // the next row Rows must start at
	crc        map[sectionKind]uint32
}

// OpenRowReader opens the whole-graph prepared file (or directory) at path and reads its
// small sections, verifying their checksums.
func OpenRowReader(path string) (*RowReader, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, PreparedFileName)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("graph: read prepared: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("graph: read prepared: %w", err)
	}
	r := &RowReader{f: f, p: &prepReader{r: f, name: path}, crc: map[sectionKind]uint32{}}
	if err := r.open(st.Size()); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func (r *RowReader) open(size int64) error {
	h, entries, err := r.p.readHeader(size)
	if err != nil {
		return err
	}
	r.byKind = make(map[sectionKind]sectionEntry, len(entries))
	for _, e := range entries {
		r.byKind[e.kind] = e
	}
	n := h.nodes
	need := []struct {
		k      sectionKind
		length uint64
	}{{secMeta, 0}, {secAdjRowPtr, (n + 1) * 8}, {secAdjColIdx, h.edges * 4}, {secLabels, n * 4}, {secTrain, 0}, {secVal, 0}, {secTest, 0}}
	for _, s := range need {
		e, ok := r.byKind[s.k]
		if !ok || (s.length != 0 && e.length != s.length) {
			return r.p.corrupt("section %v missing or of the wrong size", s.k)
		}
	}
	r.classes, r.features = int(h.classes), int(h.features)
	metaRaw, err := readSection[byte](r.p, r.byKind[secMeta])
	if err != nil {
		return err
	}
	if err := json.Unmarshal(metaRaw, &r.meta); err != nil {
		return r.p.corrupt("section meta: bad JSON: %v", err)
	}
	for _, s := range []struct {
		k   sectionKind
		dst *[]int32
	}{{secLabels, &r.labels}, {secTrain, &r.train}, {secVal, &r.val}, {secTest, &r.test}} {
		if err := readTo(r.p, r.byKind[s.k], s.dst); err != nil {
			return err
		}
	}
	if err := readTo(r.p, r.byKind[secAdjRowPtr], &r.rowPtr); err != nil {
		return err
	}
	if err := checkOffsets(r.rowPtr, h.edges); err != nil {
		return r.p.corrupt("section adj_rowptr: %v", err)
	}
	switch {
	case r.has(secFeatDense):
		if e := r.byKind[secFeatDense]; e.length != n*uint64(r.features)*4 {
			return r.p.corrupt("section feat_dense is %d bytes, want %d", e.length, n*uint64(r.features)*4)
		}
	case r.has(secFeatRowPtr):
		if e := r.byKind[secFeatRowPtr]; e.length != (n+1)*8 || !r.has(secFeatColIdx) {
			return r.p.corrupt("sparse feature sections missing or of the wrong size")
		}
		if err := readTo(r.p, r.byKind[secFeatRowPtr], &r.featRowPtr); err != nil {
			return err
		}
		if err := checkOffsets(r.featRowPtr, r.byKind[secFeatColIdx].length/4); err != nil {
			return r.p.corrupt("section feat_rowptr: %v", err)
		}
		if r.has(secFeatVal) && r.byKind[secFeatVal].length != r.byKind[secFeatColIdx].length {
			return r.p.corrupt("section feat_val does not match feat_colidx")
		}
	}
	return nil
}

// checkOffsets checks that row offsets start at 0, never decrease and end at total.
func checkOffsets(off []int64, total uint64) error {
	if len(off) == 0 || off[0] != 0 || uint64(off[len(off)-1]) != total {
		return fmt.Errorf("offsets do not run from 0 to %d", total)
	}
	for i := 1; i < len(off); i++ {
		if off[i] < off[i-1] {
			return fmt.Errorf("offsets decrease at row %d", i-1)
		}
	}
	return nil
}

func (r *RowReader) has(k sectionKind) bool { _, ok := r.byKind[k]; return ok }

// Meta returns the dataset's meta.
func (r *RowReader) Meta() Meta { return r.meta }

// NumNodes returns the number of rows N.
func (r *RowReader) NumNodes() int { return len(r.rowPtr) - 1 }

// NumClasses returns the number of label classes.
func (r *RowReader) NumClasses() int { return r.classes }

// RowPtr returns the adjacency row offsets (N+1; aliased, not copied): row v has
// RowPtr[v+1]-RowPtr[v] neighbours.
func (r *RowReader) RowPtr() []int64 { return r.rowPtr }

// Labels returns the label of every node (aliased).
func (r *RowReader) Labels() []int32 { return r.labels }

// Splits returns the sorted train, val and test node ids (aliased).
func (r *RowReader) Splits() (train, val, test []int32) { return r.train, r.val, r.test }

// Rows reads rows [lo, hi): their adjacency (hi-lo rows, N columns, global column ids) and
// their feature rows. lo must be where the previous call ended (0 for the first).
func (r *RowReader) Rows(lo, hi int) (*tensor.CSR, Features, error) {
	if lo != r.next || hi < lo || hi > r.NumNodes() {
		return nil, Features{}, fmt.Errorf("graph: read prepared %s: rows %d..%d requested, want a range starting at %d within %d rows", r.p.name, lo, hi, r.next, r.NumNodes())
	}
	adj := &tensor.CSR{Rows: hi - lo, Cols: r.NumNodes(), RowPtr: rebase(r.rowPtr[lo : hi+1])}
	var err error
	if adj.ColIdx, err = streamSection[int32](r, secAdjColIdx, r.rowPtr[lo], r.rowPtr[hi]); err != nil {
		return nil, Features{}, err
	}
	var feats Features
	switch {
	case r.has(secFeatDense):
		x := &tensor.Dense{Rows: hi - lo, Cols: r.features}
		if x.Data, err = streamSection[float32](r, secFeatDense, int64(lo*r.features), int64(hi*r.features)); err != nil {
			return nil, Features{}, err
		}
		feats.Dense = x
	case r.featRowPtr != nil:
		a, b := r.featRowPtr[lo], r.featRowPtr[hi]
		x := &tensor.CSR{Rows: hi - lo, Cols: r.features, RowPtr: rebase(r.featRowPtr[lo : hi+1])}
		if x.ColIdx, err = streamSection[int32](r, secFeatColIdx, a, b); err != nil {
			return nil, Features{}, err
		}
		if r.has(secFeatVal) {
			if x.Val, err = streamSection[float32](r, secFeatVal, a, b); err != nil {
				return nil, Features{}, err
			}
		}
		feats.Sparse = x
	}
	r.next = hi
	return adj, feats, nil
}

// rebase returns offsets shifted so that the first is 0.
func rebase(off []int64) []int64 {
	out := make([]int64, len(off))
	for i, o := range off {
		out[i] = o - off[0]
	}
	return out
}

// streamSection reads elements [a, b) of section k, continuing its running checksum.
func streamSection[T int32 | float32](r *RowReader, k sectionKind, a, b int64) ([]T, error) {
	e := r.byKind[k]
	var zero T
	elem := int64(unsafe.Sizeof(zero))
	s := make([]T, b-a)
	buf := bytesOf(s)
	if len(buf) > 0 {
		if _, err := r.f.ReadAt(buf, int64(e.offset)+a*elem); err != nil {
			return nil, r.p.corrupt("section %v: %v", k, err)
		}
	}
	r.crc[k] = crc32.Update(r.crc[k], castagnoli, buf)
	if !hostLittleEndian {
		swapBytes(buf, int(elem))
	}
	return s, nil
}

// Finish checks that every row was read and that the streamed sections match their checksums,
// and closes the file.
func (r *RowReader) Finish() error {
	defer r.f.Close()
	if r.next != r.NumNodes() {
		return fmt.Errorf("graph: read prepared %s: only %d of %d rows read", r.p.name, r.next, r.NumNodes())
	}
	for k, got := range r.crc {
		if want := r.byKind[k].crc; got != want {
			return r.p.corrupt("section %v: checksum mismatch (CRC-32C %08x, stored %08x)", k, got, want)
		}
	}
	return nil
}

// Close closes the file without checking anything, for a reader abandoned on an error.
func (r *RowReader) Close() error { return r.f.Close() }
