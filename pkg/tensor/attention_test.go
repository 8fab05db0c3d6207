package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// attGraph returns a rows×cols in-edge block: about density·cols sources a row, some rows empty,
// one dense row.
func attGraph(rng *rand.Rand, rows, cols int, density float64) *CSR {
	a := randCSR(rng, rows, cols, density, true)
	a.Val = nil
	return a
}

// naiveAttention is EdgeAttention in float64 with plain loops.
func naiveAttention(a *CSR, dst, src *Dense, slope float64) *Dense {
	heads := dst.Cols
	out := NewDense(int(a.NNZ()), heads)
	for i := 0; i < a.Rows; i++ {
		for h := 0; h < heads; h++ {
			mx := math.Inf(-1)
			logit := func(k int64) float64 {
				u := float64(dst.Data[i*heads+h]) + float64(src.Data[int(a.ColIdx[k])*heads+h])
				if u <= 0 {
					u *= slope
				}
				return u
			}
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				mx = math.Max(mx, logit(k))
			}
			sum := 0.0
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				sum += math.Exp(logit(k) - mx)
			}
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				out.Data[int(k)*heads+h] = float32(math.Exp(logit(k)-mx) / sum)
			}
		}
	}
	return out
}

func TestEdgeAttentionAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ rows, cols, heads int }{{37, 41, 1}, {37, 41, 3}, {600, 500, 8}} {
		heads := c.heads // the large block is cut into several row ranges
		a := attGraph(rng, c.rows, c.cols, 0.05)
		dst, src := randDense(rng, c.rows, heads), randDense(rng, c.cols, heads)
		Scale(dst, 5) // large logits: the maximum must be subtracted
		alpha := NewDense(int(a.NNZ()), heads)
		for _, threads := range []int{1, 2, 5} {
			withThreads(threads, func() { EdgeAttention(alpha, a, dst, src, 0.2) })
			if err := closeTo(alpha, naiveAttention(a, dst, src, 0.2), 1e-5); err != nil {
				t.Fatalf("%d heads, %d threads: %v", heads, threads, err)
			}
		}
		// EdgeSoftmax of the LeakyReLU logits gives the same coefficients.
		logits := NewDense(alpha.Rows, heads)
		for i := 0; i < a.Rows; i++ {
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				for h := 0; h < heads; h++ {
					logits.Data[int(k)*heads+h] = leaky(dst.Data[i*heads+h]+src.Data[int(a.ColIdx[k])*heads+h], 0.2)
				}
			}
		}
		EdgeSoftmax(logits, logits, a)
		if err := closeTo(logits, alpha, 1e-6); err != nil {
			t.Fatalf("%d heads: EdgeSoftmax differs from EdgeAttention: %v", heads, err)
		}
	}
}

// fdCheck compares analytic with central differences of f over every element of x.
func fdCheck(t *testing.T, name string, x, analytic *Dense, f func() float64) {
	t.Helper()
	const eps = 1e-2
	worst := 0.0
	for i := range x.Data {
		orig := x.Data[i]
		x.Data[i] = orig + eps
		up := f()
		x.Data[i] = orig - eps
		down := f()
		x.Data[i] = orig
		num := (up - down) / (2 * eps)
		err := math.Abs(num-float64(analytic.Data[i])) / math.Max(1, math.Abs(num))
		worst = math.Max(worst, err)
		if err > 2e-3 {
			t.Fatalf("%s: element %d analytic %.6f numeric %.6f", name, i, analytic.Data[i], num)
		}
	}
	t.Logf("%s: %d elements, worst relative error %.2e", name, len(x.Data), worst)
}

func sumProduct(a, b *Dense) float64 {
	s := 0.0
	for i := range a.Data {
		s += float64(a.Data[i]) * float64(b.Data[i])
	}
	return s
}

func TestEdgeSoftmaxGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a := attGraph(rng, 9, 11, 0.4)
	logits := randDense(rng, int(a.NNZ()), 3)
	r := randDense(rng, logits.Rows, 3) // loss = Σ R ⊙ alpha
	alpha := NewDense(logits.Rows, 3)
	EdgeSoftmax(alpha, logits, a)
	grad := r.Clone()
	EdgeSoftmaxBackward(grad, alpha, a)
	fdCheck(t, "dlogits", logits, grad, func() float64 {
		out := NewDense(logits.Rows, 3)
		EdgeSoftmax(out, logits, a)
		return sumProduct(out, r)
	})
}

func TestEdgeAttentionGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const heads = 2
	a := attGraph(rng, 8, 10, 0.4)
	// Integer-spaced scores keep every logit dst+src at least 0.25 away from 0.
	dst, src := NewDense(8, heads), NewDense(10, heads)
	for i := range dst.Data {
		dst.Data[i] = float32(rng.IntN(7)-3) + 0.5
	}
	for i := range src.Data {
		src.Data[i] = float32(rng.IntN(7)-3) + 0.25
	}
	r := randDense(rng, int(a.NNZ()), heads)
	grad := r.Clone()
	dDst := NewDense(8, heads)
	EdgeAttentionBackward(grad, dDst, a, dst, src, 0.2)
	at, perm := EdgeTranspose(a)
	dSrc := NewDense(10, heads)
	EdgeSum(dSrc, at, grad, perm)
	loss := func() float64 {
		alpha := NewDense(int(a.NNZ()), heads)
		EdgeAttention(alpha, a, dst, src, 0.2)
		return sumProduct(alpha, r)
	}
	fdCheck(t, "ddst", dst, dDst, loss)
	fdCheck(t, "dsrc", src, dSrc, loss)
}

func TestEdgeAggregateAndGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, heads := range []int{1, 3} {
		const f = 4
		a := attGraph(rng, 12, 9, 0.3)
		alpha := randDense(rng, int(a.NNZ()), heads)
		x := randDense(rng, 9, heads*f)
		out := NewDense(12, heads*f)
		EdgeAggregate(out, a, alpha, nil, x)
		want := NewDense(12, heads*f)
		for i := 0; i < a.Rows; i++ {
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				for c := 0; c < heads*f; c++ {
					want.Data[i*heads*f+c] += alpha.Data[int(k)*heads+c/f] * x.Data[int(a.ColIdx[k])*heads*f+c]
				}
			}
		}
		if err := closeTo(out, want, 1e-5); err != nil {
			t.Fatalf("%d heads: %v", heads, err)
		}
		// loss = Σ R ⊙ out: dalpha = EdgeDot(R, x); dx = the transposed aggregation of R.
		r := randDense(rng, 12, heads*f)
		dAlpha := NewDense(alpha.Rows, heads)
		EdgeDot(dAlpha, a, r, x)
		at, perm := EdgeTranspose(a)
		dx := NewDense(9, heads*f)
		EdgeAggregate(dx, at, alpha, perm, r)
		loss := func() float64 {
			o := NewDense(12, heads*f)
			EdgeAggregate(o, a, alpha, nil, x)
			return sumProduct(o, r)
		}
		fdCheck(t, "dalpha", alpha, dAlpha, loss)
		fdCheck(t, "dx", x, dx, loss)
	}
}

func TestEdgeTransposeAndSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := attGraph(rng, 20, 15, 0.3)
	at, perm := EdgeTranspose(a)
	if err := at.Validate(); err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, a.NNZ())
	for j := 0; j < at.Rows; j++ {
		for k := at.RowPtr[j]; k < at.RowPtr[j+1]; k++ {
			p := perm[k]
			i := int(at.ColIdx[k])
			if seen[p] || p < a.RowPtr[i] || p >= a.RowPtr[i+1] || int(a.ColIdx[p]) != j {
				t.Fatalf("transposed entry (%d,%d) maps to entry %d", j, i, p)
			}
			seen[p] = true
		}
	}
	vals := randDense(rng, int(a.NNZ()), 2)
	rowSum, colSum := NewDense(20, 2), NewDense(15, 2)
	EdgeSum(rowSum, a, vals, nil)
	EdgeSum(colSum, at, vals, perm)
	wantRow, wantCol := NewDense(20, 2), NewDense(15, 2)
	for i := 0; i < a.Rows; i++ {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			for h := 0; h < 2; h++ {
				wantRow.Data[i*2+h] += vals.Data[int(k)*2+h]
				wantCol.Data[int(a.ColIdx[k])*2+h] += vals.Data[int(k)*2+h]
			}
		}
	}
	if err := closeTo(rowSum, wantRow, 1e-5); err != nil {
		t.Fatal(err)
	}
	if err := closeTo(colSum, wantCol, 1e-5); err != nil {
		t.Fatal(err)
	}
}

func TestHeadDotGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x, a := randDense(rng, 7, 3*4), randDense(rng, 3, 4)
	r := randDense(rng, 7, 3)
	dx, da := NewDense(7, 12), NewDense(3, 4)
	HeadDotBackward(dx, da, r, x, a)
	loss := func() float64 {
		s := NewDense(7, 3)
		HeadDot(s, x, a)
		return sumProduct(s, r)
	}
	fdCheck(t, "dx", x, dx, loss)
	fdCheck(t, "da", a, da, loss)
}

func TestELUGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	x := randDense(rng, 6, 5)
	bias := []float32{0.5, -0.25, 0, 1, -2}
	for i, v := range x.Data { // keep x + bias off the jump of ELU's second derivative at 0
		if u := v + bias[i%5]; u > -0.05 && u < 0.05 {
			x.Data[i] += 0.1
		}
	}
	r := randDense(rng, 6, 5)
	y := NewDense(6, 5)
	ELU(y, x, bias)
	for i, v := range x.Data {
		v += bias[i%5]
		want := float64(v)
		if v <= 0 {
			want = math.Expm1(float64(v))
		}
		if math.Abs(float64(y.Data[i])-want) > 1e-6 {
			t.Fatalf("ELU(%v) = %v, want %v", v, y.Data[i], want)
		}
	}
	g := r.Clone()
	ELUBackward(g, y)
	fdCheck(t, "dx", x, g, func() float64 {
		o := NewDense(6, 5)
		ELU(o, x, bias)
		return sumProduct(o, r)
	})
}

func TestEdgeKernelShapeErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	a := attGraph(rng, 5, 6, 0.5)
	nnz := int(a.NNZ())
	if err := CheckEdgeAttention(NewDense(nnz+1, 2), a, NewDense(5, 2), NewDense(6, 2)); err == nil {
		t.Error("EdgeAttention: wrong edge count accepted")
	}
	if err := CheckEdgeAttention(NewDense(nnz, 2), a, NewDense(5, 2), NewDense(6, 3)); err == nil {
		t.Error("EdgeAttention: wrong head count accepted")
	}
	if err := CheckEdgeAggregate(NewDense(5, 7), a, NewDense(nnz, 2), nil, NewDense(6, 7)); err == nil {
		t.Error("EdgeAggregate: width not a multiple of the heads accepted")
	}
	if err := CheckEdgeAggregate(NewDense(5, 4), a, NewDense(nnz, 2), make([]int64, nnz-1), NewDense(6, 4)); err == nil {
		t.Error("EdgeAggregate: short permutation accepted")
	}
	if err := CheckEdgeDot(NewDense(nnz, 2), a, NewDense(6, 4), NewDense(6, 4)); err == nil {
		t.Error("EdgeDot: x with the wrong rows accepted")
	}
	if err := CheckHeadDot(NewDense(3, 2), NewDense(3, 5), NewDense(2, 3)); err == nil {
		t.Error("HeadDot: x width ≠ heads·F accepted")
	}
}

// TestEdgeKernelsAllocateByChunkNotByEdge checks that the edge kernels allocate a few objects a
// call (closures, per-chunk scratch), however many edges the block has.
func TestEdgeKernelsAllocateByChunkNotByEdge(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const heads = 4
	a := attGraph(rng, 1500, 1500, 0.02)
	at, perm := EdgeTranspose(a)
	nnz := int(a.NNZ())
	dst, src, dDst := randDense(rng, 1500, heads), randDense(rng, 1500, heads), NewDense(1500, heads)
	alpha, grad := NewDense(nnz, heads), randDense(rng, nnz, heads)
	x, out := randDense(rng, 1500, heads*8), NewDense(1500, heads*8)
	limit := float64(4 + 3*8*Threads()) // per chunk at most a closure call's worth plus scratch
	for name, f := range map[string]func(){
		"EdgeAttention":         func() { EdgeAttention(alpha, a, dst, src, 0.2) },
		"EdgeAttentionBackward": func() { EdgeAttentionBackward(grad, dDst, a, dst, src, 0.2) },
		"EdgeSoftmax":           func() { EdgeSoftmax(alpha, alpha, a) },
		"EdgeSoftmaxBackward":   func() { EdgeSoftmaxBackward(grad, alpha, a) },
		"EdgeAggregate":         func() { EdgeAggregate(out, a, alpha, nil, x) },
		"EdgeAggregate perm":    func() { EdgeAggregate(out, at, alpha, perm, x) },
		"EdgeDot":               func() { EdgeDot(grad, a, out, x) },
		"EdgeSum":               func() { EdgeSum(dDst, at, grad, perm) },
	} {
		if n := testing.AllocsPerRun(5, f); n > limit {
			t.Errorf("%s: %.0f allocations a call for %d edges, want at most %.0f", name, n, nnz, limit)
		}
	}
}
