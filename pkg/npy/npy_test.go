package npy

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/binfmt/binfmttest"
)

func TestRoundTrip(t *testing.T) {
	f := []float32{1, -2.5, float32(math.NaN()), 3e-39, 0, 7}
	b, err := EncodeFloat32([]int{2, 3}, f)
	if err != nil {
		t.Fatal(err)
	}
	hl := int(binary.LittleEndian.Uint16(b[8:]))
	if (10+hl)%64 != 0 || b[9+hl] != '\n' {
		t.Errorf("data starts at byte %d (want a multiple of 64) after %q", 10+hl, b[10:10+hl])
	}
	if want := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"; !strings.HasPrefix(string(b[10:]), want) {
		t.Errorf("header %q, want %q", b[10:10+hl], want)
	}
	a, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if a.DType != Float32 || !slices.Equal(a.Shape, []int{2, 3}) || len(a.Float32s) != 6 || a.Int32s != nil {
		t.Fatalf("decoded %+v", a)
	}
	for i := range f {
		if math.Float32bits(a.Float32s[i]) != math.Float32bits(f[i]) {
			t.Errorf("[%d] = %v, want %v", i, a.Float32s[i], f[i])
		}
	}
	ints := []int32{3, -1, math.MaxInt32, math.MinInt32}
	b, err = EncodeInt32([]int{4}, ints)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "'shape': (4,)") {
		t.Errorf("a 1-d shape is not written as a one-element tuple: %q", b[10:])
	}
	a, err = Decode(b)
	if err != nil || a.DType != Int32 || !slices.Equal(a.Shape, []int{4}) || !slices.Equal(a.Int32s, ints) {
		t.Fatalf("decoded %+v, %v", a, err)
	}
	b, err = EncodeFloat32([]int{}, []float32{5})
	if err != nil {
		t.Fatal(err)
	}
	if a, err = Decode(b); err != nil || len(a.Shape) != 0 || !slices.Equal(a.Float32s, []float32{5}) {
		t.Errorf("scalar: %+v, %v", a, err)
	}
	if _, err := EncodeInt32([]int{2, 2}, ints[:3]); err == nil {
		t.Error("3 values encoded as 2x2")
	}
}

// TestDecodeNumPyHeaders decodes headers written as NumPy writes them, versions 1.0 and 2.0.
func TestDecodeNumPyHeaders(t *testing.T) {
	file := func(major byte, h string, data []byte) []byte {
		b := append([]byte(magic), major, 0)
		if major == 1 {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
		}
		return append(append(b, h...), data...)
	}
	one := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))
	for name, b := range map[string][]byte{
		"v1":        file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }      \n", one),
		"v2":        file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }\n", one),
		"no comma":  file(1, "{'descr':'<f4','fortran_order':False,'shape':(1,)}\n", one),
		"key order": file(1, "{'shape': (1,), 'fortran_order': False, 'descr': '<f4'}\n", one),
	} {
		a, err := Decode(b)
		if err != nil || !slices.Equal(a.Float32s, []float32{1}) {
			t.Errorf("%s: %+v, %v", name, a, err)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	file := func(h string, data int) []byte {
		b := append([]byte(magic), 1, 0)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
		return append(append(b, h...), make([]byte, data)...)
	}
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"magic":       {[]byte("PK\x03\x04 a zip file"), "magic"},
		"version":     {append([]byte(magic), 9, 0, 0, 0), "version 9.0"},
		"complex":     {file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }\n", 8), `dtype "<c8"`},
		"big-endian":  {file("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", 4), `dtype ">f4"`},
		"fortran":     {file("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }\n", 4), "C order"},
		"short data":  {file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 4), "truncated"},
		"long data":   {file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 8), "trailing"},
		"header":      {file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 4)[:20], "truncated"},
		"no shape":    {file("{'descr': '<f4', 'fortran_order': False}\n", 4), "want descr"},
		"duplicate":   {file("{'descr': '<f4', 'descr': '<f4', 'shape': (1,)}\n", 4), "twice"},
		"unknown key": {file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", 4), "unknown key"},
		"dimension":   {file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n", 4), "dimension"},
		"overflow":    {file("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }\n", 4), "too large"},
		"not a dict":  {file("['descr']\n", 0), "want a dict"},
	}
	for name, c := range cases {
		_, err := Decode(c.b)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrFormat saying %q", name, err, c.want)
		}
	}
}

func TestDecodeTruncated(t *testing.T) {
	b, err := EncodeInt32([]int{3, 2}, []int32{1, 2, 3, 4, 5, 6})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("%d of %d bytes: %v, want ErrFormat", n, len(b), err)
		}
	}
}

// FuzzDecode checks that no input makes Decode panic and that what it accepts encodes back to
// an array of the same type, shape and values.
func FuzzDecode(f *testing.F) {
	floats, _ := EncodeFloat32([]int{2, 2}, []float32{1, 2, 3, 4})
	ints, _ := EncodeInt32([]int{3}, []int32{1, 2, 3})
	longs, _ := EncodeInt64([]int{2, 1}, []int64{1, -2})
	doubles, _ := EncodeFloat64([]int{1}, []float64{0.5})
	bools, _ := EncodeBool([]int{3}, []bool{true, false, true})
	binfmttest.FuzzRoundTrip(f, [][]byte{floats, ints, longs, doubles, bools, []byte(magic)}, ErrFormat, Decode, Encode, sameArray)
}

// sameArray reports whether a and b have the same dtype, shape and bits.
func sameArray(a, b *Array) bool {
	ea, erra := Encode(a)
	eb, errb := Encode(b)
	return erra == nil && errb == nil && a.DType == b.DType && slices.Equal(a.Shape, b.Shape) && string(ea) == string(eb)
}

func TestRoundTripDTypes(t *testing.T) {
	for _, a := range []*Array{
		{DType: Float64, Shape: []int{2}, Float64s: []float64{1e300, -0.25}},
		{DType: Int64, Shape: []int{2, 2}, Int64s: []int64{math.MaxInt64, math.MinInt64, 0, 5}},
		{DType: Bool, Shape: []int{3}, Bools: []bool{true, false, true}},
	} {
		b, err := Encode(a)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "'descr': '"+a.DType+"'") {
			t.Errorf("%s: header %q", a.DType, b[10:])
		}
		back, err := Decode(b)
		if err != nil || !sameArray(a, back) || back.Len() != a.Len() {
			t.Errorf("%s: decoded %+v, %v; want %+v", a.DType, back, err, a)
		}
	}
	b, _ := EncodeBool([]int{2}, []bool{true, false})
	b[len(b)-1] = 2
	if _, err := Decode(b); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "bool element 1 is byte 2") {
		t.Errorf("bool byte 2: %v", err)
	}
}

func TestLongHeaderUsesVersion2(t *testing.T) {
	shape := make([]int, 30000) // a header over 64 KiB
	for i := range shape {
		shape[i] = 1
	}
	b, err := EncodeInt32(shape, []int32{9})
	if err != nil {
		t.Fatal(err)
	}
	hl := int(binary.LittleEndian.Uint32(b[8:]))
	if b[6] != 2 || (12+hl)%64 != 0 {
		t.Errorf("version %d, data at byte %d", b[6], 12+hl)
	}
	a, err := Decode(b)
	if err != nil || len(a.Shape) != 30000 || !slices.Equal(a.Int32s, []int32{9}) {
		t.Errorf("decoded %d dims %v, %v", len(a.Shape), a.Int32s, err)
	}
}
