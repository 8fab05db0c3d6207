package tensor

import "math"

// Edge kernels of graph attention (GAT, Veličković et al. 2018) over a CSR adjacency block whose
// row i lists the in-edges (j → i) of destination i: ColIdx holds the sources j, Val is ignored.
//
// An edge-value matrix has one row per stored entry and one column per attention head: element
// (k, h) belongs to entry k of the block (RowPtr[i] ≤ k < RowPtr[i+1]) and head h. A vertex
// matrix of width heads·F holds head h in columns [h·F, (h+1)·F). Kernels that read edge values
// in another order (the transposed pass of a backward step) take perm: entry k of the block uses
// row perm[k] of the edge-value matrix.
//
// Every kernel splits the destination rows into contiguous ranges balanced by stored entries
// and runs them on the pool through ParallelFor; none allocates per edge or per vertex.

// edgeMinWork is the least work (entries·columns) worth a chunk of its own.
const edgeMinWork = 1 << 14

// edgeRows runs body over contiguous row ranges covering [0, a.Rows), in parallel, the ranges
// cut so that each carries about the same number of entries plus rows. width is the work per
// entry, used only to decide how many ranges are worth it.
func edgeRows(a *CSR, width int, body func(lo, hi int)) {
	rows := a.Rows
	if rows == 0 {
		return
	}
	cost := a.RowPtr[rows] + int64(rows)
	chunks := int(min(cost*int64(max(width, 1))/edgeMinWork, int64(8*Threads()), int64(rows)))
	if chunks <= 1 {
		body(0, rows)
		return
	}
	ParallelFor(chunks, 1, func(c0, c1 int) {
		for c := c0; c < c1; c++ {
			lo, hi := costRow(a.RowPtr, rows, c, chunks), costRow(a.RowPtr, rows, c+1, chunks)
			if lo < hi {
				body(lo, hi)
			}
		}
	})
}

// costRow returns the first row r of [0, rows] with RowPtr[r]+r ≥ c/chunks of RowPtr[rows]+rows.
func costRow(rowPtr []int64, rows, c, chunks int) int {
	if c <= 0 {
		return 0
	}
	if c >= chunks {
		return rows
	}
	target := int64(c) * (rowPtr[rows] + int64(rows)) / int64(chunks)
	lo, hi := 0, rows
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if rowPtr[mid]+int64(mid) < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// checkEdges reports whether vals is an edge-value matrix of a with at least one head column:
// one row per entry, or, when perm is set, one permutation index per entry (an index outside
// vals panics when it is used).
func checkEdges(op string, a *CSR, vals *Dense, perm []int64) error {
	if err := csrOK(op, "adjacency", a); err != nil {
		return err
	}
	if err := denseOK(op, "edge values", vals); err != nil {
		return err
	}
	nnz := a.RowPtr[a.Rows]
	if vals.Cols < 1 {
		return shapeErr(op, "edge values have %d head columns", vals.Cols)
	}
	if perm == nil {
		if int64(vals.Rows) != nnz {
			return shapeErr(op, "%d edge-value rows for %d entries", vals.Rows, nnz)
		}
		return nil
	}
	if int64(len(perm)) != nnz {
		return shapeErr(op, "%d permutation indices for %d entries", len(perm), nnz)
	}
	return nil
}

// checkVertex reports whether x has rows rows (at least rows when atLeast) and width columns.
func checkVertex(op, name string, x *Dense, rows int, atLeast bool, width int) error {
	if err := denseOK(op, name, x); err != nil {
		return err
	}
	if x.Cols != width || x.Rows < rows || (!atLeast && x.Rows != rows) {
		return shapeErr(op, "%s is %dx%d, want %d rows and %d columns", name, x.Rows, x.Cols, rows, width)
	}
	return nil
}

// CheckEdgeAttention reports whether EdgeAttention(alpha, a, dst, src, …) is well formed: alpha
// holds one row per entry of a, dst one row per row of a, and src one row per column of a, all
// with the same number of head columns.
func CheckEdgeAttention(alpha *Dense, a *CSR, dst, src *Dense) error {
	const op = "EdgeAttention"
	if err := checkEdges(op, a, alpha, nil); err != nil {
		return err
	}
	if err := checkVertex(op, "dst scores", dst, a.Rows, false, alpha.Cols); err != nil {
		return err
	}
	return checkVertex(op, "src scores", src, a.Cols, false, alpha.Cols)
}

// EdgeAttention computes the attention coefficients of every in-edge (j → i) of a, head by head:
// alpha[k,h] = softmax over the entries k of row i of LeakyReLU(dst[i,h] + src[j,h]) with
// negative slope slope, the row maximum subtracted before exponentiating. It panics with an
// ErrShape error on mismatched shapes (see CheckEdgeAttention).
func EdgeAttention(alpha *Dense, a *CSR, dst, src *Dense, slope float32) {
	must(CheckEdgeAttention(alpha, a, dst, src))
	heads := alpha.Cols
	edgeRows(a, 4*heads, func(lo, hi int) {
		m := make([]float32, 2*heads)
		for i := lo; i < hi; i++ {
			s, e := a.RowPtr[i], a.RowPtr[i+1]
			if s == e {
				continue
			}
			v := alpha.Data[int(s)*heads : int(e)*heads]
			edgeLogits(v, a.ColIdx[s:e], dst.Data[i*heads:i*heads+heads], src.Data, slope, m[:heads])
			expNormalize(v, heads, m)
		}
	})
}

// leaky returns x for x > 0 and slope·x otherwise, without a branch: the sign of a logit is a
// coin flip, which a branch predictor cannot learn.
func leaky(x, slope float32) float32 { return x * leakyGrad(x, slope) }

// leakyGrad returns the derivative of leaky at x: 1 for x > 0, slope otherwise.
func leakyGrad(x, slope float32) float32 {
	f := [2]float32{1, slope}
	return f[(math.Float32bits(x)-1)>>31|math.Float32bits(x)>>31]
}

// expNeg returns e^x for x ≤ 0 (e^-87 below -87) as expf does, small enough to inline.
func expNeg(x float32) float32 {
	if x < -87 { // rare: a predictable branch, cheaper than the builtin max
		x = -87
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
		magic = 12582912 // 1.5·2²³: adding and subtracting it rounds to an integer
	)
	k := (x*log2e + magic) - magic
	r := x - k*ln2hi - k*ln2lo
	p := ((((((1.0/720)*r+1.0/120)*r+1.0/24)*r+1.0/6)*r+0.5)*r+1)*r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// edgeLogits writes the LeakyReLU logits dst_i + src[j] of one row's sources cols into v
// (len(cols) × heads, row-major) and their maximum per head into mx.
func edgeLogits(v []float32, cols []int32, di, src []float32, slope float32, mx []float32) {
	heads := len(di)
	for h := range mx {
		mx[h] = float32(math.Inf(-1))
	}
	for k, c := range cols {
		sj := src[int(c)*heads : int(c)*heads+heads]
		out := v[k*heads : k*heads+heads]
		for h, d := range di {
			x := leaky(d+sj[h], slope)
			out[h] = x
			if x > mx[h] { // rarely taken after the first entries
				mx[h] = x
			}
		}
	}
}

// expNormalize turns the logits v (entries × heads, row-major) whose per-head maximum is
// m[:heads] into a softmax over the entries, separately for every head; m[heads:2·heads] is
// scratch.
func expNormalize(v []float32, heads int, m []float32) {
	mx, sum := m[:heads], m[heads:2*heads]
	clear(sum)
	for k := 0; k < len(v); k += heads {
		row := v[k : k+heads]
		for h, x := range row {
			ex := expNeg(x - mx[h])
			row[h] = ex
			sum[h] += ex
		}
	}
	for h, s := range sum {
		sum[h] = 1 / s
	}
	for k := 0; k < len(v); k += heads {
		row := v[k : k+heads]
		for h := range row {
			row[h] *= sum[h]
		}
	}
}

// softmaxRows turns the logits v (entries × heads, row-major) into a softmax over the entries,
// separately for every head; m is scratch of 2·heads.
func softmaxRows(v []float32, heads int, m []float32) {
	mx := m[:heads]
	copy(mx, v[:heads])
	for k := heads; k < len(v); k += heads {
		for h, x := range v[k : k+heads] {
			if x > mx[h] {
				mx[h] = x
			}
		}
	}
	expNormalize(v, heads, m)
}

// EdgeSoftmax computes alpha = the softmax of logits over the entries of each row of a,
// separately for every head column, after subtracting the row's maximum. alpha and logits may be
// the same matrix. It panics with an ErrShape error on mismatched shapes.
func EdgeSoftmax(alpha, logits *Dense, a *CSR) {
	must(checkEdges("EdgeSoftmax", a, logits, nil))
	must(CheckSameShape("EdgeSoftmax", alpha, logits))
	heads := alpha.Cols
	edgeRows(a, 3*heads, func(lo, hi int) {
		m := make([]float32, 2*heads)
		s, e := int(a.RowPtr[lo])*heads, int(a.RowPtr[hi])*heads
		copy(alpha.Data[s:e], logits.Data[s:e])
		for i := lo; i < hi; i++ {
			if s, e := int(a.RowPtr[i])*heads, int(a.RowPtr[i+1])*heads; s < e {
				softmaxRows(alpha.Data[s:e], heads, m)
			}
		}
	})
}

// EdgeSoftmaxBackward turns grad = dLoss/dalpha into dLoss/dlogits in place, where alpha =
// EdgeSoftmax(logits): grad[k,h] = alpha[k,h]·(grad[k,h] − Σ_{k' in row} alpha[k',h]·grad[k',h]).
func EdgeSoftmaxBackward(grad, alpha *Dense, a *CSR) {
	must(checkEdges("EdgeSoftmaxBackward", a, alpha, nil))
	must(CheckSameShape("EdgeSoftmaxBackward", grad, alpha))
	heads := alpha.Cols
	edgeRows(a, 3*heads, func(lo, hi int) {
		dot := make([]float32, heads)
		for i := lo; i < hi; i++ {
			s, e := int(a.RowPtr[i])*heads, int(a.RowPtr[i+1])*heads
			softmaxBackRow(grad.Data[s:e], alpha.Data[s:e], heads, dot)
		}
	})
}

// softmaxBackRow is EdgeSoftmaxBackward on the entries of one row; dot is scratch of heads.
func softmaxBackRow(g, alpha []float32, heads int, dot []float32) {
	clear(dot)
	for k := 0; k < len(g); k += heads {
		for h, x := range alpha[k : k+heads] {
			dot[h] += x * g[k+h]
		}
	}
	for k := 0; k < len(g); k += heads {
		gr, ar := g[k:k+heads], alpha[k:k+heads]
		for h := range gr {
			gr[h] = ar[h] * (gr[h] - dot[h])
		}
	}
}

// EdgeAttentionBackward is the backward pass of EdgeAttention. Given grad = dLoss/dalpha, it
// recomputes alpha from dst and src, overwrites grad with dLoss/du, where u[k,h] = dst[i,h] +
// src[j,h] is the logit before the LeakyReLU, and writes dDst[i,h] = Σ_{k in row i} grad[k,h],
// the gradient of dst (rows of a × heads). The gradient of src is the same sum over the entries
// of each source, which EdgeSum computes over the transposed block. It panics like
// EdgeAttention on mismatched shapes.
func EdgeAttentionBackward(grad, dDst *Dense, a *CSR, dst, src *Dense, slope float32) {
	must(CheckEdgeAttention(grad, a, dst, src))
	must(CheckSameShape("EdgeAttentionBackward", dDst, dst))
	heads := grad.Cols
	edgeRows(a, 6*heads, func(lo, hi int) {
		m := make([]float32, 3*heads)
		mx, sum, dot := m[:heads], m[heads:2*heads], m[2*heads:]
		var scratch []float32 // the row's logits, then their exponentials
		for i := lo; i < hi; i++ {
			s, e := a.RowPtr[i], a.RowPtr[i+1]
			dd := dDst.Data[i*heads : i*heads+heads]
			clear(dd)
			if s == e {
				continue
			}
			n := int(e-s) * heads
			if cap(scratch) < 2*n {
				scratch = make([]float32, 2*n, 4*n)
			}
			lg, ex := scratch[:n], scratch[n:2*n]
			edgeLogits(lg, a.ColIdx[s:e], dst.Data[i*heads:i*heads+heads], src.Data, slope, mx)
			g := grad.Data[int(s)*heads : int(e)*heads]
			clear(sum)
			clear(dot)
			for k := 0; k < n; k += heads { // unnormalised: ex = e^(logit - max)
				for h, x := range lg[k : k+heads] {
					y := expNeg(x - mx[h])
					ex[k+h] = y
					sum[h] += y
					dot[h] += y * g[k+h]
				}
			}
			for h := range sum {
				sum[h] = 1 / sum[h]
				dot[h] *= sum[h] // Σ alpha·g
			}
			// Through the softmax, alpha·(g − Σ alpha·g), then the LeakyReLU.
			for k := 0; k < n; k += heads {
				gk, xk, lk := g[k:k+heads], ex[k:k+heads], lg[k:k+heads]
				for h := range gk {
					v := xk[h] * sum[h] * (gk[h] - dot[h]) * leakyGrad(lk[h], slope)
					gk[h] = v
					dd[h] += v
				}
			}
		}
	})
}

// CheckEdgeAggregate reports whether EdgeAggregate(dst, a, alpha, perm, x) is well formed.
func CheckEdgeAggregate(dst *Dense, a *CSR, alpha *Dense, perm []int64, x *Dense) error {
	const op = "EdgeAggregate"
	if err := checkEdges(op, a, alpha, perm); err != nil {
		return err
	}
	if err := denseOK(op, "x", x); err != nil {
		return err
	}
	if x.Cols%alpha.Cols != 0 {
		return shapeErr(op, "x has %d columns, not a multiple of %d heads", x.Cols, alpha.Cols)
	}
	if err := checkVertex(op, "x", x, a.Cols, false, x.Cols); err != nil {
		return err
	}
	return checkVertex(op, "dst", dst, a.Rows, false, x.Cols)
}

// EdgeAggregate computes the attention-weighted sum of every row's in-neighbours, head by head:
// dst[i, h·F:(h+1)·F] = Σ_{k in row i} alpha[p(k),h]·x[j, h·F:(h+1)·F], with j = ColIdx[k],
// F = x.Cols/heads and p(k) = perm[k], or k when perm is nil. dst (rows of a × x.Cols) is
// overwritten. It panics with an ErrShape error on mismatched shapes (see CheckEdgeAggregate).
func EdgeAggregate(dst *Dense, a *CSR, alpha *Dense, perm []int64, x *Dense) {
	must(CheckEdgeAggregate(dst, a, alpha, perm, x))
	heads, w := alpha.Cols, x.Cols
	if heads == 1 && perm == nil {
		// One head: a weighted SpMM with the coefficients as values.
		SpMM(dst, &CSR{Rows: a.Rows, Cols: a.Cols, RowPtr: a.RowPtr, ColIdx: a.ColIdx, Val: alpha.Data[:a.RowPtr[a.Rows]]}, x)
		return
	}
	f := w / heads
	edge := func(k int64) (xr, c []float32) {
		p := k
		if perm != nil {
			p = perm[k]
		}
		j := int(a.ColIdx[k])
		return x.Data[j*w : j*w+w], alpha.Data[int(p)*heads : int(p)*heads+heads]
	}
	edgeRows(a, w, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := dst.Data[i*w : i*w+w]
			clear(d)
			k, e := a.RowPtr[i], a.RowPtr[i+1]
			for ; k+1 < e; k += 2 { // two edges a step: each output element loaded and stored once
				x0, c0 := edge(k)
				x1, c1 := edge(k + 1)
				c1 = c1[:len(c0)]
				for h, a0 := range c0 {
					a1 := c1[h]
					dd, y0, y1 := d[h*f:h*f+f], x0[h*f:h*f+f], x1[h*f:h*f+f]
					y0, y1 = y0[:len(dd)], y1[:len(dd)]
					for j := range dd {
						dd[j] += a0*y0[j] + a1*y1[j]
					}
				}
			}
			if k < e {
				x0, c0 := edge(k)
				for h, c := range c0 {
					axpy1(d[h*f:h*f+f], x0[h*f:h*f+f], c)
				}
			}
		}
	})
}

// CheckEdgeDot reports whether EdgeDot(dst, a, x, y) is well formed.
func CheckEdgeDot(dst *Dense, a *CSR, x, y *Dense) error {
	const op = "EdgeDot"
	if err := checkEdges(op, a, dst, nil); err != nil {
		return err
	}
	if err := denseOK(op, "x", x); err != nil {
		return err
	}
	if x.Cols%dst.Cols != 0 {
		return shapeErr(op, "x has %d columns, not a multiple of %d heads", x.Cols, dst.Cols)
	}
	if err := checkVertex(op, "x", x, a.Rows, false, x.Cols); err != nil {
		return err
	}
	return checkVertex(op, "y", y, a.Cols, false, x.Cols)
}

// EdgeDot computes, for every entry k (j → i) of a and head h, the dot product of the head's
// columns of x's row i and y's row j: dst[k,h] = Σ_f x[i,h·F+f]·y[j,h·F+f], F = x.Cols/heads.
// It is the gradient of EdgeAggregate's coefficients (x = dLoss/ddst, y = the aggregated rows).
// It panics with an ErrShape error on mismatched shapes (see CheckEdgeDot).
func EdgeDot(dst *Dense, a *CSR, x, y *Dense) {
	must(CheckEdgeDot(dst, a, x, y))
	heads, w := dst.Cols, x.Cols
	f := w / heads
	edgeRows(a, w, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi := x.Data[i*w : i*w+w]
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				j := int(a.ColIdx[k])
				yj := y.Data[j*w : j*w+w]
				out := dst.Data[int(k)*heads : int(k)*heads+heads]
				for h := range out {
					xh, yh := xi[h*f:h*f+f], yj[h*f:h*f+f]
					yh = yh[:len(xh)]
					var s float32
					for c, v := range xh {
						s += v * yh[c]
					}
					out[h] = s
				}
			}
		}
	})
}

// dotf returns Σ x[i]·y[i] over len(x) elements, unrolled by four.
func dotf(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b := x[i:i+4:i+4], y[i:i+4:i+4]
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// EdgeSum writes the sum of every row's edge values into dst (rows of a × heads), head by head:
// dst[i,h] = Σ_{k in row i} vals[p(k),h] with p as in EdgeAggregate. Over a transposed block it
// sums the values of every source's out-edges. It panics with an ErrShape error on mismatched
// shapes.
func EdgeSum(dst *Dense, a *CSR, vals *Dense, perm []int64) {
	const op = "EdgeSum"
	must(checkEdges(op, a, vals, perm))
	heads := vals.Cols
	must(checkVertex(op, "dst", dst, a.Rows, false, heads))
	edgeRows(a, heads, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := dst.Data[i*heads : i*heads+heads]
			clear(d)
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				p := k
				if perm != nil {
					p = perm[k]
				}
				for h, v := range vals.Data[int(p)*heads : int(p)*heads+heads] {
					d[h] += v
				}
			}
		}
	})
}

// EdgeTranspose returns the structure of aᵀ (Val nil) and perm, which maps its entries back to
// a's: entry k of aᵀ is entry perm[k] of a. Row j of aᵀ lists the destinations of source j's
// out-edges, so the kernels above run over it, with perm, to push gradients back to sources.
func EdgeTranspose(a *CSR) (*CSR, []int64) {
	must(csrOK("EdgeTranspose", "a", a))
	nnz := a.RowPtr[a.Rows]
	t := &CSR{Rows: a.Cols, Cols: a.Rows, RowPtr: make([]int64, a.Cols+1), ColIdx: make([]int32, nnz)}
	perm := make([]int64, nnz)
	for _, c := range a.ColIdx[:nnz] {
		t.RowPtr[c+1]++
	}
	for j := 0; j < a.Cols; j++ {
		t.RowPtr[j+1] += t.RowPtr[j]
	}
	next := make([]int64, a.Cols)
	copy(next, t.RowPtr[:a.Cols])
	for i := 0; i < a.Rows; i++ {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			c := a.ColIdx[k]
			p := next[c]
			next[c]++
			t.ColIdx[p] = int32(i)
			perm[p] = k
		}
	}
	return t, perm
}
