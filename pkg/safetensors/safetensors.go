package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/dorylus-gnn/dorylus/internal/binfmt"
)

// ErrFormat is wrapped by every error Decode returns for a file that is not valid safetensors.
var ErrFormat = errors.New("safetensors: malformed file")

// MaxHeader is the largest header Decode accepts, the format's own limit (100 MB).
const MaxHeader = 100 << 20

// DTypeF32 is the dtype of every tensor this package writes and reads.
const DTypeF32 = "F32"

// metadataKey is the header entry holding free-form string metadata.
const metadataKey = "__metadata__"

// Tensor is one named float32 tensor, row-major.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// entry is the header record of one tensor.
type entry struct {
	DType       string   `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Encode returns the safetensors file holding tensors, in the order given, and metadata (may be
// nil). Names must be unique, non-empty and not "__metadata__"; each tensor's data must have as
// many elements as its shape.
func Encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	header := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		header[metadataKey] = metadata
	}
	var off int64
	for _, t := range tensors {
		if t.Name == "" || t.Name == metadataKey {
			return nil, fmt.Errorf("safetensors: bad tensor name %q", t.Name)
		}
		if _, dup := header[t.Name]; dup {
			return nil, fmt.Errorf("safetensors: tensor %q given twice", t.Name)
		}
		n, err := binfmt.Elements(t.Shape, 4)
		if err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", t.Name, err)
		}
		if n != int64(len(t.Data)) {
			return nil, fmt.Errorf("safetensors: %s: %d values for shape %v", t.Name, len(t.Data), t.Shape)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{} // a scalar: [] in the header, not null
		}
		header[t.Name] = entry{DType: DTypeF32, Shape: shape, DataOffsets: [2]int64{off, off + 4*n}}
		off += 4 * n
	}
	h, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	// Pad the header with spaces so that the data starts 8-byte aligned, as the format allows.
	if pad := (8 - len(h)%8) % 8; pad > 0 {
		h = append(h, bytes.Repeat([]byte{' '}, pad)...)
	}
	out := make([]byte, 8, 8+len(h)+int(off))
	binary.LittleEndian.PutUint64(out, uint64(len(h)))
	out = append(out, h...)
	for _, t := range tensors {
		for _, v := range t.Data {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out, nil
}

// File is a decoded safetensors file.
type File struct {
	Tensors  []Tensor          // in the order of their data
	Metadata map[string]string // nil when the file has none
}

// Get returns the tensor called name.
func (f *File) Get(name string) (Tensor, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// Decode parses a whole safetensors file. The tensors must be F32, their offsets must match
// their shapes and cover the data section exactly, back to back.
func Decode(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrFormat, len(b))
	}
	hl := binary.LittleEndian.Uint64(b)
	if hl > MaxHeader {
		return nil, fmt.Errorf("%w: header length %d exceeds the limit of %d", ErrFormat, hl, MaxHeader)
	}
	if hl > uint64(len(b)-8) {
		return nil, fmt.Errorf("%w: header length %d, but only %d bytes follow (truncated?)", ErrFormat, hl, len(b)-8)
	}
	h, data := b[8:8+hl], b[8+hl:]
	if len(h) == 0 || h[0] != '{' {
		return nil, fmt.Errorf("%w: the header does not start with '{'", ErrFormat)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(h, &raw); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	f := &File{}
	if m, ok := raw[metadataKey]; ok {
		if err := json.Unmarshal(m, &f.Metadata); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFormat, metadataKey, err)
		}
		delete(raw, metadataKey)
	}
	type located struct {
		name string
		e    entry
	}
	entries := make([]located, 0, len(raw))
	for name, r := range raw {
		var e entry
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrFormat, name, err)
		}
		if e.DType != DTypeF32 {
			return nil, fmt.Errorf("%w: tensor %q has dtype %q; only %s is supported", ErrFormat, name, e.DType, DTypeF32)
		}
		n, err := binfmt.Elements(e.Shape, 4)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrFormat, name, err)
		}
		if lo, hi := e.DataOffsets[0], e.DataOffsets[1]; lo < 0 || hi < lo || hi-lo != 4*n {
			return nil, fmt.Errorf("%w: tensor %q: offsets [%d, %d) do not hold shape %v of %s (%d bytes)", ErrFormat, name, lo, hi, e.Shape, e.DType, 4*n)
		}
		entries = append(entries, located{name, e})
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].e.DataOffsets, entries[j].e.DataOffsets
		if a != b {
			return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
		}
		return entries[i].name < entries[j].name // empty tensors share an offset
	})
	var end int64
	for _, l := range entries {
		if lo := l.e.DataOffsets[0]; lo != end {
			return nil, fmt.Errorf("%w: tensor %q starts at byte %d of the data, want %d (overlap or hole)", ErrFormat, l.name, lo, end)
		}
		end = l.e.DataOffsets[1]
	}
	if end != int64(len(data)) {
		return nil, fmt.Errorf("%w: the tensors take %d bytes of data, the file has %d (truncated or trailing bytes)", ErrFormat, end, len(data))
	}
	for _, l := range entries {
		lo, hi := l.e.DataOffsets[0], l.e.DataOffsets[1]
		v := make([]float32, (hi-lo)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[lo+4*int64(i):]))
		}
		f.Tensors = append(f.Tensors, Tensor{Name: l.name, Shape: slices.Clone(l.e.Shape), Data: v})
	}
	return f, nil
}
