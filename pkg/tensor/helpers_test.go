package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randDense(rng *rand.Rand, r, c int) *Dense {
	d := NewDense(r, c)
	for i := range d.Data {
		d.Data[i] = float32(rng.NormFloat64())
	}
	return d
}

// randCSR returns a rows×cols matrix with about density·cols entries a row (at least one row with
// many entries, some empty rows), with values unless pattern.
func randCSR(rng *rand.Rand, rows, cols int, density float64, pattern bool) *CSR {
	a := &CSR{Rows: rows, Cols: cols, RowPtr: make([]int64, rows+1)}
	for i := 0; i < rows; i++ {
		var row []int32
		d := density
		if i == rows/2 {
			d = min(1, 10*density)
		}
		if cols > 0 && i%7 != 3 {
			for j := 0; j < cols; j++ {
				if rng.Float64() < d {
					row = append(row, int32(j))
				}
			}
		}
		a.ColIdx = append(a.ColIdx, row...)
		if !pattern {
			for range row {
				a.Val = append(a.Val, float32(rng.NormFloat64()))
			}
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	if !pattern && a.Val == nil {
		a.Val = []float32{}
	}
	return a
}

func naiveSpMM(a *CSR, b *Dense, lo, hi int) *Dense {
	d := NewDense(hi-lo, b.Cols)
	acc := make([]float64, b.Cols)
	for i := lo; i < hi; i++ {
		clear(acc)
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			v := 1.0
			if a.Val != nil {
				v = float64(a.Val[k])
			}
			for j := range acc {
				acc[j] += v * float64(b.Data[int(a.ColIdx[k])*b.Cols+j])
			}
		}
		for j, x := range acc {
			d.Data[(i-lo)*b.Cols+j] = float32(x)
		}
	}
	return d
}

func naiveMatMul(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32) *Dense {
	out := dst.Clone()
	m, n := dst.Rows, dst.Cols
	k := a.Cols
	if transA {
		k = a.Rows
	}
	at := func(i, p int) float64 {
		if transA {
			return float64(a.Data[p*a.Cols+i])
		}
		return float64(a.Data[i*a.Cols+p])
	}
	bt := func(p, j int) float64 {
		if transB {
			return float64(b.Data[j*b.Cols+p])
		}
		return float64(b.Data[p*b.Cols+j])
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
			}
			v := float64(alpha) * s
			if beta != 0 {
				v += float64(beta) * float64(dst.Data[i*n+j])
			}
			out.Data[i*n+j] = float32(v)
		}
	}
	return out
}

// closeTo reports the first element where got and want differ by more than tol·(1+|want|).
func closeTo(got, want *Dense, tol float64) error {
	if got.Rows != want.Rows || got.Cols != want.Cols {
		return fmt.Errorf("shape %dx%d, want %dx%d", got.Rows, got.Cols, want.Rows, want.Cols)
	}
	for i := range want.Data {
		g, w := float64(got.Data[i]), float64(want.Data[i])
		if math.IsNaN(g) || math.Abs(g-w) > tol*(1+math.Abs(w)) {
			return fmt.Errorf("element (%d,%d) = %g, want %g", i/max(want.Cols, 1), i%max(want.Cols, 1), g, w)
		}
	}
	return nil
}

// isas returns the kernel sets this machine can run, widest first.
func isas() []int {
	var out []int
	for i := bestISA; i >= isaGo; i-- {
		out = append(out, i)
	}
	return out
}

// eachISA runs f once per kernel set, restoring the default after.
func eachISA(t testing.TB, f func(t testing.TB, name string)) {
	defer func() { kernelISA = bestISA }()
	for _, i := range isas() {
		kernelISA = i
		f(t, isaName(i))
	}
}

// withThreads runs f with the pool set to n threads.
func withThreads(n int, f func()) {
	old := Threads()
	SetThreads(n)
	defer SetThreads(old)
	f()
}

func equalDense(a, b *Dense) bool {
	return a.Rows == b.Rows && a.Cols == b.Cols && slices.Equal(a.Data, b.Data)
}
