package safetensors

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/binfmt/binfmttest"
)

func sample() []Tensor {
	return []Tensor{
		{Name: "layers.0.weight", Shape: []int{3, 2}, Data: []float32{1, -2, 3.5, float32(math.Inf(1)), 0, 1e-30}},
		{Name: "layers.0.bias", Shape: []int{2}, Data: []float32{0.25, -0.5}},
		{Name: "empty", Shape: []int{0, 4}, Data: nil},
		{Name: "scalar", Shape: []int{}, Data: []float32{7}},
	}
}

func TestRoundTrip(t *testing.T) {
	b, err := Encode(sample(), map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	hl := binary.LittleEndian.Uint64(b)
	if (8+hl)%8 != 0 {
		t.Errorf("data starts at byte %d, not 8-byte aligned", 8+hl)
	}
	if want := 8 + int(hl) + 4*(6+2+0+1); len(b) != want {
		t.Errorf("file of %d bytes, want %d", len(b), want)
	}
	f, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata)
	}
	for _, want := range sample() {
		got, ok := f.Get(want.Name)
		if !ok {
			t.Fatalf("%s missing", want.Name)
		}
		if !slices.Equal(got.Shape, want.Shape) || len(got.Data) != len(want.Data) {
			t.Errorf("%s: shape %v with %d values, want %v with %d", want.Name, got.Shape, len(got.Data), want.Shape, len(want.Data))
		}
		for i := range want.Data {
			if math.Float32bits(got.Data[i]) != math.Float32bits(want.Data[i]) {
				t.Errorf("%s[%d] = %v, want %v", want.Name, i, got.Data[i], want.Data[i])
			}
		}
	}
	// The tensors come back in the order of their data, which is the order they were given.
	var names []string
	for _, tn := range f.Tensors {
		names = append(names, tn.Name)
	}
	if want := []string{"layers.0.weight", "layers.0.bias", "empty", "scalar"}; !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
}

// TestDecodeByHand decodes a file assembled byte by byte as the format describes it.
func TestDecodeByHand(t *testing.T) {
	h := `{"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	b = append(b, h...)
	for _, v := range []float32{1.5, -1, 42} {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	f, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.Get("a")
	bb, _ := f.Get("b")
	if !slices.Equal(a.Data, []float32{1.5, -1}) || !slices.Equal(bb.Data, []float32{42}) || f.Metadata != nil {
		t.Errorf("decoded a=%v b=%v metadata=%v", a, bb, f.Metadata)
	}
}

func TestEncodeRefuses(t *testing.T) {
	for name, ts := range map[string][]Tensor{
		"count":     {{Name: "w", Shape: []int{2, 2}, Data: []float32{1, 2, 3}}},
		"duplicate": {{Name: "w", Shape: []int{1}, Data: []float32{1}}, {Name: "w", Shape: []int{1}, Data: []float32{1}}},
		"no name":   {{Shape: []int{1}, Data: []float32{1}}},
		"metadata":  {{Name: "__metadata__", Shape: []int{1}, Data: []float32{1}}},
		"negative":  {{Name: "w", Shape: []int{-1}}},
	} {
		if _, err := Encode(ts, nil); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestDecodeTruncated(t *testing.T) {
	b, err := Encode(sample(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		_, err := Decode(b[:n])
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("%d of %d bytes: %v, want ErrFormat", n, len(b), err)
		}
		if n > 8+int(binary.LittleEndian.Uint64(b)) && !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%d bytes: %q does not say truncated", n, err)
		}
	}
	if _, err := Decode(append(b, 0)); !errors.Is(err, ErrFormat) {
		t.Errorf("a trailing byte: %v, want ErrFormat", err)
	}
}

func TestDecodeMalformed(t *testing.T) {
	file := func(h string, data int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(b, h...), make([]byte, data)...)
	}
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"huge header":  {binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds the limit"},
		"not json":     {file(`{"a":`, 0), "header"},
		"not object":   {file(`[1]`, 0), "start with '{'"},
		"dtype":        {file(`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, 4), `dtype "F16"`},
		"offsets":      {file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), "do not hold shape"},
		"reversed":     {file(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4), "offsets"},
		"hole":         {file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "hole"},
		"overlap":      {file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "overlap"},
		"negative dim": {file(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0), "negative"},
		"overflow":     {file(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0), "too large"},
		"unknown":      {file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, 4), "unknown field"},
		"metadata":     {file(`{"__metadata__":{"a":1}}`, 0), "__metadata__"},
	}
	for name, c := range cases {
		_, err := Decode(c.b)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrFormat saying %q", name, err, c.want)
		}
	}
}

// FuzzDecode checks that no input makes Decode panic and that whatever it accepts encodes back
// to a file that decodes to the same tensors.
func FuzzDecode(f *testing.F) {
	b, err := Encode(sample(), map[string]string{"k": "v"})
	if err != nil {
		f.Fatal(err)
	}
	binfmttest.FuzzRoundTrip(f, [][]byte{b, b[:20], {}}, ErrFormat, Decode,
		func(file *File) ([]byte, error) { return Encode(file.Tensors, file.Metadata) },
		func(a, b *File) bool {
			return len(a.Tensors) == len(b.Tensors) && slices.EqualFunc(a.Tensors, b.Tensors, func(x, y Tensor) bool {
				return x.Name == y.Name && slices.Equal(x.Shape, y.Shape) && len(x.Data) == len(y.Data)
			})
		})
}
