package tensor

import (
	"errors"
	"fmt"
)

// ErrShape is wrapped by every shape error the Check functions return and the kernels panic with.
var ErrShape = errors.New("tensor: shape mismatch")

// shapeErr returns an error wrapping ErrShape, prefixed by the operation name.
func shapeErr(op, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrShape, op, fmt.Sprintf(format, args...))
}

// must panics with err when it is not nil. Kernels call it on programmer error only: arguments
// whose shapes disagree. Callers holding untrusted shapes call the matching Check function first.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

func denseOK(op, name string, d *Dense) error {
	if d == nil {
		return shapeErr(op, "%s is nil", name)
	}
	if d.Rows < 0 || d.Cols < 0 || len(d.Data) < d.Rows*d.Cols {
		return shapeErr(op, "%s is %dx%d with %d elements", name, d.Rows, d.Cols, len(d.Data))
	}
	return nil
}

func csrOK(op, name string, a *CSR) error {
	if a == nil {
		return shapeErr(op, "%s is nil", name)
	}
	if a.Rows < 0 || a.Cols < 0 || len(a.RowPtr) != a.Rows+1 {
		return shapeErr(op, "%s is %dx%d with %d row offsets", name, a.Rows, a.Cols, len(a.RowPtr))
	}
	if nnz := a.RowPtr[a.Rows]; int64(len(a.ColIdx)) < nnz || (a.Val != nil && int64(len(a.Val)) < nnz) {
		return shapeErr(op, "%s has %d entries but %d column indices and %d values", name, nnz, len(a.ColIdx), len(a.Val))
	}
	return nil
}

// CheckSameShape reports whether a and b are valid matrices of the same shape.
func CheckSameShape(op string, a, b *Dense) error {
	if err := denseOK(op, "first operand", a); err != nil {
		return err
	}
	if err := denseOK(op, "second operand", b); err != nil {
		return err
	}
	if a.Rows != b.Rows || a.Cols != b.Cols {
		return shapeErr(op, "%dx%d and %dx%d differ", a.Rows, a.Cols, b.Rows, b.Cols)
	}
	return nil
}

// CheckSpMM reports whether SpMM(dst, a, b) is well formed.
func CheckSpMM(dst *Dense, a *CSR, b *Dense) error {
	if a == nil {
		return shapeErr("SpMM", "a is nil")
	}
	return CheckSpMMRows(dst, a, b, 0, a.Rows)
}

// CheckSpMMRows reports whether SpMMRows(dst, a, b, lo, hi) is well formed.
func CheckSpMMRows(dst *Dense, a *CSR, b *Dense, lo, hi int) error {
	const op = "SpMM"
	if err := csrOK(op, "a", a); err != nil {
		return err
	}
	if err := denseOK(op, "b", b); err != nil {
		return err
	}
	if err := denseOK(op, "dst", dst); err != nil {
		return err
	}
	if lo < 0 || hi < lo || hi > a.Rows {
		return shapeErr(op, "rows [%d,%d) outside [0,%d)", lo, hi, a.Rows)
	}
	if a.Cols != b.Rows {
		return shapeErr(op, "a is %dx%d but b has %d rows", a.Rows, a.Cols, b.Rows)
	}
	if dst.Rows != hi-lo || dst.Cols != b.Cols {
		return shapeErr(op, "dst is %dx%d, want %dx%d", dst.Rows, dst.Cols, hi-lo, b.Cols)
	}
	return nil
}

// CheckMatMul reports whether MatMul(dst, a, transA, b, transB, ...) is well formed.
func CheckMatMul(dst, a *Dense, transA bool, b *Dense, transB bool) error {
	const op = "MatMul"
	for _, x := range []struct {
		n string
		d *Dense
	}{{"dst", dst}, {"a", a}, {"b", b}} {
		if err := denseOK(op, x.n, x.d); err != nil {
			return err
		}
	}
	m, k := a.Rows, a.Cols
	if transA {
		m, k = k, m
	}
	k2, n := b.Rows, b.Cols
	if transB {
		k2, n = n, k2
	}
	if k != k2 {
		return shapeErr(op, "op(a) is %dx%d but op(b) is %dx%d", m, k, k2, n)
	}
	if dst.Rows != m || dst.Cols != n {
		return shapeErr(op, "dst is %dx%d, want %dx%d", dst.Rows, dst.Cols, m, n)
	}
	return nil
}

// CheckLabels reports whether labels and rows index logits consistently: every row in range and
// every label of those rows in [0, logits.Cols).
func CheckLabels(logits *Dense, labels []int32, rows []int32) error {
	const op = "SoftmaxCrossEntropy"
	if err := denseOK(op, "logits", logits); err != nil {
		return err
	}
	for _, r := range rows {
		if r < 0 || int(r) >= logits.Rows || int(r) >= len(labels) {
			return shapeErr(op, "row %d outside logits (%d rows) or labels (%d)", r, logits.Rows, len(labels))
		}
		if l := labels[r]; l < 0 || int(l) >= logits.Cols {
			return shapeErr(op, "label %d of row %d outside [0,%d)", l, r, logits.Cols)
		}
	}
	return nil
}
