package dispatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// WireVersion is the version of the request and result encoding this build writes and reads.
//
// A request is a 72-byte header followed by its tensors; all integers are little-endian:
//
//	offset size  field
//	 0      4    magic "DRYQ" (a result: "DRYS")
//	 4      2    version
//	 6      1    op
//	 7      1    flags: bit 0 train; bits 1–2 the weight half (TaskRequest.WeightHalf)
//	 8      4    layer
//	12      4    model layers
//	16      4    model input width
//	20      4    model hidden width (GAT: per head)
//	24      4    model classes
//	28      4    model dropout, float32 bits
//	32      8    row offset (a result: the loss, float64 bits)
//	40      8    dropout key
//	48      8    total training rows
//	56      4    number of tensors
//	60      4    GAT: heads of the hidden layers (0 for the GCN ops)
//	64      4    GAT: heads of the output layer
//	68      4    GAT: attention dropout, float32 bits
//
// The model fields describe TaskRequest.GAT for the GAT ops (Op.IsGAT) and TaskRequest.Model
// otherwise.
//
// Each tensor has a 24-byte header — role (1 byte), type (1), reserved (2), rows (4), columns
// (4), reserved (4), entries (8) — then its data: a dense block as rows·cols float32 values
// row-major; an int32 vector as entries values; a CSR as int64 row offsets (rows+1), int32
// column indices (entries) and, for the valued type, float32 values (entries).
//
// Version 3 added the rows' original ids (TaskRequest.RowIDs, an int32 vector), which key the
// dropout masks of a renumbered partition: a version-2 caller would draw other masks.
// Version 4 added the job's function identity to descriptors (Descriptor.Identity).
// Version 5 took the private key out of descriptors: they carry the job's CA certificate and,
// on a second try, a certificate chain for the function's own key (Descriptor.CA, Chain).
// Version 6 added the weight half (flags bits 1–2), by which a GraphSAGE task of the pull data
// path names W_self or W_neigh of the layer's weight a function pulls.
const WireVersion = 6

// ErrWireVersion is wrapped by the error a decoder returns for another version's bytes.
var ErrWireVersion = errors.New("unsupported tensor task wire version")

const (
	wireHeader       = 72
	wireTensorHeader = 24
	magicRequest     = "DRYQ"
	magicResult      = "DRYS"
)

// Tensor roles.
const (
	roleFeatures = 1 + iota
	roleZ
	roleW
	roleDP
	roleLabels
	roleRows
	roleOut
	roleDW
	roleADst
	roleASrc
	rolePrevBias
	roleP
	roleDDst
	roleDSrc
	roleAdj
	roleDstScore
	roleSrcScore
	roleSrcIDs
	roleDAlpha
	roleResDst
	roleResSrc
	roleDADst
	roleDASrc
	roleDBias
	roleRowIDs
)

// Tensor types.
const (
	typeDense = 1 + iota
	typeInt32
	typeCSR       // with values
	typeCSRUnit   // values all 1
	maxWireValues = 1 << 31
)

var le = binary.LittleEndian

// EncodeRequest returns the wire bytes of req (its Out, DW and Act are not sent).
func EncodeRequest(req *TaskRequest) []byte {
	b := make([]byte, wireHeader, wireHeader+requestSize(req))
	putRequestHeader(b, magicRequest, req)
	count := 0
	if f := req.Features; f.Sparse != nil {
		b, count = appendCSR(b, roleFeatures, f.Sparse), count+1
	} else if f.Dense != nil {
		b, count = appendDense(b, roleFeatures, f.Dense), count+1
	}
	for _, t := range requestTensors(req) {
		if t.d != nil {
			b, count = appendDense(b, t.role, t.d), count+1
		}
	}
	if req.Adj != nil {
		b, count = appendCSR(b, roleAdj, req.Adj), count+1
	}
	for _, t := range []struct {
		role byte
		v    []int32
	}{{roleLabels, req.Labels}, {roleRows, req.Rows}, {roleSrcIDs, req.SrcIDs}, {roleRowIDs, req.RowIDs}} {
		if t.v != nil {
			b, count = appendInts(b, t.role, t.v), count+1
		}
	}
	le.PutUint32(b[56:], uint32(count))
	return b
}

// putRequestHeader writes the fixed header of a request or descriptor, without its tensor count.
func putRequestHeader(b []byte, magic string, req *TaskRequest) {
	copy(b, magic)
	le.PutUint16(b[4:], WireVersion)
	b[6] = byte(req.Op)
	if req.Train {
		b[7] = 1
	}
	b[7] |= byte(req.WeightHalf&3) << 1
	le.PutUint32(b[8:], uint32(req.Layer))
	if req.Op.IsGAT() {
		g := req.GAT
		putModel(b, g.Layers, g.InDim, g.Hidden, g.Classes, g.Dropout)
		le.PutUint32(b[60:], uint32(g.Heads))
		le.PutUint32(b[64:], uint32(g.OutHeads))
		le.PutUint32(b[68:], math.Float32bits(g.AttentionDropout))
	} else {
		m := req.Model
		putModel(b, m.Layers, m.InDim, m.Hidden, m.Classes, m.Dropout)
	}
	le.PutUint64(b[32:], uint64(req.RowOffset))
	le.PutUint64(b[40:], req.Key)
	le.PutUint64(b[48:], uint64(req.Total))
}

// roleTensor is a dense tensor with its wire role.
type roleTensor struct {
	role byte
	d    *tensor.Dense
}

// requestTensors returns the dense tensors of a request, in wire order.
func requestTensors(req *TaskRequest) []roleTensor {
	return []roleTensor{{roleZ, req.Z}, {roleW, req.W}, {roleDP, req.DP}, {roleADst, req.ADst}, {roleASrc, req.ASrc},
		{rolePrevBias, req.PrevBias}, {roleP, req.P}, {roleDDst, req.DDst}, {roleDSrc, req.DSrc},
		{roleDstScore, req.DstScore}, {roleSrcScore, req.SrcScore}, {roleDAlpha, req.DAlpha}}
}

// resultTensors returns the dense tensors of a result, in wire order.
func resultTensors(res *TaskResult) []roleTensor {
	return []roleTensor{{roleOut, res.Out}, {roleDW, res.DW}, {roleResDst, res.Dst}, {roleResSrc, res.Src},
		{roleDADst, res.DADst}, {roleDASrc, res.DASrc}, {roleDBias, res.DBias}}
}

// putModel writes a model's fields into a request header.
func putModel(b []byte, layers, in, hidden, classes int, dropout float32) {
	le.PutUint32(b[12:], uint32(layers))
	le.PutUint32(b[16:], uint32(in))
	le.PutUint32(b[20:], uint32(hidden))
	le.PutUint32(b[24:], uint32(classes))
	le.PutUint32(b[28:], math.Float32bits(dropout))
}

// requestSize estimates the bytes of req's tensors.
func requestSize(req *TaskRequest) int {
	n := 20 * wireTensorHeader
	for _, t := range requestTensors(req) {
		if t.d != nil {
			n += 4 * len(t.d.Data)
		}
	}
	if d := req.Features.Dense; d != nil {
		n += 4 * len(d.Data)
	}
	for _, s := range []*tensor.CSR{req.Features.Sparse, req.Adj} {
		if s != nil {
			n += 8*len(s.RowPtr) + 8*len(s.ColIdx)
		}
	}
	return n + 4*len(req.Labels) + 4*len(req.Rows) + 4*len(req.SrcIDs) + 4*len(req.RowIDs)
}

func appendTensorHeader(b []byte, role, typ byte, rows, cols int, entries int64) []byte {
	b = append(b, role, typ, 0, 0)
	b = le.AppendUint32(b, uint32(rows))
	b = le.AppendUint32(b, uint32(cols))
	b = le.AppendUint32(b, 0)
	return le.AppendUint64(b, uint64(entries))
}

func appendDense(b []byte, role byte, d *tensor.Dense) []byte {
	b = appendTensorHeader(b, role, typeDense, d.Rows, d.Cols, int64(len(d.Data)))
	b, _ = binary.Append(b, le, d.Data)
	return b
}

func appendInts(b []byte, role byte, v []int32) []byte {
	b = appendTensorHeader(b, role, typeInt32, len(v), 1, int64(len(v)))
	b, _ = binary.Append(b, le, v)
	return b
}

func appendCSR(b []byte, role byte, m *tensor.CSR) []byte {
	typ := byte(typeCSR)
	if m.Val == nil {
		typ = typeCSRUnit
	}
	b = appendTensorHeader(b, role, typ, m.Rows, m.Cols, int64(len(m.ColIdx)))
	b, _ = binary.Append(b, le, m.RowPtr)
	b, _ = binary.Append(b, le, m.ColIdx)
	if m.Val != nil {
		b, _ = binary.Append(b, le, m.Val)
	}
	return b
}

// EncodeResult returns the wire bytes of a task's result.
func EncodeResult(op Op, res TaskResult) []byte {
	b := make([]byte, wireHeader)
	copy(b, magicResult)
	le.PutUint16(b[4:], WireVersion)
	b[6] = byte(op)
	le.PutUint64(b[32:], math.Float64bits(res.Loss))
	count := 0
	for _, t := range resultTensors(&res) {
		if t.d != nil {
			b, count = appendDense(b, t.role, t.d), count+1
		}
	}
	le.PutUint32(b[56:], uint32(count))
	return b
}

// wireReader walks the bytes of a request or result.
type wireReader struct {
	b    []byte
	what string
}

func (r *wireReader) fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrRequest, r.what, fmt.Sprintf(format, args...))
}

// header checks the fixed header and returns it.
func (r *wireReader) header(magic string) ([]byte, error) {
	if len(r.b) < wireHeader || string(r.b[:4]) != magic {
		return nil, r.fail("%d bytes without the %q header", len(r.b), magic)
	}
	if v := le.Uint16(r.b[4:]); v != WireVersion {
		return nil, fmt.Errorf("%w: %s of wire version %d, this build reads version %d", ErrWireVersion, r.what, v, WireVersion)
	}
	h := r.b[:wireHeader]
	r.b = r.b[wireHeader:]
	return h, nil
}

// take returns the next n bytes.
func (r *wireReader) take(n int64, what string) ([]byte, error) {
	if n < 0 || n > int64(len(r.b)) {
		return nil, r.fail("%s: %d bytes wanted, %d left", what, n, len(r.b))
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out, nil
}

// decodeSlice reads n little-endian values of T.
func decodeSlice[T int32 | int64 | float32](r *wireReader, n int64, what string) ([]T, error) {
	if n < 0 || n > maxWireValues {
		return nil, r.fail("%s: %d values", what, n)
	}
	var zero T
	raw, err := r.take(n*int64(binary.Size(zero)), what)
	if err != nil {
		return nil, err
	}
	out := make([]T, n)
	if _, err := binary.Decode(raw, le, out); err != nil {
		return nil, r.fail("%s: %v", what, err)
	}
	return out, nil
}

// tensorValue is one decoded tensor.
type tensorValue struct {
	role  byte
	dense *tensor.Dense
	ints  []int32
	csr   *tensor.CSR
}

func (r *wireReader) tensor() (tensorValue, error) {
	h, err := r.take(wireTensorHeader, "tensor header")
	if err != nil {
		return tensorValue{}, err
	}
	t := tensorValue{role: h[0]}
	rows, cols, entries := int64(le.Uint32(h[4:])), int64(le.Uint32(h[8:])), int64(le.Uint64(h[16:]))
	switch h[1] {
	case typeDense:
		if rows*cols != entries {
			return t, r.fail("dense tensor %dx%d with %d values", rows, cols, entries)
		}
		data, err := decodeSlice[float32](r, entries, "dense tensor")
		if err != nil {
			return t, err
		}
		t.dense = &tensor.Dense{Rows: int(rows), Cols: int(cols), Data: data}
	case typeInt32:
		t.ints, err = decodeSlice[int32](r, entries, "int32 vector")
	case typeCSR, typeCSRUnit:
		m := &tensor.CSR{Rows: int(rows), Cols: int(cols)}
		if m.RowPtr, err = decodeSlice[int64](r, rows+1, "csr offsets"); err != nil {
			return t, err
		}
		if m.ColIdx, err = decodeSlice[int32](r, entries, "csr columns"); err != nil {
			return t, err
		}
		if h[1] == typeCSR {
			if m.Val, err = decodeSlice[float32](r, entries, "csr values"); err != nil {
				return t, err
			}
		}
		if err := csrCheck(m); err != nil { // the one full check: the request's Validate checks sizes only
			return t, r.fail("%v", err)
		}
		t.csr = m
	default:
		return t, r.fail("tensor of unknown type %d", h[1])
	}
	return t, err
}

// DecodeRequest decodes the bytes of EncodeRequest and checks every entry of its CSRs (ordered,
// in range); the request's shapes are checked when it is executed.
func DecodeRequest(b []byte) (TaskRequest, error) {
	r := &wireReader{b: b, what: "tensor task request"}
	h, err := r.header(magicRequest)
	if err != nil {
		return TaskRequest{}, err
	}
	req := requestOfHeader(h)
	dense := map[byte]**tensor.Dense{roleZ: &req.Z, roleW: &req.W, roleDP: &req.DP, roleADst: &req.ADst, roleASrc: &req.ASrc,
		rolePrevBias: &req.PrevBias, roleP: &req.P, roleDDst: &req.DDst, roleDSrc: &req.DSrc, roleDstScore: &req.DstScore,
		roleSrcScore: &req.SrcScore, roleDAlpha: &req.DAlpha}
	for range le.Uint32(h[56:]) {
		t, err := r.tensor()
		if err != nil {
			return TaskRequest{}, err
		}
		switch {
		case t.role == roleFeatures && t.csr != nil:
			req.Features = graph.Features{Sparse: t.csr}
		case t.role == roleFeatures && t.dense != nil:
			req.Features = graph.Features{Dense: t.dense}
		case t.role == roleAdj && t.csr != nil:
			req.Adj = t.csr
		case dense[t.role] != nil && t.dense != nil:
			*dense[t.role] = t.dense
		case t.role == roleLabels && t.ints != nil:
			req.Labels = t.ints
		case t.role == roleRows && t.ints != nil:
			req.Rows = t.ints
		case t.role == roleSrcIDs && t.ints != nil:
			req.SrcIDs = t.ints
		case t.role == roleRowIDs && t.ints != nil:
			req.RowIDs = t.ints
		default:
			return TaskRequest{}, r.fail("unexpected tensor of role %d", t.role)
		}
	}
	if len(r.b) != 0 {
		return TaskRequest{}, r.fail("%d trailing bytes", len(r.b))
	}
	return req, nil
}

// requestOfHeader returns the request a fixed header describes, without tensors.
func requestOfHeader(h []byte) TaskRequest {
	req := TaskRequest{
		Op: Op(h[6]), Train: h[7]&1 != 0, WeightHalf: WeightHalf(h[7]>>1) & 3, Layer: int(le.Uint32(h[8:])),
		RowOffset: int(le.Uint64(h[32:])), Key: le.Uint64(h[40:]), Total: int(le.Uint64(h[48:])),
	}
	layers, in, hidden, classes := int(le.Uint32(h[12:])), int(le.Uint32(h[16:])), int(le.Uint32(h[20:])), int(le.Uint32(h[24:]))
	dropout := math.Float32frombits(le.Uint32(h[28:]))
	if req.Op.IsGAT() {
		req.GAT = model.GATConfig{InDim: in, Hidden: hidden, Heads: int(le.Uint32(h[60:])), OutHeads: int(le.Uint32(h[64:])),
			Classes: classes, Layers: layers, Dropout: dropout, AttentionDropout: math.Float32frombits(le.Uint32(h[68:]))}
	} else {
		req.Model = model.GCNConfig{InDim: in, Hidden: hidden, Classes: classes, Layers: layers, Dropout: dropout}
	}
	return req
}

// DecodeResult decodes the bytes of EncodeResult for a task of op. It copies each tensor into
// the matching buffer of into (TaskRequest.Destinations) when that is set and of the right shape.
func DecodeResult(b []byte, op Op, into TaskResult) (TaskResult, error) {
	r := &wireReader{b: b, what: "tensor task result"}
	h, err := r.header(magicResult)
	if err != nil {
		return TaskResult{}, err
	}
	if Op(h[6]) != op {
		return TaskResult{}, r.fail("result of %v for a %v request", Op(h[6]), op)
	}
	res := TaskResult{Loss: math.Float64frombits(le.Uint64(h[32:]))}
	fields := map[byte][2]**tensor.Dense{roleOut: {&res.Out, &into.Out}, roleDW: {&res.DW, &into.DW}, roleResDst: {&res.Dst, &into.Dst},
		roleResSrc: {&res.Src, &into.Src}, roleDADst: {&res.DADst, &into.DADst}, roleDASrc: {&res.DASrc, &into.DASrc}, roleDBias: {&res.DBias, &into.DBias}}
	for range le.Uint32(h[56:]) {
		t, err := r.tensor()
		if err != nil {
			return TaskResult{}, err
		}
		f, ok := fields[t.role]
		if !ok || t.dense == nil {
			return TaskResult{}, r.fail("unexpected tensor of role %d", t.role)
		}
		dst, want := f[0], *f[1]
		if want == nil {
			*dst = t.dense
			continue
		}
		if want.Rows != t.dense.Rows || want.Cols != t.dense.Cols {
			return TaskResult{}, r.fail("%dx%d result for a %dx%d buffer", t.dense.Rows, t.dense.Cols, want.Rows, want.Cols)
		}
		copy(want.Data, t.dense.Data)
		*dst = want
	}
	if len(r.b) != 0 {
		return TaskResult{}, r.fail("%d trailing bytes", len(r.b))
	}
	return res, nil
}
