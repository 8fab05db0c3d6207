package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Codec is the gRPC codec of every server and client of this package: protobuf on the wire,
// byte for byte what proto.Marshal writes, so that any protobuf peer reads and writes it; only
// the paths of the bulk of the bytes avoid copies. It marshals a RowsBatch (the ghost
// exchange) and a PushRequest (gradients) as the caller's own rows and data bytes between
// small headers, without copying them (the caller must not change them until the call
// returns: both are requests, whose reply comes once the server has read them), and unmarshals one
// with its rows and data in buffers of the package's pool, copied once out of the transport's
// frames, that the server takes back after the handler returns (Recycle): a handler copies
// them where they belong and keeps no view of them. Every other message is marshalled into and
// parsed from buffers of that pool, which are not zeroed (every byte of them is written before
// it is read).
var Codec encoding.CodecV2 = codec{}

// viewMin is the size below which a bytes field is copied into the message's header rather
// than sent as a view of the caller's memory: a view costs a buffer of its own on the wire path.
const viewMin = 1 << 10

type codec struct{}

// Name is the content subtype of the protobuf codec, whose wire format this is.
func (codec) Name() string { return "proto" }

// Marshal returns v's protobuf encoding.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *RowsBatch:
		if plain(m, m.Data) {
			return marshalRows(m), nil
		}
	case *PushRequest:
		if plainPush(m) {
			return marshalPush(m), nil
		}
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rpc codec: cannot marshal %T, not a protobuf message", v)
	}
	size := proto.Size(m)
	if mem.IsBelowBufferPoolingThreshold(size) {
		out, err := proto.MarshalOptions{UseCachedSize: true}.Marshal(m)
		return mem.BufferSlice{mem.SliceBuffer(out)}, err
	}
	buf := buffers.Get(size)
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		buffers.Put(buf)
		return nil, err
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, buffers)}, nil
}

// Unmarshal parses data, protobuf, into v.
func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	if b, ok := v.(*RowsBatch); ok {
		r := data.Reader()
		defer r.Close()
		return unmarshalRows(&wireReader{r: r, left: r.Remaining()}, b)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("rpc codec: cannot unmarshal into %T, not a protobuf message", v)
	}
	if len(data) == 1 {
		return proto.Unmarshal(data[0].ReadOnlyData(), m)
	}
	buf := data.MaterializeToBuffer(buffers)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// plain reports whether m and the tensor t (nil: none) carry no unknown fields, which the
// view writers would drop.
func plain(m proto.Message, t *Tensor) bool {
	return len(m.ProtoReflect().GetUnknown()) == 0 && (t == nil || len(t.unknownFields) == 0)
}

// plainPush reports whether p and its gradients carry no unknown fields.
func plainPush(p *PushRequest) bool {
	for _, g := range p.Grads {
		if g == nil || !plain(g, g.Tensor) {
			return false
		}
	}
	return plain(p, nil)
}

// marshalRows encodes b as proto.Marshal does, fields in number order, with its rows and data
// bytes as views between the headers that it writes.
func marshalRows(b *RowsBatch) mem.BufferSlice {
	var w viewWriter
	w.varint(1, uint64(b.From))
	w.varint(2, uint64(int64(b.Flow)))
	w.message(3, b.Task)
	w.varint(4, uint64(b.Offset))
	w.bytes(5, b.Rows)
	w.tensor(6, b.Data)
	return w.done()
}

// marshalPush encodes p as proto.Marshal does, its gradients' data as views.
func marshalPush(p *PushRequest) mem.BufferSlice {
	var w viewWriter
	w.varint(1, uint64(p.GraphServer))
	w.message(2, p.Task)
	w.varint(3, p.Version)
	for _, g := range p.Grads {
		n := 0
		if g.Layer != 0 {
			n += 1 + protowire.SizeVarint(uint64(g.Layer))
		}
		if g.Tensor != nil {
			n += 1 + protowire.SizeBytes(tensorSize(g.Tensor))
		}
		w.head = protowire.AppendTag(w.head, 4, protowire.BytesType)
		w.head = protowire.AppendVarint(w.head, uint64(n))
		w.varint(1, uint64(g.Layer))
		w.tensor(2, g.Tensor)
	}
	w.message(5, p.Keep)
	return w.done()
}

// tensorSize is the size of t's encoding.
func tensorSize(t *Tensor) int {
	n := 0
	if t.Rows != 0 {
		n += 1 + protowire.SizeVarint(uint64(t.Rows))
	}
	if t.Cols != 0 {
		n += 1 + protowire.SizeVarint(uint64(t.Cols))
	}
	if len(t.Data) > 0 {
		n += 1 + protowire.SizeBytes(len(t.Data))
	}
	return n
}

// viewWriter builds a message's encoding as small headers, written here, between views of
// large bytes fields.
type viewWriter struct {
	out  mem.BufferSlice
	head []byte
}

// varint writes field num with value v, unless v is 0 (proto3 leaves it out).
func (w *viewWriter) varint(num protowire.Number, v uint64) {
	if v != 0 {
		w.head = protowire.AppendTag(w.head, num, protowire.VarintType)
		w.head = protowire.AppendVarint(w.head, v)
	}
}

// bytes writes field num with value b, unless b is empty: copied if small, else as a view.
func (w *viewWriter) bytes(num protowire.Number, b []byte) {
	if len(b) == 0 {
		return
	}
	w.head = protowire.AppendTag(w.head, num, protowire.BytesType)
	w.head = protowire.AppendVarint(w.head, uint64(len(b)))
	if len(b) < viewMin {
		w.head = append(w.head, b...)
		return
	}
	w.flush()
	w.out = append(w.out, mem.SliceBuffer(b))
}

// message writes field num with the small message m (encoded here), unless m is nil.
func (w *viewWriter) message(num protowire.Number, m proto.Message) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return
	}
	w.head = protowire.AppendTag(w.head, num, protowire.BytesType)
	w.head = protowire.AppendVarint(w.head, uint64(proto.Size(m)))
	w.head, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(w.head, m) // varints and repeated varints cannot fail
}

// tensor writes field num with t, its data as bytes does, unless t is nil.
func (w *viewWriter) tensor(num protowire.Number, t *Tensor) {
	if t == nil {
		return
	}
	w.head = protowire.AppendTag(w.head, num, protowire.BytesType)
	w.head = protowire.AppendVarint(w.head, uint64(tensorSize(t)))
	w.varint(1, uint64(t.Rows))
	w.varint(2, uint64(t.Cols))
	w.bytes(3, t.Data)
}

func (w *viewWriter) flush() {
	if len(w.head) > 0 {
		w.out = append(w.out, mem.SliceBuffer(w.head))
		w.head = nil
	}
}

func (w *viewWriter) done() mem.BufferSlice {
	w.flush()
	return w.out
}

// errTruncated is wrapped by the error of a message that ends inside a field.
var errTruncated = errors.New("truncated message")

// unmarshalRows parses a RowsBatch from r: its rows (5) and its tensor's data (6.3) straight
// into pooled buffers, every other field — TaskRef, scalars, unknown fields — gathered as
// encoded and parsed by proto.Unmarshal, which refuses what it refuses anywhere. A field
// that occurs again replaces (a scalar, bytes) or merges into (a message) what came before,
// as in protobuf.
func unmarshalRows(r *wireReader, b *RowsBatch) error {
	var rest, tensorRest []byte
	var rows, data []byte
	tensor := false
	defer func() { release(rows); release(data) }() // what an error leaves held
	for r.left > 0 {
		num, typ, err := r.tag()
		if err != nil {
			return err
		}
		if typ != protowire.BytesType || (num != 5 && num != 6) {
			if rest, err = r.copyField(rest, num, typ); err != nil {
				return err
			}
			continue
		}
		n, err := r.length()
		if err != nil {
			return err
		}
		if num == 5 {
			release(rows)
			if rows, err = r.pooled(n); err != nil {
				return err
			}
			continue
		}
		tensor = true
		if tensorRest, data, err = unmarshalTensor(r.sub(n), tensorRest, data); err != nil {
			return fmt.Errorf("data: %w", err)
		}
		r.left -= n
	}
	if err := proto.Unmarshal(rest, b); err != nil {
		return err
	}
	if tensor {
		b.Data = new(Tensor)
		if err := proto.Unmarshal(tensorRest, b.Data); err != nil {
			return fmt.Errorf("data: %w", err)
		}
		b.Data.Data, data = data, nil
	}
	b.Rows, rows = rows, nil
	return nil
}

// unmarshalTensor parses one occurrence of a Tensor from r: its data (3) into a pooled buffer
// that replaces data, every other field appended to rest as encoded.
func unmarshalTensor(r *wireReader, rest, data []byte) ([]byte, []byte, error) {
	for r.left > 0 {
		num, typ, err := r.tag()
		if err != nil {
			return rest, data, err
		}
		if typ != protowire.BytesType || num != 3 {
			if rest, err = r.copyField(rest, num, typ); err != nil {
				return rest, data, err
			}
			continue
		}
		n, err := r.length()
		if err != nil {
			return rest, data, err
		}
		release(data)
		if data, err = r.pooled(n); err != nil {
			return rest, nil, err
		}
	}
	return rest, data, nil
}

// Recycle gives the rows and data of a RowsBatch that Codec unmarshalled back to the pool;
// nothing may use them after. The server calls it when the handler returns.
func Recycle(b *RowsBatch) {
	release(b.Rows)
	b.Rows = nil
	if b.Data != nil {
		release(b.Data.Data)
		b.Data.Data = nil
	}
}

// release returns b, a buffer of the pool (or nil), to it.
func release(b []byte) {
	if cap(b) > 0 {
		buffers.Put(&b)
	}
}

// wireReader reads protobuf fields from a mem.Reader, at most left bytes of it.
type wireReader struct {
	r    *mem.Reader
	left int
}

// sub returns a reader of the next n bytes (the caller then skips them: r.left -= n).
func (r *wireReader) sub(n int) *wireReader { return &wireReader{r: r.r, left: n} }

func (r *wireReader) varint() (uint64, error) {
	var v uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if r.left == 0 {
			return 0, errTruncated
		}
		c, err := r.r.ReadByte()
		if err != nil {
			return 0, errTruncated
		}
		r.left--
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint overflows 64 bits")
}

// tag reads a field's tag; a field number outside protobuf's range or a group (which no
// message of this protocol has) is refused.
func (r *wireReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := r.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.Number(v>>3), protowire.Type(v&7)
	switch {
	case v>>3 > uint64(protowire.MaxValidNumber) || num < protowire.MinValidNumber:
		return 0, 0, fmt.Errorf("field number %d out of range", v>>3)
	case typ == protowire.StartGroupType || typ == protowire.EndGroupType:
		return 0, 0, fmt.Errorf("field %d: a group, which this protocol does not use", num)
	case typ != protowire.VarintType && typ != protowire.Fixed32Type && typ != protowire.Fixed64Type && typ != protowire.BytesType:
		return 0, 0, fmt.Errorf("field %d: wire type %d", num, typ)
	}
	return num, typ, nil
}

// length reads the length of a bytes field, which must be within the message.
func (r *wireReader) length() (int, error) {
	v, err := r.varint()
	if err != nil {
		return 0, err
	}
	if v > uint64(r.left) {
		return 0, fmt.Errorf("%w: a field of %d bytes with %d left", errTruncated, v, r.left)
	}
	return int(v), nil
}

// pooled reads the next n bytes into a buffer of the pool.
func (r *wireReader) pooled(n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b := (*buffers.Get(n))[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		release(b)
		return nil, errTruncated
	}
	r.left -= n
	return b, nil
}

// copyField appends field num of type typ, its value read from r, to out as encoded.
func (r *wireReader) copyField(out []byte, num protowire.Number, typ protowire.Type) ([]byte, error) {
	out = protowire.AppendTag(out, num, typ)
	var n int
	switch typ {
	case protowire.VarintType:
		v, err := r.varint()
		return protowire.AppendVarint(out, v), err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	default:
		var err error
		if n, err = r.length(); err != nil {
			return out, err
		}
		out = protowire.AppendVarint(out, uint64(n))
	}
	if n > r.left {
		return out, errTruncated
	}
	out = append(out, make([]byte, n)...)
	if _, err := io.ReadFull(r.r, out[len(out)-n:]); err != nil {
		return out, errTruncated
	}
	r.left -= n
	return out, nil
}
