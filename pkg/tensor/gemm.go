package tensor

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// MatMul computes dst = alpha·op(a)·op(b) + beta·dst, where op(x) is x or xᵀ. When beta is 0, dst
// is not read (it may hold NaNs). It runs on the implementation compiled in (see MatMulImpl) and
// panics with an ErrShape error on mismatched shapes (see CheckMatMul).
func MatMul(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32) {
	must(CheckMatMul(dst, a, transA, b, transB))
	m, n, k := dst.Rows, dst.Cols, a.Cols
	if transA {
		k = a.Rows
	}
	gemmDefault(transA, transB, m, n, k, alpha, a.Data, a.Cols, b.Data, b.Cols, beta, dst.Data, dst.Cols)
}

// MatMulGonum is MatMul through gonum's pure-Go blas32.Gemm, kept for comparison and as a
// reference in tests.
func MatMulGonum(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32) {
	must(CheckMatMul(dst, a, transA, b, transB))
	if dst.Rows == 0 || dst.Cols == 0 {
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	if transA {
		ta = blas.Trans
	}
	if transB {
		tb = blas.Trans
	}
	k := a.Cols
	if transA {
		k = a.Rows
	}
	if k == 0 {
		scaleC(dst.Data, dst.Rows, dst.Cols, dst.Cols, beta)
		return
	}
	blas32.Gemm(ta, tb, alpha, general(a), general(b), beta, general(dst))
}

// gemmGonum is gemmNative's signature over blas32.Gemm.
func gemmGonum(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	MatMulGonum(&Dense{Rows: m, Cols: n, Data: c[:m*ldc]}, &Dense{Rows: ar, Cols: ac, Data: a[:ar*lda]}, transA, &Dense{Rows: br, Cols: bc, Data: b[:br*ldb]}, transB, alpha, beta)
}

func general(d *Dense) blas32.General {
	s := max(d.Cols, 1)
	return blas32.General{Rows: d.Rows, Cols: d.Cols, Stride: s, Data: d.Data[:d.Rows*d.Cols]}
}

// MatMulNative is MatMul through this package's own blocked GEMM (AVX-512 or AVX2 micro-kernels
// where the CPU has them; gonum's blas32 elsewhere), whatever the build tags.
func MatMulNative(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32) {
	must(CheckMatMul(dst, a, transA, b, transB))
	m, n, k := dst.Rows, dst.Cols, a.Cols
	if transA {
		k = a.Rows
	}
	gemmNative(transA, transB, m, n, k, alpha, a.Data, a.Cols, b.Data, b.Cols, beta, dst.Data, dst.Cols)
}

// scaleC computes C = beta·C on an m×n block with row stride ldc (beta 0 writes zeros).
func scaleC(c []float32, m, n, ldc int, beta float32) {
	for i := 0; i < m; i++ {
		r := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(r)
		} else if beta != 1 {
			for j := range r {
				r[j] *= beta
			}
		}
	}
}

// Blocking of the native GEMM: op(B) is packed kc×nc at a time (KC×NC floats), in panels of the
// micro-kernel's width; op(A) is read in place.
const (
	gemmKC = 256
	gemmNC = 512
)

// microKernel computes an mr×nr tile of C from kc steps; see internal/asmgen.
type microKernel func(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

// kernelSet is a micro-kernel shape: N reads a(i, p) at a[i*stride+p], T at a[p*stride+i].
type kernelSet struct {
	mr, nr int
	n, t   microKernel
}

// gemmArgs is one GEMM call, row-major, strides in floats.
type gemmArgs struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a              []float32
	lda            int
	b              []float32
	ldb            int
	c              []float32
	ldc            int
	ks             *kernelSet
}

// scratch buffers (GEMM packing, partial sums of reductions), recycled so that steady-state calls
// do not allocate.
var gemmScratch = make(chan []float32, 32)

// scratchSize is the packing scratch of every kernel set (the largest nr and mr), so that all
// GEMMs share one size of buffer.
func scratchSize(*kernelSet) int { return gemmKC*(gemmNC+64) + 24*gemmKC + 24*64 }

// getScratch returns a recycled buffer of at least size floats, or a new one. Buffers too small
// for this request go back to the pool.
func getScratch(size int) []float32 {
	var small [4][]float32
	ns := 0
	defer func() {
		for _, s := range small[:ns] {
			putScratch(s)
		}
	}()
	for ns < len(small) {
		select {
		case s := <-gemmScratch:
			if cap(s) >= size {
				return s[:size]
			}
			small[ns] = s
			ns++
		default:
			return make([]float32, size)
		}
	}
	return make([]float32, size)
}

func putScratch(s []float32) {
	select {
	case gemmScratch <- s[:cap(s)]:
	default:
	}
}

// gemmNative is the blocked GEMM, parallel over row blocks of C or, when C is short and k long
// (the weight gradient Hᵀ·G), over blocks of k with a reduction.
func gemmNative(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleC(c, m, n, ldc, beta)
		return
	}
	ks := pickKernels(n)
	if ks == nil {
		// No assembly kernels: gonum's blas32 beats a scalar Go micro-kernel (its axpy and dot
		// have SIMD assembly of their own on amd64 and arm64).
		gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	g := gemmArgs{transA, transB, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc, ks}
	th := Threads()
	tilesM := (m + ks.mr - 1) / ks.mr
	work := int64(m) * int64(n) * int64(k)
	if th == 1 || work < 1<<21 {
		g.rows(0, m, getScratchFor(ks))
		return
	}
	if m <= 1024 && m*n <= 1<<20 && k >= 4*m && k >= 2*gemmKC*th {
		// Short and deep (the weight gradient Hᵀ·G): row blocks would each pack all of op(B).
		gemmSplitK(&g, th)
		return
	}
	// Row blocks of at least 96 rows, so that packing op(B) once per block stays cheap next to
	// the block's arithmetic, and at least 1M multiply-adds.
	t := kpool.get()
	t.n = tilesM
	t.chunks = min(chunkCount(tilesM, 1, 4, maxPartials), max(1, m/96), max(1, int(work>>20)))
	t.run = gemmRowsChunk
	gp := gemmArgPool.get()
	*gp = g
	t.gemm = gp
	kpool.exec(t)
	gemmArgPool.put(gp)
}

func getScratchFor(ks *kernelSet) []float32 { return getScratch(scratchSize(ks)) }

func gemmRowsChunk(t *task, _, lo, hi int) {
	g := t.gemm
	s := getScratchFor(g.ks)
	g.rows(lo*g.ks.mr, min(hi*g.ks.mr, g.m), s)
}

// gemmSplitK computes the product as a sum over k blocks, one partial C per chunk.
func gemmSplitK(g *gemmArgs, th int) {
	kBlocks := (g.k + gemmKC - 1) / gemmKC
	chunks := min(2*th, kBlocks, maxPartials)
	mn := g.m * g.n
	part := getScratch(chunks * mn)
	t := kpool.get()
	t.n, t.chunks = kBlocks, chunks
	t.run = gemmSplitKChunk
	gp := gemmArgPool.get()
	*gp = *g
	t.gemm = gp
	t.part = part
	kpool.exec(t)
	gemmArgPool.put(gp)
	// C = alpha·Σ partials + beta·C, summed in chunk order.
	for i := 0; i < g.m; i++ {
		row := g.c[i*g.ldc : i*g.ldc+g.n]
		for j := range row {
			s := float32(0)
			for q := 0; q < chunks; q++ {
				s += part[q*mn+i*g.n+j]
			}
			if g.beta == 0 {
				row[j] = g.alpha * s
			} else {
				row[j] = g.alpha*s + g.beta*row[j]
			}
		}
	}
	putScratch(part)
}

func gemmSplitKChunk(t *task, c, lo, hi int) {
	g := *t.gemm
	k0, k1 := lo*gemmKC, min(hi*gemmKC, g.k)
	if g.transA {
		g.a = g.a[k0*g.lda:]
	} else {
		g.a = g.a[k0:]
	}
	if g.transB {
		g.b = g.b[k0:]
	} else {
		g.b = g.b[k0*g.ldb:]
	}
	mn := g.m * g.n
	g.c, g.ldc = t.part[c*mn:(c+1)*mn], g.n
	g.k, g.alpha, g.beta = k1-k0, 1, 0
	g.rows(0, g.m, getScratchFor(g.ks))
}

// rows computes rows [m0, m1) of C with the scratch buffer s, which it returns to the pool.
func (g *gemmArgs) rows(m0, m1 int, s []float32) {
	ks := g.ks
	mr, nr := ks.mr, ks.nr
	bp := s[:gemmKC*(gemmNC+nr)]
	apad := s[len(bp) : len(bp)+mr*gemmKC]
	tmp := s[len(bp)+len(apad):]
	ldc := uintptr(g.ldc) * 4
	for jc := 0; jc < g.n; jc += gemmNC {
		nc := min(gemmNC, g.n-jc)
		for pc := 0; pc < g.k; pc += gemmKC {
			kc := min(gemmKC, g.k-pc)
			g.packB(bp, pc, kc, jc, nc, nr)
			beta := g.beta
			if pc > 0 {
				beta = 1
			}
			loadC := uintptr(0)
			if beta != 0 {
				loadC = 1
			}
			i := m0
			for ; i+mr <= m1; i += mr {
				var ap *float32
				var kern microKernel
				var stride uintptr
				if g.transA {
					ap, kern, stride = &g.a[pc*g.lda+i], ks.t, uintptr(g.lda)*4
				} else {
					ap, kern, stride = &g.a[i*g.lda+pc], ks.n, uintptr(g.lda)*4
				}
				for jr := 0; jr < nc; jr += nr {
					panel := &bp[jr*kc]
					if jr+nr <= nc {
						kern(kc, ap, stride, panel, &g.c[i*g.ldc+jc+jr], ldc, g.alpha, beta, loadC)
					} else {
						kern(kc, ap, stride, panel, &tmp[0], uintptr(nr)*4, 1, 0, 0)
						g.addTile(tmp, nr, i, jc+jr, mr, nc-jr, beta)
					}
				}
			}
			if i < m1 {
				// Short last tile: copy the rows of op(A) into a zero-padded block.
				rem := m1 - i
				clear(apad[:mr*kc])
				for r := 0; r < rem; r++ {
					dst := apad[r*kc : r*kc+kc]
					if g.transA {
						for p := range dst {
							dst[p] = g.a[(pc+p)*g.lda+i+r]
						}
					} else {
						copy(dst, g.a[(i+r)*g.lda+pc:])
					}
				}
				for jr := 0; jr < nc; jr += nr {
					ks.n(kc, &apad[0], uintptr(kc)*4, &bp[jr*kc], &tmp[0], uintptr(nr)*4, 1, 0, 0)
					g.addTile(tmp, nr, i, jc+jr, rem, min(nr, nc-jr), beta)
				}
			}
		}
	}
	putScratch(s)
}

// addTile computes C[i0+r][j0+j] = alpha·tmp[r][j] + beta·C[...] for r < mr, j < nr.
func (g *gemmArgs) addTile(tmp []float32, ldt, i0, j0, mr, nr int, beta float32) {
	alpha := g.alpha
	for r := 0; r < mr; r++ {
		crow := g.c[(i0+r)*g.ldc+j0 : (i0+r)*g.ldc+j0+nr]
		trow := tmp[r*ldt : r*ldt+nr]
		trow = trow[:len(crow)]
		switch {
		case beta == 0 && alpha == 1:
			copy(crow, trow)
		case beta == 0:
			for j, v := range trow {
				crow[j] = alpha * v
			}
		default:
			for j, v := range trow {
				crow[j] = alpha*v + beta*crow[j]
			}
		}
	}
}

// packB copies op(B)[pc:pc+kc, jc:jc+nc] into panels of nr columns: panel q holds kc rows of nr
// floats, zero-padded on the right.
func (g *gemmArgs) packB(bp []float32, pc, kc, jc, nc, nr int) {
	for jr := 0; jr < nc; jr += nr {
		w := min(nr, nc-jr)
		panel := bp[jr*kc : jr*kc+kc*nr]
		if !g.transB {
			for p := 0; p < kc; p++ {
				src := g.b[(pc+p)*g.ldb+jc+jr : (pc+p)*g.ldb+jc+jr+w]
				dst := panel[p*nr : p*nr+nr]
				copy(dst, src)
				clear(dst[w:])
			}
			continue
		}
		if w < nr {
			clear(panel)
		}
		for j := 0; j < w; j++ {
			src := g.b[(jc+jr+j)*g.ldb+pc : (jc+jr+j)*g.ldb+pc+kc]
			for p, v := range src {
				panel[p*nr+j] = v
			}
		}
	}
}

// argument records for parallel GEMM calls, recycled.
type argPool struct{ free chan *gemmArgs }

var gemmArgPool = argPool{free: make(chan *gemmArgs, 16)}

func (p argPool) get() *gemmArgs {
	select {
	case g := <-p.free:
		return g
	default:
		return new(gemmArgs)
	}
}

func (p argPool) put(g *gemmArgs) {
	g.a, g.b, g.c = nil, nil, nil
	select {
	case p.free <- g:
	default:
	}
}
