package npy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dorylus-gnn/dorylus/internal/binfmt"
)

// ErrFormat is wrapped by every error Decode returns for a file that is not a valid .npy array
// of a supported type.
var ErrFormat = errors.New("npy: malformed file")

// magic opens every .npy file.
const magic = "\x93NUMPY"

// maxHeader bounds the header Decode accepts (NumPy itself refuses headers over 10 000 bytes
// unless told otherwise).
const maxHeader = 1 << 20

// The dtypes this package reads and writes.
const (
	Float32 = "<f4"
	Int32   = "<i4"
)

// Array is a decoded array: its shape and, by its dtype, Float32s or Int32s.
type Array struct {
	DType    string // Float32 or Int32
	Shape    []int
	Float32s []float32
	Int32s   []int32
}

// header returns the magic, the version (1.0, or 2.0 for a header too long for it), the header
// length and the header of an array.
func header(dtype string, shape []int, n int) ([]byte, error) {
	want, err := binfmt.Elements(shape, 4)
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
	out := make([]byte, 0, prefix+len(h)+4*n)
	out = append(out, magic...)
	out = append(out, version, 0)
	if version == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(h)))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	}
	return append(out, h...), nil
}

// EncodeFloat32 returns the .npy file of a float32 array of the given shape (row-major data).
func EncodeFloat32(shape []int, data []float32) ([]byte, error) {
	out, err := header(Float32, shape, len(data))
	if err != nil {
		return nil, err
	}
	for _, v := range data {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out, nil
}

// EncodeInt32 returns the .npy file of an int32 array of the given shape (row-major data).
func EncodeInt32(shape []int, data []int32) ([]byte, error) {
	out, err := header(Int32, shape, len(data))
	if err != nil {
		return nil, err
	}
	for _, v := range data {
		out = binary.LittleEndian.AppendUint32(out, uint32(v))
	}
	return out, nil
}

// Decode parses a whole .npy file of '<f4' or '<i4' values in C order.
func Decode(b []byte) (*Array, error) {
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: no .npy magic", ErrFormat)
	}
	major := b[len(magic)]
	rest := b[len(magic)+2:]
	var hl uint64
	switch major {
	case 1:
		hl, rest = uint64(binary.LittleEndian.Uint16(rest)), rest[2:]
	case 2, 3:
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: truncated header length", ErrFormat)
		}
		hl, rest = uint64(binary.LittleEndian.Uint32(rest)), rest[4:]
	default:
		return nil, fmt.Errorf("%w: format version %d.%d is not supported", ErrFormat, major, b[len(magic)+1])
	}
	if hl > maxHeader {
		return nil, fmt.Errorf("%w: header length %d exceeds the limit of %d", ErrFormat, hl, maxHeader)
	}
	if hl > uint64(len(rest)) {
		return nil, fmt.Errorf("%w: header length %d, but only %d bytes follow (truncated?)", ErrFormat, hl, len(rest))
	}
	a, err := parseHeader(string(rest[:hl]))
	if err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	data := rest[hl:]
	n, err := binfmt.Elements(a.Shape, 4)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if int64(len(data)) != 4*n {
		return nil, fmt.Errorf("%w: shape %v of %s takes %d bytes of data, the file has %d (truncated or trailing bytes)", ErrFormat, a.Shape, a.DType, 4*n, len(data))
	}
	switch a.DType {
	case Float32:
		a.Float32s = make([]float32, n)
		for i := range a.Float32s {
			a.Float32s[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case Int32:
		a.Int32s = make([]int32, n)
		for i := range a.Int32s {
			a.Int32s[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
		}
	}
	return a, nil
}
