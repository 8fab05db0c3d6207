package tensor

import (
	"fmt"
	"slices"
)

// CSR is a sparse Rows×Cols matrix in compressed sparse row form. The entries of row i are at
// positions RowPtr[i]..RowPtr[i+1] of ColIdx and Val, with column indices increasing within a row.
// Val may be nil, meaning every stored entry is 1 (an unweighted graph).
type CSR struct {
	Rows, Cols int
	RowPtr     []int64 // len Rows+1, RowPtr[0] == 0
	ColIdx     []int32 // len NNZ
	Val        []float32
}

// Equal reports whether m and o have the same shape and the same stored entries: equal RowPtr
// and ColIdx, and either both Val nil (unweighted) or equal values.
func (m *CSR) Equal(o *CSR) bool {
	return m.Rows == o.Rows && m.Cols == o.Cols && slices.Equal(m.RowPtr, o.RowPtr) && slices.Equal(m.ColIdx, o.ColIdx) &&
		(m.Val == nil) == (o.Val == nil) && slices.Equal(m.Val, o.Val)
}

// NNZ returns the number of stored entries.
func (m *CSR) NNZ() int64 { return m.RowPtr[m.Rows] }

// Degree returns the number of stored entries in row i.
func (m *CSR) Degree(i int) int { return int(m.RowPtr[i+1] - m.RowPtr[i]) }

// Validate checks the structural invariants: offsets monotone and in range, column indices in
// [0, Cols) and strictly increasing within each row, Val absent or as long as ColIdx.
func (m *CSR) Validate() error {
	if len(m.RowPtr) != m.Rows+1 || m.RowPtr[0] != 0 {
		return fmt.Errorf("csr: %d row offsets for %d rows", len(m.RowPtr), m.Rows)
	}
	if int64(len(m.ColIdx)) != m.RowPtr[m.Rows] {
		return fmt.Errorf("csr: %d column indices, offsets say %d", len(m.ColIdx), m.RowPtr[m.Rows])
	}
	if m.Val != nil && len(m.Val) != len(m.ColIdx) {
		return fmt.Errorf("csr: %d values for %d entries", len(m.Val), len(m.ColIdx))
	}
	for i := 0; i < m.Rows; i++ {
		lo, hi := m.RowPtr[i], m.RowPtr[i+1]
		if hi < lo {
			return fmt.Errorf("csr: row %d offsets decrease", i)
		}
		prev := int32(-1)
		for _, c := range m.ColIdx[lo:hi] {
			if c <= prev || int(c) >= m.Cols {
				return fmt.Errorf("csr: row %d column %d out of order or out of range [0,%d)", i, c, m.Cols)
			}
			prev = c
		}
	}
	return nil
}
