package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// ErrPayload reports a tensor payload whose size does not match its shape or destination.
var ErrPayload = errors.New("bad tensor payload")

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Float32Bytes returns v as little-endian bytes: a view of v on a little-endian host, a copy
// otherwise.
func Float32Bytes(v []float32) []byte {
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Int32Bytes returns v as little-endian bytes, like Float32Bytes.
func Int32Bytes(v []int32) []byte {
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// DecodeFloat32s copies the little-endian values in b into dst, which must hold len(b)/4 values.
func DecodeFloat32s(dst []float32, b []byte) error {
	if len(b) != 4*len(dst) {
		return fmt.Errorf("%w: %d bytes for %d float32 values", ErrPayload, len(b), len(dst))
	}
	if littleEndian {
		copy(Float32Bytes(dst), b)
		return nil
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return nil
}

// DecodeInt32s copies the little-endian values in b into dst, which must hold len(b)/4 values.
func DecodeInt32s(dst []int32, b []byte) error {
	if len(b) != 4*len(dst) {
		return fmt.Errorf("%w: %d bytes for %d int32 values", ErrPayload, len(b), len(dst))
	}
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return nil
}

// NewTensor returns d as a Tensor message whose data views d's values (on a little-endian
// host); d must not change until the message is sent.
func NewTensor(d *tensor.Dense) *Tensor {
	return &Tensor{Rows: uint32(d.Rows), Cols: uint32(d.Cols), Data: Float32Bytes(d.Data)}
}

// Shape checks that t holds rows × cols values and that its data has that size.
func (t *Tensor) Shape(rows, cols int) error {
	if t == nil {
		return fmt.Errorf("%w: missing tensor, want %d×%d", ErrPayload, rows, cols)
	}
	// rows·cols by division: the product of two untrusted widths may overflow.
	if int(t.Rows) != rows || int(t.Cols) != cols || len(t.Data)%4 != 0 || !fits(len(t.Data)/4, rows, cols) {
		return fmt.Errorf("%w: %d×%d tensor with %d bytes, want %d×%d", ErrPayload, t.Rows, t.Cols, len(t.Data), rows, cols)
	}
	return nil
}

// fits reports whether n values are exactly a rows × cols block, without computing rows·cols.
func fits(n, rows, cols int) bool {
	switch {
	case rows < 0 || cols < 0:
		return false
	case rows == 0 || cols == 0:
		return n == 0
	}
	return n%cols == 0 && n/cols == rows
}

// View returns t as a rows × cols tensor: on a little-endian host, a view of t's data (which
// then must not change while the view is used), else a decoded copy. A received message's data
// is its own (protobuf copies it out of the transport's buffers), so a view saves a copy; but
// a RowsBatch's, which Codec reads into pooled buffers, only until its handler returns.
func (t *Tensor) View(rows, cols int) (*tensor.Dense, error) {
	if err := t.Shape(rows, cols); err != nil {
		return nil, err
	}
	if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%4 == 0 {
		data := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(t.Data))), len(t.Data)/4)
		return &tensor.Dense{Rows: rows, Cols: cols, Data: data}, nil
	}
	d := tensor.NewDense(rows, cols)
	return d, DecodeFloat32s(d.Data, t.Data)
}

// DecodeInto copies t into dst, which must have t's shape.
func (t *Tensor) DecodeInto(dst *tensor.Dense) error {
	if err := t.Shape(dst.Rows, dst.Cols); err != nil {
		return err
	}
	return DecodeFloat32s(dst.Data, t.Data)
}
