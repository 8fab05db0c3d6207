package graph

import (
	"math"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// rowGrain is the smallest number of rows a goroutine is given by the row-parallel helpers.
const rowGrain = 1 << 14

// NormalizedAdjacency returns Â = D̃^-1/2 (A+I) D̃^-1/2, the GCN propagation matrix, where D̃ holds
// the row sums of A+I. The self loop of each row is inserted in sorted position (added to an
// existing diagonal entry, if any); adj may be weighted (Val non-nil, values assumed ≥ 0) or
// not. The values are computed in float64 and rounded once to float32. adj is not modified.
func NormalizedAdjacency(adj *tensor.CSR) *tensor.CSR {
	n := adj.Rows
	rowPtr := make([]int64, n+1)
	dinv := make([]float64, n)
	parallelRanges(n, rowGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a, b := adj.RowPtr[i], adj.RowPtr[i+1]
			sum := 1.0
			if adj.Val == nil {
				sum += float64(b - a)
			} else {
				for _, v := range adj.Val[a:b] {
					sum += float64(v)
				}
			}
			if sum > 0 {
				dinv[i] = 1 / math.Sqrt(sum)
			}
			rowPtr[i+1] = b - a
			if _, loop := slices.BinarySearch(adj.ColIdx[a:b], int32(i)); !loop {
				rowPtr[i+1]++
			}
		}
	})
	for i := range n {
		rowPtr[i+1] += rowPtr[i]
	}
	out := &tensor.CSR{Rows: n, Cols: adj.Cols, RowPtr: rowPtr, ColIdx: make([]int32, rowPtr[n]), Val: make([]float32, rowPtr[n])}
	parallelRanges(n, rowGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a, b := adj.RowPtr[i], adj.RowPtr[i+1]
			k := rowPtr[i]
			di := dinv[i]
			loop := false
			emit := func(c int32, v float64) {
				out.ColIdx[k] = c
				out.Val[k] = float32(di * v * dinv[c])
				k++
			}
			for e := a; e < b; e++ {
				c := adj.ColIdx[e]
				v := 1.0
				if adj.Val != nil {
					v = float64(adj.Val[e])
				}
				if !loop && int(c) >= i {
					loop = true
					if int(c) == i {
						v++
					} else {
						emit(int32(i), 1)
					}
				}
				emit(c, v)
			}
			if !loop {
				emit(int32(i), 1)
			}
		}
	})
	return out
}

// RowNormalize scales each row of x in place so that its values sum to 1; rows summing to 0 are
// left alone. A CSR with Val nil (all ones) gets a Val slice.
func RowNormalize(x *tensor.CSR) {
	if x.Val == nil {
		x.Val = make([]float32, len(x.ColIdx))
		for i := range x.Val {
			x.Val[i] = 1
		}
	}
	parallelRanges(x.Rows, rowGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			scaleToUnitSum(x.Val[x.RowPtr[i]:x.RowPtr[i+1]])
		}
	})
}

// RowNormalizeDense scales each row of x in place so that it sums to 1; rows summing to 0 are
// left alone.
func RowNormalizeDense(x *tensor.Dense) {
	parallelRanges(x.Rows, rowGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			scaleToUnitSum(x.Row(i))
		}
	})
}

// scaleToUnitSum divides v by its sum (accumulated in float64) unless the sum is 0.
func scaleToUnitSum(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	if sum == 0 {
		return
	}
	s := 1 / sum
	for j, x := range v {
		v[j] = float32(float64(x) * s)
	}
}
