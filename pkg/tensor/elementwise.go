package tensor

import "math"

// elemGrain is the least number of elements worth a chunk of an element-wise kernel.
const elemGrain = 1 << 15

// ReLU computes dst = max(src, 0) element-wise; dst and src may be the same matrix. Negative zero
// and NaNs with the sign bit set become 0.
func ReLU(dst, src *Dense) {
	must(CheckSameShape("ReLU", dst, src))
	t := kpool.get()
	t.d0, t.d1 = dst, src
	parallelRows(t, len(src.Data[:src.Rows*src.Cols]), elemGrain, 2, reluChunk)
}

func reluChunk(t *task, _, lo, hi int) { reluSlice(t.d0.Data[lo:hi], t.d1.Data[lo:hi]) }

func reluGo(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		u := math.Float32bits(v)
		u &^= uint32(int32(u) >> 31)
		d[i] = math.Float32frombits(u)
	}
}

// ReLUBackward sets grad[i] = 0 wherever out[i] <= 0, in place: the gradient through a ReLU whose
// output was out.
func ReLUBackward(grad, out *Dense) {
	must(CheckSameShape("ReLUBackward", grad, out))
	t := kpool.get()
	t.d0, t.d1 = grad, out
	parallelRows(t, grad.Rows*grad.Cols, elemGrain, 2, reluBackChunk)
}

func reluBackChunk(t *task, _, lo, hi int) { reluBackSlice(t.d0.Data[lo:hi], t.d1.Data[lo:hi]) }

func reluBackGo(g, o []float32) {
	g = g[:len(o)]
	for i, v := range o {
		x := int32(math.Float32bits(v))
		drop := uint32((x | (x - 1)) >> 31) // all ones unless v > 0
		g[i] = math.Float32frombits(math.Float32bits(g[i]) &^ drop)
	}
}

// AddInPlace computes dst += src.
func AddInPlace(dst, src *Dense) {
	AddScaled(dst, 1, src)
}

// AddScaled computes dst += alpha·src.
func AddScaled(dst *Dense, alpha float32, src *Dense) {
	must(CheckSameShape("AddScaled", dst, src))
	t := kpool.get()
	t.d0, t.d1, t.f0 = dst, src, alpha
	parallelRows(t, dst.Rows*dst.Cols, elemGrain, 2, addScaledChunk)
}

func addScaledChunk(t *task, _, lo, hi int) {
	s, d, a := t.d1.Data[lo:hi], t.d0.Data[lo:hi], t.f0
	if a == 1 {
		addSlice(d, s)
		return
	}
	axpySlice(d, s, a)
}

func addGo(d, s []float32) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] += v
	}
}

// Scale computes dst *= alpha.
func Scale(dst *Dense, alpha float32) {
	must(denseOK("Scale", "dst", dst))
	t := kpool.get()
	t.d0, t.f0 = dst, alpha
	parallelRows(t, dst.Rows*dst.Cols, elemGrain, 2, scaleChunk)
}

func scaleChunk(t *task, _, lo, hi int) { scaleSlice(t.d0.Data[lo:hi], t.f0) }

func scaleGo(d []float32, a float32) {
	for i := range d {
		d[i] *= a
	}
}

// Adam holds the coefficients of one Adam step (model.Adam): Step is the learning rate over
// 1−β1ᵗ and SqrtC2 is √(1−β2ᵗ).
type Adam struct {
	Decay, Beta1, Beta2, Step, SqrtC2, Eps float32
}

// AdamStep applies one Adam step to the weights w from the gradient g and the moments m and v,
// which it updates, element-wise: with gi = g + Decay·w, m = β1·m + (1−β1)·gi,
// v = β2·v + (1−β2)·gi·gi and w −= Step·m / (√v/SqrtC2 + Eps), each operation rounded to
// float32 in that order. All four must have the same shape.
func AdamStep(w, g, m, v *Dense, a Adam) {
	for _, x := range []*Dense{g, m, v} {
		must(CheckSameShape("AdamStep", w, x))
	}
	c := a.coeffs()
	ParallelFor(w.Rows*w.Cols, elemGrain, func(lo, hi int) {
		adamSlice(w.Data[lo:hi], g.Data[lo:hi], m.Data[lo:hi], v.Data[lo:hi], &c)
	})
}

// coeffs returns the coefficients adamGo and adamAVX512 take: decay, β1, 1−β1, β2, 1−β2, step,
// √c2, ε.
func (a Adam) coeffs() [8]float32 {
	return [8]float32{a.Decay, a.Beta1, 1 - a.Beta1, a.Beta2, 1 - a.Beta2, a.Step, a.SqrtC2, a.Eps}
}

func adamGo(w, g, m, v []float32, c *[8]float32) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for i, wi := range w {
		gi := g[i] + c[0]*wi
		mi := c[1]*m[i] + c[2]*gi
		vi := c[3]*v[i] + c[4]*gi*gi
		m[i], v[i] = mi, vi
		w[i] = wi - c[5]*mi/(float32(math.Sqrt(float64(vi)))/c[6]+c[7])
	}
}

// Copy copies src into dst, which must have the same shape.
func Copy(dst, src *Dense) {
	must(CheckSameShape("Copy", dst, src))
	if n := dst.Rows * dst.Cols; n == 0 || &dst.Data[0] == &src.Data[0] {
		return
	}
	t := kpool.get()
	t.d0, t.d1 = dst, src
	parallelRows(t, dst.Rows*dst.Cols, elemGrain, 2, copyChunk)
}

func copyChunk(t *task, _, lo, hi int) { copy(t.d0.Data[lo:hi], t.d1.Data[lo:hi]) }

// zeroParallel is d.Zero on the pool.
func zeroParallel(d *Dense) {
	t := kpool.get()
	t.d0 = d
	parallelRows(t, d.Rows*d.Cols, 4*elemGrain, 2, zeroChunk)
}

func zeroChunk(t *task, _, lo, hi int) { clear(t.d0.Data[lo:hi]) }

// AddRowVector adds v to every row of dst (a bias); len(v) must be dst.Cols.
func AddRowVector(dst *Dense, v []float32) {
	must(denseOK("AddRowVector", "dst", dst))
	if len(v) != dst.Cols {
		must(shapeErr("AddRowVector", "vector of %d for %d columns", len(v), dst.Cols))
	}
	if dst.Cols == 0 {
		return
	}
	t := kpool.get()
	t.d0, t.vec = dst, v
	parallelRows(t, dst.Rows, max(1, elemGrain/dst.Cols), 2, addRowChunk)
}

func addRowChunk(t *task, _, lo, hi int) {
	d, v := t.d0, t.vec
	for i := lo; i < hi; i++ {
		addSlice(d.Data[i*d.Cols:(i+1)*d.Cols], v)
	}
}

// ColSums writes the column sums of src into sums (len src.Cols): the bias gradient.
func ColSums(sums []float32, src *Dense) {
	must(denseOK("ColSums", "src", src))
	if len(sums) != src.Cols {
		must(shapeErr("ColSums", "sums has %d entries for %d columns", len(sums), src.Cols))
	}
	clear(sums)
	if src.Cols == 0 || src.Rows == 0 {
		return
	}
	t := kpool.get()
	t.d0 = src
	t.n = src.Rows
	t.chunks = chunkCount(src.Rows, max(1, elemGrain/src.Cols), 2, 64)
	part := getScratch(t.chunks * src.Cols)
	clear(part)
	t.part = part
	t.run = colSumsChunk
	chunks := t.chunks
	kpool.exec(t)
	for c := 0; c < chunks; c++ {
		for j, x := range part[c*src.Cols : (c+1)*src.Cols] {
			sums[j] += x
		}
	}
	putScratch(part)
}

func colSumsChunk(t *task, c, lo, hi int) {
	s := t.d0
	acc := t.part[c*s.Cols : (c+1)*s.Cols]
	for i := lo; i < hi; i++ {
		addSlice(acc, s.Data[i*s.Cols:(i+1)*s.Cols])
	}
}
