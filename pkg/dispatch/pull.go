package dispatch

import (
	"bytes"
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// Descriptor is a pull-mode request, the small message the original Dorylus sends its
// functions: it names a task the graph server at Source holds in flight, and the function
// fetches rows [Lo, Hi) of the task's inputs from there (rpc.TaskSource) and, when
// WeightSource is set, the weight as layer Layer of version WeightVersion from that parameter
// server. Source and WeightSource are addresses the function can reach (the servers' advertised
// pod IPs). Identity, unless empty (a plaintext job), is the job's function identity, with
// which the function does mutual TLS with those servers: so a function deployed once serves
// any job, and the descriptor, which holds a private key, travels only inside an authorised
// call (a Lambda Invoke, a Knative request with the job's token).
//
// On the wire a descriptor is the request header (magic "DRYP", the fields of the row range's
// request, no tensors) followed by the task id (8 bytes), Lo and Hi (4 each), the weight
// version (8), then Source, WeightSource and the identity's CA, Cert and Key, each as a 2-byte
// length and its bytes (an address at most MaxAddress bytes, an identity's part at most
// MaxIdentityPart).
type Descriptor struct {
	Task          uint64
	Lo, Hi        int
	Source        string
	WeightVersion uint64
	WeightSource  string
	Identity      pki.Identity
}

const (
	magicDescriptor = "DRYP"
	descriptorFixed = 24
	// MaxAddress is the longest address a descriptor carries: a DNS name (253 bytes), a colon
	// and a port.
	MaxAddress = 259
	// MaxIdentityPart is the longest CA certificate, function certificate or key a descriptor
	// carries, DER (pki's are about 400, 400 and 140 bytes).
	MaxIdentityPart = 2048
)

// IsDescriptor reports whether b starts as a descriptor rather than a request.
func IsDescriptor(b []byte) bool { return len(b) >= 4 && string(b[:4]) == magicDescriptor }

// EncodeDescriptor returns the wire bytes of a descriptor of req, the request of the rows the
// call computes (its tensors are not sent).
func EncodeDescriptor(req *TaskRequest, d Descriptor) []byte {
	fields := [][]byte{[]byte(d.Source), []byte(d.WeightSource), d.Identity.CA, d.Identity.Cert, d.Identity.Key}
	n := wireHeader + descriptorFixed
	for _, f := range fields {
		n += 2 + len(f)
	}
	b := make([]byte, wireHeader, n)
	putRequestHeader(b, magicDescriptor, req)
	b = le.AppendUint64(b, d.Task)
	b = le.AppendUint32(b, uint32(d.Lo))
	b = le.AppendUint32(b, uint32(d.Hi))
	b = le.AppendUint64(b, d.WeightVersion)
	for _, f := range fields {
		b = le.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return b
}

// DecodeDescriptor decodes the bytes of EncodeDescriptor: the request its header describes
// (without tensors) and the descriptor.
func DecodeDescriptor(b []byte) (TaskRequest, Descriptor, error) {
	r := &wireReader{b: b, what: "tensor task descriptor"}
	h, err := r.header(magicDescriptor)
	if err != nil {
		return TaskRequest{}, Descriptor{}, err
	}
	fixed, err := r.take(descriptorFixed, "descriptor fields")
	if err != nil {
		return TaskRequest{}, Descriptor{}, err
	}
	d := Descriptor{Task: le.Uint64(fixed), Lo: int(le.Uint32(fixed[8:])), Hi: int(le.Uint32(fixed[12:])), WeightVersion: le.Uint64(fixed[16:])}
	var v [5][]byte
	for i, what := range []string{"address", "weight address", "CA certificate", "function certificate", "function key"} {
		n, err := r.take(2, what+" length")
		if err != nil {
			return TaskRequest{}, Descriptor{}, err
		}
		limit := MaxIdentityPart
		if i < 2 {
			limit = MaxAddress
		}
		if l := int(le.Uint16(n)); l > limit {
			return TaskRequest{}, Descriptor{}, r.fail("%s of %d bytes, over the limit of %d", what, l, limit)
		}
		if v[i], err = r.take(int64(le.Uint16(n)), what); err != nil {
			return TaskRequest{}, Descriptor{}, err
		}
	}
	d.Source, d.WeightSource = string(v[0]), string(v[1])
	parts := 0
	for _, p := range v[2:] {
		if len(p) > 0 {
			parts++
		}
	}
	if parts > 0 {
		d.Identity = pki.Identity{CA: bytes.Clone(v[2]), Cert: bytes.Clone(v[3]), Key: bytes.Clone(v[4])}
	}
	switch {
	case len(r.b) != 0:
		return TaskRequest{}, Descriptor{}, r.fail("%d trailing bytes", len(r.b))
	case d.Source == "" || d.Lo < 0 || d.Hi < d.Lo:
		return TaskRequest{}, Descriptor{}, r.fail("task %d rows [%d, %d) at %q: want a source and a row range", d.Task, d.Lo, d.Hi, d.Source)
	case parts != 0 && parts != 3:
		return TaskRequest{}, Descriptor{}, r.fail("an identity of %d, %d and %d bytes: want a CA certificate, a certificate and a key, or none",
			len(d.Identity.CA), len(d.Identity.Cert), len(d.Identity.Key))
	}
	return requestOfHeader(h), d, nil
}

// CheckInputs checks that inputs, a request fetched for the descriptor whose header is want,
// is that task's: same op, layer, first row and row count.
func CheckInputs(inputs, want *TaskRequest, d Descriptor) error {
	if inputs.Op != want.Op || inputs.Layer != want.Layer || inputs.RowOffset != want.RowOffset || inputs.NumRows() != d.Hi-d.Lo {
		return fmt.Errorf("%w: task %d at %s: fetched inputs of %v layer %d rows %d+%d, the descriptor names %v layer %d rows %d+%d",
			ErrRequest, d.Task, d.Source, inputs.Op, inputs.Layer, inputs.RowOffset, inputs.NumRows(), want.Op, want.Layer, want.RowOffset, d.Hi-d.Lo)
	}
	return nil
}
