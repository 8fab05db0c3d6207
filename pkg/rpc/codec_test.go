package rpc

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// sampleBatches are RowsBatches of every shape the exchange sends: forward rows at an offset,
// gradient rows with their ids, small (copied into the header) and large (sent as views).
func sampleBatches() []*RowsBatch {
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		return b
	}
	task := &TaskRef{Partition: 1, Interval: 3, Epoch: 9, Layer: 1, Kind: 2}
	return []*RowsBatch{
		{},
		{From: 1, Flow: Flow_FLOW_FORWARD, Task: task, Offset: 17, Data: &Tensor{Rows: 3, Cols: 2, Data: data(24)}},
		{From: 2, Flow: Flow_FLOW_GRADIENT, Task: task, Rows: data(4 * 300), Data: &Tensor{Rows: 300, Cols: 16, Data: data(4 * 300 * 16)}},
		{From: 3, Flow: Flow_FLOW_EVAL, Task: &TaskRef{}, Data: &Tensor{}},
		{Flow: Flow(-1), Offset: 1 << 31, Data: &Tensor{Rows: 1, Cols: 1 << 20, Data: data(4 << 20)}},
	}
}

// TestCodecIsProtobuf: Codec writes a RowsBatch byte for byte as proto.Marshal does (protobuf
// peers read it), and reads back exactly what was sent — from one buffer or from frames cut
// at any byte — its rows and data in the package's pool.
func TestCodecIsProtobuf(t *testing.T) {
	for i, b := range sampleBatches() {
		want, err := proto.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Codec.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("batch %d: codec wrote %d bytes, proto %d: they differ", i, len(got), len(want))
		}
		cuts := []int{len(want) / 2, 1, len(want) - 1}
		if len(want) < 200 {
			cuts = cuts[:0]
			for c := 1; c < len(want); c++ {
				cuts = append(cuts, c)
			}
		}
		for _, c := range append(cuts, 0) {
			back := new(RowsBatch)
			if err := Codec.Unmarshal(split(want, c), back); err != nil {
				t.Fatalf("batch %d cut at %d: %v", i, c, err)
			}
			if !proto.Equal(back, b) {
				t.Fatalf("batch %d cut at %d: read back %v, sent %v", i, c, back, b)
			}
			Recycle(back)
		}
	}
}

// split returns b as frames of a message, the first c bytes long (0: one frame).
func split(b []byte, c int) mem.BufferSlice {
	if c <= 0 || c >= len(b) {
		return mem.BufferSlice{mem.SliceBuffer(b)}
	}
	return mem.BufferSlice{mem.SliceBuffer(b[:c]), mem.SliceBuffer(b[c:])}
}

// TestCodecPushIsProtobuf: a PushRequest, its gradients sent as views, is written byte for byte
// as proto.Marshal writes it.
func TestCodecPushIsProtobuf(t *testing.T) {
	grad := func(l, n int) *LayerTensor {
		return &LayerTensor{Layer: uint32(l), Tensor: &Tensor{Rows: uint32(n), Cols: 4, Data: bytes.Repeat([]byte{byte(l + 1)}, 16*n)}}
	}
	for i, p := range []*PushRequest{
		{},
		{GraphServer: 1, Task: &TaskRef{Epoch: 3, Kind: 5}, Version: 1 << 40, Grads: []*LayerTensor{grad(0, 200), grad(1, 2), {}}, Keep: &Keep{Seq: 9, Pinned: []uint64{1, 5}, Newest: 7}},
		{Grads: []*LayerTensor{{Tensor: &Tensor{}}}, Keep: &Keep{}},
	} {
		want, _ := proto.Marshal(p)
		out, err := Codec.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("push %d: codec wrote %d bytes, proto %d: they differ", i, len(got), len(want))
		}
		back := new(PushRequest)
		if err := Codec.Unmarshal(split(want, len(want)/2), back); err != nil || !proto.Equal(back, p) {
			t.Fatalf("push %d read back as %v (%v)", i, back, err)
		}
	}
}

// TestCodecRefusesMalformed: a message cut short anywhere, a length beyond the message, a
// varint of 11 bytes, a group or a wire type that does not exist is refused with an error that
// says what is wrong, as protobuf refuses them; a payload whose size does not match its shape
// or is not whole float32 values is refused by the shape check, naming the sizes.
func TestCodecRefusesMalformed(t *testing.T) {
	b := sampleBatches()[2]
	whole, _ := proto.Marshal(b)
	for n := range len(whole) {
		if err := Codec.Unmarshal(split(whole[:n], n/2), new(RowsBatch)); err == nil && proto.Unmarshal(whole[:n], new(RowsBatch)) != nil {
			t.Fatalf("a message cut at byte %d of %d was read", n, len(whole))
		}
	}
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	for name, c := range map[string]struct {
		msg  []byte
		want string
	}{
		"rows longer than the message": {append(tag(5, protowire.BytesType), 0xff, 0x01, 1, 2, 3), "a field of 255 bytes with 3 left"},
		"data longer than its tensor":  {append(tag(6, protowire.BytesType), 3, 0x1a, 9, 1), "a field of 9 bytes with 1 left"},
		"tensor longer than message":   {append(tag(6, protowire.BytesType), 9, 0x08), "a field of 9 bytes with 1 left"},
		"varint of 11 bytes":           {append(tag(1, protowire.VarintType), bytes.Repeat([]byte{0xff}, 10)...), "varint overflows"},
		"a group":                      {tag(1, protowire.StartGroupType), "a group"},
		"wire type 7":                  {[]byte{1<<3 | 7}, "wire type 7"},
		"field number 0":               {[]byte{0x02, 0}, "field number 0"},
		"cut inside a tag":             {[]byte{0x80}, "truncated"},
	} {
		err := Codec.Unmarshal(split(c.msg, len(c.msg)/2), new(RowsBatch))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
		if proto.Unmarshal(c.msg, new(RowsBatch)) == nil {
			t.Errorf("%s: protobuf reads it: the codec must not be stricter", name)
		}
	}
	for _, bad := range []*Tensor{{Rows: 3, Cols: 2, Data: make([]byte, 23)}, {Rows: 3, Cols: 2, Data: make([]byte, 28)}, {Rows: 1, Cols: 6, Data: make([]byte, 24)}} {
		wire, _ := Codec.Marshal(&RowsBatch{Data: bad})
		back := new(RowsBatch)
		if err := Codec.Unmarshal(wire, back); err != nil {
			t.Fatal(err)
		}
		if err := back.Data.Shape(3, 2); err == nil || !strings.Contains(err.Error(), "bad tensor payload") {
			t.Errorf("a %d×%d tensor of %d bytes passed a 3×2 shape check: %v", bad.Rows, bad.Cols, len(bad.Data), err)
		}
	}
}

// TestCodecPoolsBuffers: an exchange of a 4 MiB batch — marshalled, unmarshalled and recycled
// — allocates a few small objects and none of the payload's size: the rows travel as views on
// the way out and land in reused buffers of the pool on the way in.
func TestCodecPoolsBuffers(t *testing.T) {
	b := sampleBatches()[4]
	back := new(RowsBatch)
	exchange := func() {
		out, err := Codec.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := Codec.Unmarshal(out, back); err != nil {
			t.Fatal(err)
		}
		out.Free()
		Recycle(back)
	}
	exchange()
	if n := testing.AllocsPerRun(20, exchange); n > 24 {
		t.Errorf("%.0f allocations per exchange, want at most 24", n)
	}
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		exchange()
	}
	runtime.ReadMemStats(&after)
	bytesPerRun := float64(after.TotalAlloc-before.TotalAlloc) / runs
	if bytesPerRun > 64<<10 && !raceEnabled {
		t.Errorf("%.0f bytes allocated per exchange of a %d-byte payload, want under 64 KiB", bytesPerRun, len(b.Data.Data))
	}
}

// TestRowsOverTheWire: a server of NewServer takes a RowsBatch from a client of Dial intact,
// refuses one over its limit with ResourceExhausted, and gets its pooled payload back after
// the handler (Recycle): the handler's view is cleared once the call is over.
func TestRowsOverTheWire(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := NewServer(WithMaxReceive(8 << 20))
	got := make(chan *RowsBatch, 1)
	RegisterGraphServerServer(srv, &rowsSink{got: got})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := NewGraphServerClient(conn)
	ctx := context.Background()
	for _, b := range sampleBatches() {
		if _, err := client.PushRows(ctx, b); err != nil {
			t.Fatal(err)
		}
		seen := <-got
		if seen.Data != nil && len(seen.Data.Data) != 0 {
			t.Errorf("the server kept a received batch's data after the call (%d bytes)", len(seen.Data.Data))
		}
	}
	over := &RowsBatch{Data: &Tensor{Rows: 1, Cols: 2 << 20, Data: make([]byte, 8<<20)}}
	if _, err := client.PushRows(ctx, over); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a batch over the server's limit: %v, want ResourceExhausted", err)
	}
}

// rowsSink checks each batch it is pushed against sampleBatches' and hands it on.
type rowsSink struct {
	UnimplementedGraphServerServer
	got  chan *RowsBatch
	next int
}

func (s *rowsSink) PushRows(_ context.Context, b *RowsBatch) (*Ack, error) {
	defer func() { s.got <- b }()
	want := sampleBatches()[s.next]
	s.next++
	if !proto.Equal(b, want) {
		return nil, status.Errorf(codes.InvalidArgument, "received %v, sent %v", b, want)
	}
	return &Ack{}, nil
}

// FuzzCodec: on any bytes, cut into frames anywhere, Codec reads a RowsBatch exactly as
// protobuf does, or refuses it where protobuf does (or where it holds a group, which no message
// of this protocol has); what it reads, it writes back as protobuf would.
func FuzzCodec(f *testing.F) {
	for _, b := range sampleBatches()[:4] {
		w, _ := proto.Marshal(b)
		f.Add(w, uint16(len(w)/3))
	}
	f.Fuzz(func(t *testing.T, msg []byte, cut uint16) {
		got, want := new(RowsBatch), new(RowsBatch)
		err := Codec.Unmarshal(split(msg, int(cut)), got)
		perr := proto.Unmarshal(msg, want)
		switch {
		case err != nil && perr == nil && !hasGroup(msg):
			t.Fatalf("refused what protobuf reads: %v", err)
		case err == nil && perr != nil:
			t.Fatalf("read what protobuf refuses (%v)", perr)
		case err != nil:
			return
		}
		// The codec drops unknown fields at the top and in the tensor; protobuf keeps them.
		want.ProtoReflect().SetUnknown(nil)
		if want.Data != nil {
			want.Data.ProtoReflect().SetUnknown(nil)
		}
		got.ProtoReflect().SetUnknown(nil)
		if got.Data != nil {
			got.Data.ProtoReflect().SetUnknown(nil)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("read %v, protobuf %v", got, want)
		}
		out, err := Codec.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := proto.Marshal(got); !bytes.Equal(out.Materialize(), w) {
			t.Fatal("wrote back other bytes than protobuf")
		}
		Recycle(got)
	})
}

// hasGroup reports whether msg, or a tensor (field 6) in it, holds a field of group wire type.
func hasGroup(msg []byte) bool {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return false
		}
		if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			return true
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return false
		}
		if num == 6 && typ == protowire.BytesType {
			if v, k := protowire.ConsumeBytes(msg[n:]); k >= 0 && hasGroup(v) {
				return true
			}
		}
		msg = msg[n+m:]
	}
	return false
}
