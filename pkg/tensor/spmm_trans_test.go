package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSpMMTransAddMatchesNaive checks aᵀ·b added to dst against float64 sums, with every kernel
// set, on 1–3 threads and widths that fill, split and overrun the 16-column blocks the threads
// share out.
func TestSpMMTransAddMatchesNaive(t *testing.T) {
	eachISA(t, func(t testing.TB, isa string) {
		for _, th := range []int{1, 2, 3} {
			withThreads(th, func() { checkSpMMTransAdd(t, isa, th) })
		}
	})
}

func checkSpMMTransAdd(t testing.TB, isa string, threads int) {
	rng := rand.New(rand.NewPCG(3, 4))
	// The last shape is a pattern matrix (no values: each counts 1).
	for s, shape := range [][3]int{{0, 3, 2}, {1, 1, 1}, {7, 5, 3}, {40, 33, 16}, {30, 20, 17}, {25, 9, 40}, {25, 9, 129}, {30, 20, 19}} {
		rows, cols, width := shape[0], shape[1], shape[2]
		a := &CSR{Rows: rows, Cols: cols, RowPtr: make([]int64, rows+1)}
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				if rng.Float64() < 0.3 {
					a.ColIdx = append(a.ColIdx, int32(j))
					a.Val = append(a.Val, float32(rng.NormFloat64()))
				}
			}
			a.RowPtr[i+1] = int64(len(a.ColIdx))
		}
		if s == 7 {
			for k := range a.Val {
				a.Val[k] = 1
			}
		}
		b := NewDense(rows, width)
		for i := range b.Data {
			b.Data[i] = float32(rng.NormFloat64())
		}
		dst := NewDense(cols, width)
		for i := range dst.Data {
			dst.Data[i] = 1
		}
		want := make([]float64, cols*width)
		for i := range want {
			want[i] = 1
		}
		for i := 0; i < rows; i++ {
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				for j := 0; j < width; j++ {
					want[int(a.ColIdx[k])*width+j] += float64(a.Val[k]) * float64(b.Data[i*width+j])
				}
			}
		}
		if s == 7 {
			a.Val = nil
		}
		SpMMTransAdd(dst, a, b)
		for i, w := range want {
			if math.Abs(float64(dst.Data[i])-w) > 1e-4*math.Max(1, math.Abs(w)) {
				t.Fatalf("%s, shape %v, %d threads, element %d: got %v want %v", isa, shape, threads, i, dst.Data[i], w)
			}
		}
	}
}
