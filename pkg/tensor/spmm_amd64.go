//go:build amd64 && !purego

package tensor

// The SpMM kernels of spmm_amd64.s: rows of a·b for one block of at most 128 (AVX-512) or 64
// (AVX2) columns, accumulated in registers, with the next rows software-prefetched.

//go:noescape
func spmmAVX512x1(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX512x2(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX512x3(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX512x4(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX512x5(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX512x6(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX512x7(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX512x8(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

//go:noescape
func spmmAVX2x1(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmAVX2x2(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmAVX2x3(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmAVX2x4(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmAVX2x5(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmAVX2x6(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmAVX2x7(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmAVX2x8(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

//go:noescape
func spmmTransAVX512(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64)

type spmm512Func = func(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, mask uint64, pfLast int64)

type spmm256Func = func(dst *float32, ldd uintptr, b *float32, ldb uintptr, rowptr *int64, nrows int, colidx *int32, val *float32, valStep uintptr, maskp *int32, pfLast int64)

var spmm512Kernels = [8]spmm512Func{spmmAVX512x1, spmmAVX512x2, spmmAVX512x3, spmmAVX512x4, spmmAVX512x5, spmmAVX512x6, spmmAVX512x7, spmmAVX512x8}

var spmm256Kernels = [8]spmm256Func{spmmAVX2x1, spmmAVX2x2, spmmAVX2x3, spmmAVX2x4, spmmAVX2x5, spmmAVX2x6, spmmAVX2x7, spmmAVX2x8}

// laneMasks[8-m:16-m] selects the first m of 8 lanes.
var laneMasks = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// one stands in for the values of a pattern matrix (Val nil), read with a zero stride.
var one = float32(1)

// spmmRange computes rows [lo, hi) of a·b into dst (first row at dst[0], ldd floats apart).
func spmmRange(dst []float32, ldd int, a *CSR, b *Dense, lo, hi int) {
	if kernelISA == isaGo {
		spmmRowsGo(dst, ldd, a, b, lo, hi)
		return
	}
	n := b.Cols
	if hi <= lo || n == 0 {
		return
	}
	nnz := a.RowPtr[a.Rows]
	if nnz == 0 || b.Rows == 0 {
		for i := 0; i < hi-lo; i++ {
			clear(dst[i*ldd : i*ldd+n])
		}
		return
	}
	_ = dst[(hi-lo-1)*ldd+n-1]
	val, step := &one, uintptr(0)
	if a.Val != nil {
		val, step = &a.Val[0], 4
	}
	rp, ci := &a.RowPtr[lo], &a.ColIdx[0]
	if kernelISA == isaAVX512 {
		for c0 := 0; c0 < n; c0 += 128 {
			w := min(128, n-c0)
			nv := (w + 15) / 16
			mask := uint64(1)<<(w-16*(nv-1)) - 1
			spmm512Kernels[nv-1](&dst[c0], uintptr(ldd)*4, &b.Data[c0], uintptr(n)*4, rp, hi-lo, ci, val, step, mask, nnz-1)
		}
		return
	}
	for c0 := 0; c0 < n; c0 += 64 {
		w := min(64, n-c0)
		nv := (w + 7) / 8
		m := w - 8*(nv-1)
		spmm256Kernels[nv-1](&dst[c0], uintptr(ldd)*4, &b.Data[c0], uintptr(n)*4, rp, hi-lo, ci, val, step, &laneMasks[8-m], nnz-1)
	}
}

// spmmTransBlock adds columns [lo, hi) of aᵀ·b to dst, at most 16 of them (SpMMTransAdd).
func spmmTransBlock(dst *Dense, a *CSR, b *Dense, lo, hi int) {
	if kernelISA != isaAVX512 {
		spmmTransBlockGo(dst, a, b, lo, hi)
		return
	}
	if a.RowPtr[a.Rows] == a.RowPtr[0] {
		return
	}
	val, step := &one, uintptr(0)
	if a.Val != nil {
		val, step = &a.Val[0], 4
	}
	ld := uintptr(b.Cols) * 4
	spmmTransAVX512(&dst.Data[lo], ld, &b.Data[lo], ld, &a.RowPtr[0], a.Rows, &a.ColIdx[0], val, step, uint64(1)<<(hi-lo)-1)
}
