package tensor

import "fmt"

// SpMMTransAdd adds aᵀ·b to dst without forming aᵀ: dst (a.Cols×b.Cols) += aᵀ b, with b
// a.Rows×b.Cols. It is the weight gradient dW = Xᵀ dP of a layer whose input X is sparse. Threads
// split the columns of dst in blocks of a cache line (16 float32s), so each writes its own lines
// and no partial sums are needed: threads sharing the lines of dst's rows made the product twice
// as slow on 2 threads as on 1 at 16 columns (Coauthor CS's hidden layer), every line bouncing
// between their cores. Up to 16 columns run on one thread; with AVX-512 a block is one masked
// multiply-add per value of a (spmmTransAVX512).
func SpMMTransAdd(dst *Dense, a *CSR, b *Dense) {
	if dst.Rows != a.Cols || b.Rows != a.Rows || dst.Cols != b.Cols {
		panic(fmt.Sprintf("tensor.SpMMTransAdd: dst %dx%d, a %dx%d, b %dx%d", dst.Rows, dst.Cols, a.Rows, a.Cols, b.Rows, b.Cols))
	}
	cols := b.Cols
	if cols == 0 || a.Rows == 0 {
		return
	}
	const line = 16 // float32s in a cache line
	blocks := (cols + line - 1) / line
	ParallelFor(blocks, (blocks+Threads()-1)/Threads(), func(blo, bhi int) {
		for c := blo; c < bhi; c++ {
			spmmTransBlock(dst, a, b, c*line, min((c+1)*line, cols))
		}
	})
}

// spmmTransBlockGo adds columns [lo, hi) of aᵀ·b to dst, one value of a at a time.
func spmmTransBlockGo(dst *Dense, a *CSR, b *Dense, lo, hi int) {
	cols := b.Cols
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
}
