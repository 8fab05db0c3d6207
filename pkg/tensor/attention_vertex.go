package tensor

import "math"

// Vertex kernels of graph attention: the per-vertex attention scores and the ELU activation.

// CheckHeadDot reports whether HeadDot(dst, x, a) is well formed: x is rows × heads·F, a is
// heads × F and dst is rows × heads.
func CheckHeadDot(dst, x, a *Dense) error {
	const op = "HeadDot"
	for _, m := range []struct {
		n string
		d *Dense
	}{{"dst", dst}, {"x", x}, {"a", a}} {
		if err := denseOK(op, m.n, m.d); err != nil {
			return err
		}
	}
	if a.Rows < 1 || x.Cols != a.Rows*a.Cols || dst.Rows != x.Rows || dst.Cols != a.Rows {
		return shapeErr(op, "dst %dx%d, x %dx%d, a %dx%d: want rows×heads, rows×heads·F, heads×F",
			dst.Rows, dst.Cols, x.Rows, x.Cols, a.Rows, a.Cols)
	}
	return nil
}

// HeadDot computes the score of every row and head: dst[i,h] = Σ_f x[i,h·F+f]·a[h,f]. With x =
// W h and a an attention vector, it is the per-vertex half of the attention logit aᵀ[W h_i ‖
// W h_j], so that a logit costs one addition per edge. It panics with an ErrShape error on
// mismatched shapes (see CheckHeadDot).
func HeadDot(dst, x, a *Dense) {
	must(CheckHeadDot(dst, x, a))
	heads, f, w := a.Rows, a.Cols, x.Cols
	ParallelFor(x.Rows, max(1, elemGrain/max(w, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi, di := x.Data[i*w:i*w+w], dst.Data[i*heads:i*heads+heads]
			for h := range di {
				di[h] = dotf(xi[h*f:h*f+f], a.Data[h*f:h*f+f])
			}
		}
	})
}

// HeadDotBackward is the backward pass of HeadDot: given ds = dLoss/ddst it adds ds[i,h]·a[h,:]
// to the head-h columns of dx's row i (dLoss/dx) and Σ_i ds[i,h]·x[i, h·F:(h+1)·F] to da's row h
// (dLoss/da). dx has x's shape and da a's. It panics with an ErrShape error on mismatched shapes.
func HeadDotBackward(dx, da, ds, x, a *Dense) {
	must(CheckHeadDot(ds, x, a))
	must(CheckSameShape("HeadDotBackward", dx, x))
	must(CheckSameShape("HeadDotBackward", da, a))
	heads, f, w, rows := a.Rows, a.Cols, x.Cols, x.Rows
	if rows == 0 || w == 0 {
		return
	}
	chunks := max(1, min(rows, 2*Threads(), rows*w/elemGrain))
	part := make([]float32, chunks*w) // one da per chunk
	ParallelFor(chunks, 1, func(c0, c1 int) {
		for c := c0; c < c1; c++ {
			acc := part[c*w : c*w+w]
			for i := c * rows / chunks; i < (c+1)*rows/chunks; i++ {
				xi, dxi := x.Data[i*w:i*w+w], dx.Data[i*w:i*w+w]
				for h, g := range ds.Data[i*heads : i*heads+heads] {
					axpy1(dxi[h*f:h*f+f], a.Data[h*f:h*f+f], g)
					axpy1(acc[h*f:h*f+f], xi[h*f:h*f+f], g)
				}
			}
		}
	})
	for c := 0; c < chunks; c++ {
		for i, v := range part[c*w : c*w+w] {
			da.Data[i] += v
		}
	}
}

// ELU computes dst = ELU(src + bias) element-wise, with ELU(x) = x for x > 0 and e^x − 1
// otherwise (the exponential linear unit with α = 1) and bias added to every row (nil for none);
// dst and src may be the same matrix.
func ELU(dst, src *Dense, bias []float32) {
	must(CheckSameShape("ELU", dst, src))
	if bias != nil && len(bias) != src.Cols {
		must(shapeErr("ELU", "bias of %d for %d columns", len(bias), src.Cols))
	}
	w := src.Cols
	if w == 0 {
		return
	}
	ParallelFor(src.Rows, max(1, elemGrain/w), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s, d := src.Data[i*w:i*w+w], dst.Data[i*w:i*w+w]
			for j, x := range s {
				if bias != nil {
					x += bias[j]
				}
				pos := relu(x)
				d[j] = pos + (expNeg(x-pos) - 1) // no branch on the sign
			}
		}
	})
}

// ELUBackward multiplies grad in place by the derivative of the ELU whose output was out: 1
// where out > 0 and out + 1 (= e^x) elsewhere.
func ELUBackward(grad, out *Dense) {
	must(CheckSameShape("ELUBackward", grad, out))
	n := out.Rows * out.Cols
	ParallelFor(n, elemGrain, func(lo, hi int) {
		o, g := out.Data[lo:hi], grad.Data[lo:hi]
		for i, y := range o {
			g[i] *= y - relu(y) + 1
		}
	})
}

// relu returns max(x, 0) for finite x without a branch (negative zero gives 0).
func relu(x float32) float32 {
	b := math.Float32bits(x)
	return math.Float32frombits(b &^ uint32(int32(b)>>31))
}
