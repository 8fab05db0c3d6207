package tensor

import "fmt"

// SpMMTransAdd adds aᵀ·b to dst without forming aᵀ: dst (a.Cols×b.Cols) += aᵀ b, with b
// a.Rows×b.Cols. It is the weight gradient dW = Xᵀ dP of a layer whose input X is sparse. Threads
// split the columns of dst, so each writes its own column range and no partial sums are needed.
func SpMMTransAdd(dst *Dense, a *CSR, b *Dense) {
	if dst.Rows != a.Cols || b.Rows != a.Rows || dst.Cols != b.Cols {
		panic(fmt.Sprintf("tensor.SpMMTransAdd: dst %dx%d, a %dx%d, b %dx%d", dst.Rows, dst.Cols, a.Rows, a.Cols, b.Rows, b.Cols))
	}
	cols := b.Cols
	if cols == 0 || a.Rows == 0 {
		return
	}
	grain := (cols + Threads() - 1) / Threads()
	ParallelFor(cols, grain, func(lo, hi int) {
		for i := 0; i < a.Rows; i++ {
			src := b.Data[i*cols+lo : i*cols+hi]
			for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
				v := float32(1)
				if a.Val != nil {
					v = a.Val[k]
				}
				out := dst.Data[int(a.ColIdx[k])*cols+lo : int(a.ColIdx[k])*cols+hi]
				for j, x := range src {
					out[j] += v * x
				}
			}
		}
	})
}
