package tensor

import "math"

// Dropout masks are counter-based: the keep/drop decision of element (r, c) is 16 bits of
// mix(rowSeed(key, r) + (c/4+1)·γ), lane c%4 — a pure function of (key, r, c) — so any split of the
// rows into intervals, and the backward pass, regenerates the same mask. Element (r, c) is kept
// when its 16-bit value is at least round(p·65536): p is quantized to 1/65536, and kept elements
// are scaled by 65536/(65536-round(p·65536)) so the expectation is preserved exactly.

const (
	golden           = 0x9E3779B97F4A7C15
	rowMul           = 0xD1B54A32D192ED03
	mixMul1, mixMul2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB // the finalizer's multipliers
)

// mix64 is the splitmix64 finalizer.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= mixMul1
	z ^= z >> 27
	z *= mixMul2
	z ^= z >> 31
	return z
}

func rowSeed(key uint64, row int) uint64 { return mix64(key ^ (uint64(row)+1)*rowMul) }

// maskRow returns the id keying row r of a block: ids[r], or offset+r when ids is nil. The ids
// let a block whose rows were renumbered (a partition's) draw the masks of the original rows.
func maskRow(offset int, ids []int32, r int) int {
	if ids != nil {
		return int(ids[r])
	}
	return offset + r
}

// dropThreshold returns the 16-bit threshold under which elements are dropped, and the scale of
// the kept ones (0 when everything is dropped).
func dropThreshold(p float32) (uint32, float32) {
	if !(p >= 0) {
		panic("tensor: dropout probability must be in [0, 1]")
	}
	thr := uint32(math.Round(float64(p) * 65536))
	if thr >= 65536 {
		return 65536, 0
	}
	return thr, float32(65536 / float64(65536-thr))
}

// DropoutKeep reports whether element (row, col) is kept by a dropout of probability p under key.
func DropoutKeep(p float32, key uint64, row, col int) bool {
	thr, _ := dropThreshold(p)
	h := mix64(rowSeed(key, row) + uint64(col/4+1)*golden)
	return uint32(uint16(h>>(16*(col%4)))) >= thr
}

// Dropout computes dst = src·mask/(1-p), inverted dropout: the mask of element (r, c) depends only
// on (key, id, c), where id is rowIDs[r] or, when rowIDs is nil, rowOffset+r. dst and src may
// alias; p == 0 copies. p must be in [0, 1].
func Dropout(dst, src *Dense, p float32, key uint64, rowOffset int, rowIDs []int32) {
	must(CheckSameShape("Dropout", dst, src))
	must(checkRowIDs("Dropout", rowIDs, src.Rows))
	if p == 0 {
		Copy(dst, src)
		return
	}
	thr, scale := dropThreshold(p)
	t := kpool.get()
	t.d0, t.d1, t.f0, t.u0, t.i0, t.ix0 = dst, src, scale, key, rowOffset, rowIDs
	t.i1 = int(thr)
	parallelRows(t, src.Rows, max(1, elemGrain/max(src.Cols, 1)), 4, dropoutChunk)
}

// DropoutBackward applies, in place, the mask and scaling that Dropout applied with the same p,
// key, rowOffset and rowIDs: the gradient through the dropout.
func DropoutBackward(grad *Dense, p float32, key uint64, rowOffset int, rowIDs []int32) {
	if p == 0 {
		must(denseOK("DropoutBackward", "grad", grad))
		return
	}
	Dropout(grad, grad, p, key, rowOffset, rowIDs)
}

// checkRowIDs checks that ids, when set, names each of rows rows.
func checkRowIDs(op string, ids []int32, rows int) error {
	if ids != nil && len(ids) != rows {
		return shapeErr(op, "%d row ids for %d rows", len(ids), rows)
	}
	return nil
}

func dropoutChunk(t *task, _, lo, hi int) {
	d, s := t.d0, t.d1
	n := s.Cols
	thr, scale, key := uint32(t.i1), t.f0, t.u0
	for r := lo; r < hi; r++ {
		seed := rowSeed(key, maskRow(t.i0, t.ix0, r))
		if thr >= 65536 {
			clear(d.Data[r*n : r*n+n])
			continue
		}
		dropoutRow(d.Data[r*n:r*n+n], s.Data[r*n:r*n+n], seed, thr, scale)
	}
}

// dropoutRowGo applies the mask of the row with the given seed to src into dst.
func dropoutRowGo(dst, src []float32, seed uint64, thr uint32, scale float32) {
	n := len(src)
	dst = dst[:n]
	c := 0
	for g := uint64(1); c+4 <= n; g++ {
		h := mix64(seed + g*golden)
		ss, dd := src[c:c+4:c+4], dst[c:c+4:c+4]
		dd[0] = keepScaled(ss[0], uint32(uint16(h)), thr, scale)
		dd[1] = keepScaled(ss[1], uint32(uint16(h>>16)), thr, scale)
		dd[2] = keepScaled(ss[2], uint32(uint16(h>>32)), thr, scale)
		dd[3] = keepScaled(ss[3], uint32(uint16(h>>48)), thr, scale)
		c += 4
	}
	if c < n {
		h := mix64(seed + uint64(c/4+1)*golden)
		for l := 0; c < n; c, l = c+1, l+1 {
			dst[c] = keepScaled(src[c], uint32(uint16(h>>(16*l))), thr, scale)
		}
	}
}

// keepScaled returns v·scale when u >= thr and 0 otherwise, without a branch.
func keepScaled(v float32, u, thr uint32, scale float32) float32 {
	drop := uint32(int32(u-thr) >> 31) // all ones when u < thr
	return math.Float32frombits(math.Float32bits(v*scale) &^ drop)
}

// DropoutCSR applies dropout to the stored entries of src: entry (r, c) is kept or dropped exactly
// as element (r, c) of a dense Dropout with the same p, key, rowOffset and rowIDs. dst shares
// src's structure (RowPtr, ColIdx) and gets its own Val, reusing dst.Val's storage when large
// enough.
func DropoutCSR(dst, src *CSR, p float32, key uint64, rowOffset int, rowIDs []int32) {
	must(csrOK("DropoutCSR", "src", src))
	must(checkRowIDs("DropoutCSR", rowIDs, src.Rows))
	if dst == nil {
		must(shapeErr("DropoutCSR", "dst is nil"))
	}
	nnz := int(src.NNZ())
	val := dst.Val
	if cap(val) < nnz || (nnz > 0 && src.Val != nil && &val[:1][0] == &src.Val[0]) {
		val = make([]float32, nnz)
	}
	val = val[:nnz]
	dst.Rows, dst.Cols, dst.RowPtr, dst.ColIdx, dst.Val = src.Rows, src.Cols, src.RowPtr, src.ColIdx, val
	if nnz == 0 {
		return
	}
	if p == 0 {
		if src.Val == nil {
			for i := range val {
				val[i] = 1
			}
		} else {
			copy(val, src.Val)
		}
		return
	}
	thr, scale := dropThreshold(p)
	t := kpool.get()
	t.s0, t.s1, t.f0, t.u0, t.i0, t.i1, t.ix0 = dst, src, scale, key, rowOffset, int(thr), rowIDs
	t.n, t.base, t.rowPtr = src.Rows, 0, src.RowPtr
	t.chunks = max(1, min(4*Threads(), nnz/elemGrain, src.Rows))
	t.run = dropoutCSRChunk
	kpool.exec(t)
}

func dropoutCSRChunk(t *task, _, lo, hi int) {
	d, s := t.s0, t.s1
	thr, scale, key := uint32(t.i1), t.f0, t.u0
	for r := lo; r < hi; r++ {
		k0, k1 := s.RowPtr[r], s.RowPtr[r+1]
		var src []float32
		if s.Val != nil {
			src = s.Val[k0:k1]
		}
		dropoutCSRRow(d.Val[k0:k1], src, s.ColIdx[k0:k1], rowSeed(key, maskRow(t.i0, t.ix0, r)), thr, scale)
	}
}

// dropoutCSRRowGo applies the mask of row seed to the values src (nil: each 1) of the entries
// in columns cols into dst: the entry in column c is the element (r, c) of a dense row.
func dropoutCSRRowGo(dst, src []float32, cols []int32, seed uint64, thr uint32, scale float32) {
	for k, c32 := range cols {
		c := int(c32)
		h := mix64(seed + uint64(c/4+1)*golden)
		v := float32(1)
		if src != nil {
			v = src[k]
		}
		dst[k] = keepScaled(v, uint32(uint16(h>>(16*(c%4)))), thr, scale)
	}
}

// DropoutEdges applies dropout, in place, to the edge values vals of the block a (one row per
// entry, one column per head): element h of entry k (j → i) is kept or dropped exactly as element
// (i, id(j)·heads+h) of a dense Dropout with the same p, key, rowOffset and rowIDs, where id(j)
// is colIDs[j], or j when colIDs is nil. The mask depends only on the two end points' ids and the
// head, not on where the entry is stored, so any split of the destinations into blocks, any
// order of the entries within a row and the backward pass (the same call on the gradient)
// regenerate it. p must be in [0, 1].
func DropoutEdges(vals *Dense, a *CSR, colIDs []int32, p float32, key uint64, rowOffset int, rowIDs []int32) {
	const op = "DropoutEdges"
	must(checkEdges(op, a, vals, nil))
	must(checkRowIDs(op, rowIDs, a.Rows))
	if colIDs != nil && len(colIDs) != a.Cols {
		must(shapeErr(op, "%d column ids for %d columns", len(colIDs), a.Cols))
	}
	if p == 0 {
		return
	}
	thr, scale := dropThreshold(p)
	heads := vals.Cols
	edgeRows(a, heads, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			seed := rowSeed(key, maskRow(rowOffset, rowIDs, i))
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				j := a.ColIdx[k]
				if colIDs != nil {
					j = colIDs[j]
				}
				base := uint64(uint32(j)) * uint64(heads) // ids are non-negative
				row := vals.Data[int(k)*heads : int(k)*heads+heads]
				for h, v := range row {
					c := base + uint64(h)
					u := uint32(uint16(mix64(seed+(c/4+1)*golden) >> (16 * (c % 4))))
					row[h] = keepScaled(v, u, thr, scale)
				}
			}
		}
	})
}
