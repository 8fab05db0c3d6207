package tensor

// spmmMinWork is the least work (nonzeros·columns) worth a chunk of its own.
const spmmMinWork = 1 << 15

// SpMM computes dst = a·b. dst must be a.Rows×b.Cols and is overwritten. The rows are split into
// contiguous ranges balanced by nonzeros and claimed dynamically by the pool, so skewed degree
// distributions balance. It panics with an ErrShape error on mismatched shapes (see CheckSpMM).
func SpMM(dst *Dense, a *CSR, b *Dense) {
	must(CheckSpMM(dst, a, b))
	spmmParallel(dst, a, b, 0, a.Rows)
}

// SpMMRows computes rows [lo, hi) of a·b into dst, which must be (hi-lo)×b.Cols: the Gather of one
// vertex interval. It is parallel like SpMM and panics like it (see CheckSpMMRows).
func SpMMRows(dst *Dense, a *CSR, b *Dense, lo, hi int) {
	must(CheckSpMMRows(dst, a, b, lo, hi))
	spmmParallel(dst, a, b, lo, hi)
}

func spmmParallel(dst *Dense, a *CSR, b *Dense, lo, hi int) {
	rows := hi - lo
	if rows == 0 || b.Cols == 0 {
		return
	}
	work := (a.RowPtr[hi] - a.RowPtr[lo] + int64(rows)) * int64(b.Cols)
	chunks := int(work / spmmMinWork)
	if m := 16 * Threads(); chunks > m {
		chunks = m
	}
	if chunks > rows {
		chunks = rows
	}
	if chunks < 1 {
		chunks = 1
	}
	if chunks == 1 {
		spmmRange(dst.Data, dst.Cols, a, b, lo, hi)
		return
	}
	t := kpool.get()
	t.d0, t.s0, t.d1 = dst, a, b
	t.n, t.base, t.rowPtr, t.chunks = rows, lo, a.RowPtr, chunks
	t.run = spmmChunk
	kpool.exec(t)
}

func spmmChunk(t *task, _, lo, hi int) {
	dst := t.d0
	spmmRange(dst.Data[lo*dst.Cols:], dst.Cols, t.s0, t.d1, t.base+lo, t.base+hi)
}

// spmmRowsGo is the portable kernel: rows [lo, hi) of a·b into dst, whose first row is row lo,
// ldd floats apart. It processes two nonzeros per step, so each destination element is loaded
// and stored once for every two gathered rows.
func spmmRowsGo(dst []float32, ldd int, a *CSR, b *Dense, lo, hi int) {
	n := b.Cols
	for i := lo; i < hi; i++ {
		d := dst[(i-lo)*ldd : (i-lo)*ldd+n]
		clear(d)
		s, e := a.RowPtr[i], a.RowPtr[i+1]
		cols := a.ColIdx[s:e]
		var vals []float32
		if a.Val != nil {
			vals = a.Val[s:e]
		}
		k := 0
		for ; k+1 < len(cols); k += 2 {
			v0, v1 := float32(1), float32(1)
			if vals != nil {
				v0, v1 = vals[k], vals[k+1]
			}
			c0, c1 := int(cols[k])*b.Cols, int(cols[k+1])*b.Cols
			axpy2(d, b.Data[c0:c0+n], b.Data[c1:c1+n], v0, v1)
		}
		if k < len(cols) {
			v := float32(1)
			if vals != nil {
				v = vals[k]
			}
			c := int(cols[k]) * b.Cols
			axpy1(d, b.Data[c:c+n], v)
		}
	}
}

// axpy2 computes d += v0·x0 + v1·x1, unrolled by four.
func axpy2(d, x0, x1 []float32, v0, v1 float32) {
	x0, x1 = x0[:len(d)], x1[:len(d)]
	j := 0
	for ; j+4 <= len(d); j += 4 {
		dd, a, b := d[j:j+4:j+4], x0[j:j+4:j+4], x1[j:j+4:j+4]
		dd[0] += v0*a[0] + v1*b[0]
		dd[1] += v0*a[1] + v1*b[1]
		dd[2] += v0*a[2] + v1*b[2]
		dd[3] += v0*a[3] + v1*b[3]
	}
	for ; j < len(d); j++ {
		d[j] += v0*x0[j] + v1*x1[j]
	}
}

// axpy1 computes d += v·x, unrolled by four.
func axpy1(d, x []float32, v float32) {
	x = x[:len(d)]
	j := 0
	for ; j+4 <= len(d); j += 4 {
		dd, a := d[j:j+4:j+4], x[j:j+4:j+4]
		dd[0] += v * a[0]
		dd[1] += v * a[1]
		dd[2] += v * a[2]
		dd[3] += v * a[3]
	}
	for ; j < len(d); j++ {
		d[j] += v * x[j]
	}
}

// Transpose returns aᵀ as a new CSR matrix (values copied, Val nil stays nil).
func Transpose(a *CSR) *CSR {
	nnz := a.NNZ()
	t := &CSR{Rows: a.Cols, Cols: a.Rows, RowPtr: make([]int64, a.Cols+1), ColIdx: make([]int32, nnz)}
	if a.Val != nil {
		t.Val = make([]float32, nnz)
	}
	for _, c := range a.ColIdx[:nnz] {
		t.RowPtr[c+1]++
	}
	for i := 0; i < a.Cols; i++ {
		t.RowPtr[i+1] += t.RowPtr[i]
	}
	next := make([]int64, a.Cols)
	copy(next, t.RowPtr[:a.Cols])
	for i := 0; i < a.Rows; i++ {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			c := a.ColIdx[k]
			p := next[c]
			next[c]++
			t.ColIdx[p] = int32(i)
			if a.Val != nil {
				t.Val[p] = a.Val[k]
			}
		}
	}
	return t
}
