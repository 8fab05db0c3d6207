package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/dorylus-gnn/dorylus/internal/binfmt"
)

// ErrFormat is wrapped by every error Decode, Read and Archive return for a file that is not a
// valid array of a supported type.
var ErrFormat = errors.New("npy: malformed file")

// magic opens every .npy file.
const magic = "\x93NUMPY"

// maxHeader bounds the header Decode accepts (NumPy itself refuses headers over 10 000 bytes
// unless told otherwise).
const maxHeader = 1 << 20

// The dtypes this package reads and writes.
const (
	Float32 = "<f4"
	Float64 = "<f8"
	Int32   = "<i4"
	Int64   = "<i8"
	Bool    = "|b1"
)

// elemSize is the size in bytes of an element of each supported dtype.
var elemSize = map[string]int64{Float32: 4, Float64: 8, Int32: 4, Int64: 8, Bool: 1}

// Array is a decoded array: its shape and, by its dtype, one of the typed slices.
type Array struct {
	DType    string // Float32, Float64, Int32, Int64 or Bool
	Shape    []int
	Float32s []float32
	Float64s []float64
	Int32s   []int32
	Int64s   []int64
	Bools    []bool
}

// Len returns the number of elements.
func (a *Array) Len() int {
	return len(a.Float32s) + len(a.Float64s) + len(a.Int32s) + len(a.Int64s) + len(a.Bools)
}

// header returns the magic, the version (1.0, or 2.0 for a header too long for it), the header
// length and the header of an array.
func header(dtype string, shape []int, n int) ([]byte, error) {
	elem := elemSize[dtype]
	want, err := binfmt.Elements(shape, elem)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	if want != int64(n) {
		return nil, fmt.Errorf("npy: %d values for shape %v", n, shape)
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", dtype, tuple)
	// Pad with spaces and end with a newline so that the data starts 64-byte aligned; version
	// 2.0 has a 4-byte header length where 1.0 has 2.
	version, prefix := byte(1), len(magic)+4
	if len(h)+64 > math.MaxUint16 {
		version, prefix = 2, len(magic)+6
	}
	h += strings.Repeat(" ", (64-(prefix+len(h)+1)%64)%64) + "\n"
	out := make([]byte, 0, int64(prefix+len(h))+elem*int64(n))
	out = append(out, magic...)
	out = append(out, version, 0)
	if version == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(h)))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	}
	return append(out, h...), nil
}

// encode returns the .npy file of data (row-major) of the given dtype and shape, put appending
// one value's little-endian bytes.
func encode[T any](dtype string, shape []int, data []T, put func([]byte, T) []byte) ([]byte, error) {
	out, err := header(dtype, shape, len(data))
	if err != nil {
		return nil, err
	}
	for _, v := range data {
		out = put(out, v)
	}
	return out, nil
}

// EncodeFloat32 returns the .npy file of a float32 array of the given shape (row-major data).
func EncodeFloat32(shape []int, data []float32) ([]byte, error) {
	return encode(Float32, shape, data, func(b []byte, v float32) []byte { return binary.LittleEndian.AppendUint32(b, math.Float32bits(v)) })
}

// EncodeFloat64 returns the .npy file of a float64 array of the given shape (row-major data).
func EncodeFloat64(shape []int, data []float64) ([]byte, error) {
	return encode(Float64, shape, data, func(b []byte, v float64) []byte { return binary.LittleEndian.AppendUint64(b, math.Float64bits(v)) })
}

// EncodeInt32 returns the .npy file of an int32 array of the given shape (row-major data).
func EncodeInt32(shape []int, data []int32) ([]byte, error) {
	return encode(Int32, shape, data, func(b []byte, v int32) []byte { return binary.LittleEndian.AppendUint32(b, uint32(v)) })
}

// EncodeInt64 returns the .npy file of an int64 array of the given shape (row-major data).
func EncodeInt64(shape []int, data []int64) ([]byte, error) {
	return encode(Int64, shape, data, func(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) })
}

// EncodeBool returns the .npy file of a bool array of the given shape (row-major data).
func EncodeBool(shape []int, data []bool) ([]byte, error) {
	return encode(Bool, shape, data, func(b []byte, v bool) []byte {
		if v {
			return append(b, 1)
		}
		return append(b, 0)
	})
}

// Encode returns the .npy file of a, by its dtype.
func Encode(a *Array) ([]byte, error) {
	switch a.DType {
	case Float32:
		return EncodeFloat32(a.Shape, a.Float32s)
	case Float64:
		return EncodeFloat64(a.Shape, a.Float64s)
	case Int32:
		return EncodeInt32(a.Shape, a.Int32s)
	case Int64:
		return EncodeInt64(a.Shape, a.Int64s)
	case Bool:
		return EncodeBool(a.Shape, a.Bools)
	}
	return nil, fmt.Errorf("npy: dtype %q is not supported", a.DType)
}

// Decode parses a whole .npy file of a supported dtype in C order.
func Decode(b []byte) (*Array, error) {
	return Read(bytes.NewReader(b), int64(len(b)))
}

// Read parses the .npy file of size bytes that r yields. It checks the header and that the data
// it promises is exactly what the size leaves before it allocates anything for the data, then
// reads the data straight into the typed slice.
func Read(r io.Reader, size int64) (*Array, error) {
	var pre [len(magic) + 4]byte
	if size < int64(len(pre)) {
		return nil, fmt.Errorf("%w: no .npy magic (%d bytes)", ErrFormat, size)
	}
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, readErr(err)
	}
	if string(pre[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: no .npy magic", ErrFormat)
	}
	used := int64(len(pre))
	var hl uint64
	switch major := pre[len(magic)]; major {
	case 1:
		hl = uint64(binary.LittleEndian.Uint16(pre[len(magic)+2:]))
	case 2, 3:
		var rest [2]byte
		if size < used+2 {
			return nil, fmt.Errorf("%w: truncated header length", ErrFormat)
		}
		if _, err := io.ReadFull(r, rest[:]); err != nil {
			return nil, readErr(err)
		}
		used += 2
		hl = uint64(binary.LittleEndian.Uint16(pre[len(magic)+2:])) | uint64(binary.LittleEndian.Uint16(rest[:]))<<16
	default:
		return nil, fmt.Errorf("%w: format version %d.%d is not supported", ErrFormat, major, pre[len(magic)+1])
	}
	if hl > maxHeader {
		return nil, fmt.Errorf("%w: header length %d exceeds the limit of %d", ErrFormat, hl, maxHeader)
	}
	if hl > uint64(size-used) {
		return nil, fmt.Errorf("%w: header length %d, but only %d bytes follow (truncated?)", ErrFormat, hl, size-used)
	}
	h := make([]byte, hl)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, readErr(err)
	}
	used += int64(hl)
	a, err := parseHeader(string(h))
	if err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	elem := elemSize[a.DType]
	n, err := binfmt.Elements(a.Shape, elem)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if data := size - used; data != elem*n {
		return nil, fmt.Errorf("%w: shape %v of %s takes %d bytes of data, the file has %d (truncated or trailing bytes)", ErrFormat, a.Shape, a.DType, elem*n, data)
	}
	switch a.DType {
	case Float32:
		a.Float32s, err = readData[float32](r, n)
	case Float64:
		a.Float64s, err = readData[float64](r, n)
	case Int32:
		a.Int32s, err = readData[int32](r, n)
	case Int64:
		a.Int64s, err = readData[int64](r, n)
	case Bool:
		a.Bools, err = readBools(r, n)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// readErr wraps an error of the underlying reader: an early end is a truncated file.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated", ErrFormat)
	}
	return fmt.Errorf("%w: %w", ErrFormat, err)
}

// hostLittleEndian reports whether typed slices can be viewed as little-endian bytes directly.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// readData reads n little-endian values of T straight into a new slice.
func readData[T int32 | int64 | float32 | float64](r io.Reader, n int64) ([]T, error) {
	s := make([]T, n)
	var zero T
	elem := int(unsafe.Sizeof(zero))
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*elem)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, readErr(err)
	}
	if !hostLittleEndian {
		for i := 0; i < len(b); i += elem {
			slices.Reverse(b[i : i+elem])
		}
	}
	return s, nil
}

// readBools reads n bools, each byte 0 or 1 as NumPy writes them.
func readBools(r io.Reader, n int64) ([]bool, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, readErr(err)
	}
	s := make([]bool, n)
	for i, c := range b {
		if c > 1 {
			return nil, fmt.Errorf("%w: bool element %d is byte %d, want 0 or 1", ErrFormat, i, c)
		}
		s[i] = c == 1
	}
	return s, nil
}
