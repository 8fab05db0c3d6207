package graph

import (
	"math"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// anyLength is a planned section's length when the header's sizes do not give it.
const anyLength = math.MaxUint64

// sectionReads plans the reads of one prepared or partition file's sections, each checked
// against the header's sizes before anything is read, and then reads them in parallel. A
// section the file's format does not know is a later writer's: its checksum is verified, and
// it is skipped.
type sectionReads struct {
	p      *prepReader
	byKind map[sectionKind]sectionEntry
	extra  map[sectionKind]int // the format's sections beyond sectionInfo's, and their element sizes
	jobs   []sectionJob
	err    error // the first problem planning found
}

type sectionJob struct {
	e    sectionEntry
	read func(sectionEntry) error
}

// newSectionReads indexes entries, the section table of a file whose format knows the
// sections of sectionInfo and of extra.
func newSectionReads(p *prepReader, entries []sectionEntry, extra map[sectionKind]int) *sectionReads {
	s := &sectionReads{p: p, byKind: make(map[sectionKind]sectionEntry, len(entries)), extra: extra}
	for _, e := range entries {
		if _, known := sectionInfo[e.kind]; known || extra[e.kind] > 0 {
			s.byKind[e.kind] = e
		} else {
			s.jobs = append(s.jobs, sectionJob{e, p.verifyUnknown})
		}
	}
	return s
}

// has reports whether the file has a section of kind k.
func (s *sectionReads) has(k sectionKind) bool {
	_, ok := s.byKind[k]
	return ok
}

// fail records the first problem planning found.
func (s *sectionReads) fail(format string, args ...any) {
	if s.err == nil {
		s.err = s.p.corrupt(format, args...)
	}
}

// plan plans the read of section k, which must be there, of length bytes (anyLength: a whole
// number of elements).
func (s *sectionReads) plan(k sectionKind, length uint64, read func(sectionEntry) error) {
	e, ok := s.byKind[k]
	switch elem := s.extra[k]; {
	case s.err != nil:
	case !ok:
		s.fail("section %s missing", k)
	case length != anyLength && e.length != length:
		s.fail("section %s is %d bytes, the header's sizes say %d", k, e.length, length)
	case elem > 0 && e.length%uint64(elem) != 0:
		s.fail("section %s: length %d is not a whole number of elements", k, e.length)
	default:
		s.jobs = append(s.jobs, sectionJob{e, read})
	}
}

// graph plans the sections both formats share: meta (its JSON into *meta), the adjacency of
// h's rows into adj, the labels, the splits and the features into x.
func (s *sectionReads) graph(h prepHeader, meta *[]byte, adj *tensor.CSR, labels, train, val, test *[]int32, x *Features) {
	p := s.p
	n, nnz, nf := h.nodes, h.edges, uint64(h.features)
	s.plan(secMeta, anyLength, func(e sectionEntry) (err error) { *meta, err = readSection[byte](p, e); return err })
	s.plan(secAdjRowPtr, (n+1)*8, func(e sectionEntry) error { return readTo(p, e, &adj.RowPtr) })
	s.plan(secAdjColIdx, nnz*4, func(e sectionEntry) error { return readTo(p, e, &adj.ColIdx) })
	s.plan(secLabels, n*4, func(e sectionEntry) error { return readTo(p, e, labels) })
	s.plan(secTrain, anyLength, func(e sectionEntry) error { return readTo(p, e, train) })
	s.plan(secVal, anyLength, func(e sectionEntry) error { return readTo(p, e, val) })
	s.plan(secTest, anyLength, func(e sectionEntry) error { return readTo(p, e, test) })
	dense, sparse := s.has(secFeatDense), s.has(secFeatRowPtr)
	switch {
	case dense && sparse:
		s.fail("both dense and sparse feature sections")
	case dense:
		if nf > 0 && n > h.fileSize/4/nf {
			s.fail("header: %d nodes × %d features do not fit in the file", n, nf)
			return
		}
		d := &tensor.Dense{Rows: int(n), Cols: int(nf)}
		x.Dense = d
		s.plan(secFeatDense, n*nf*4, func(e sectionEntry) error { return readTo(p, e, &d.Data) })
	case sparse:
		c := &tensor.CSR{Rows: int(n), Cols: int(nf)}
		x.Sparse = c
		s.plan(secFeatRowPtr, (n+1)*8, func(e sectionEntry) error { return readTo(p, e, &c.RowPtr) })
		s.plan(secFeatColIdx, anyLength, func(e sectionEntry) error { return readTo(p, e, &c.ColIdx) })
		if s.has(secFeatVal) {
			s.plan(secFeatVal, s.byKind[secFeatColIdx].length, func(e sectionEntry) error { return readTo(p, e, &c.Val) })
		}
	default:
		for _, k := range []sectionKind{secFeatColIdx, secFeatVal} {
			if s.has(k) {
				s.fail("section %s without %s", k, secFeatRowPtr)
			}
		}
		if h.features != 0 {
			s.fail("header says %d feature columns but there is no feature section", h.features)
		}
	}
}

// run reads every planned section in parallel, after the first problem planning found if any.
func (s *sectionReads) run() error {
	if s.err != nil {
		return s.err
	}
	errs := make([]error, len(s.jobs))
	parallelChunks(len(s.jobs), func(i int) { errs[i] = s.jobs[i].read(s.jobs[i].e) })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
