package dispatch

import (
	"bytes"
	"fmt"
	"slices"
)

// Descriptor is a pull-mode request, the small message the original Dorylus sends its
// functions: it names a task the graph server at Source holds in flight, and the function
// fetches rows [Lo, Hi) of the task's inputs from there (rpc.TaskSource) and, when
// WeightSource is set, the weight as layer Layer of version WeightVersion from that parameter
// server. Source and WeightSource are addresses the function can reach (the servers' advertised
// pod IPs). CA, unless empty (a plaintext job), is the job's CA certificate, against which the
// function verifies those servers and by which it finds its own credentials for the job: a
// mounted function certificate of that CA, or a certificate the job's function issuer signed
// for the key the function made (pki.Issuer). Chain is such a certificate chain, which the
// graph server adds when the function answered that it has none (remote.NeedCertificate). A
// descriptor carries no private key: all of it is public but the task's name.
//
// On the wire a descriptor is the request header (magic "DRYP", the fields of the row range's
// request, no tensors) followed by the task id (8 bytes), Lo and Hi (4 each), the weight
// version (8), then Source, WeightSource, CA and Chain, each as a 2-byte length and its bytes
// (an address at most MaxAddress bytes, CA and Chain at most MaxCertificate).
type Descriptor struct {
	Task          uint64
	Lo, Hi        int
	Source        string
	WeightVersion uint64
	WeightSource  string
	CA, Chain     []byte // DER
}

const (
	magicDescriptor = "DRYP"
	descriptorFixed = 24
	// MaxAddress is the longest address a descriptor carries: a DNS name (253 bytes), a colon
	// and a port.
	MaxAddress = 259
	// MaxCertificate is the longest CA certificate or certificate chain a descriptor carries,
	// DER (pki's are about 400 and 850 bytes).
	MaxCertificate = 4096
)

// IsDescriptor reports whether b starts as a descriptor rather than a request.
func IsDescriptor(b []byte) bool { return len(b) >= 4 && string(b[:4]) == magicDescriptor }

// EncodeDescriptor returns the wire bytes of a descriptor of req, the request of the rows the
// call computes (its tensors are not sent).
func EncodeDescriptor(req *TaskRequest, d Descriptor) []byte {
	fields := [][]byte{[]byte(d.Source), []byte(d.WeightSource), d.CA, d.Chain}
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
	var v [4][]byte
	for i, what := range []string{"address", "weight address", "CA certificate", "certificate chain"} {
		n, err := r.take(2, what+" length")
		if err != nil {
			return TaskRequest{}, Descriptor{}, err
		}
		limit := MaxCertificate
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
	if len(v[2]) > 0 {
		d.CA = bytes.Clone(v[2])
	}
	if len(v[3]) > 0 {
		d.Chain = bytes.Clone(v[3])
	}
	switch {
	case len(r.b) != 0:
		return TaskRequest{}, Descriptor{}, r.fail("%d trailing bytes", len(r.b))
	case d.Source == "" || d.Lo < 0 || d.Hi < d.Lo:
		return TaskRequest{}, Descriptor{}, r.fail("task %d rows [%d, %d) at %q: want a source and a row range", d.Task, d.Lo, d.Hi, d.Source)
	case h[7]>>1&3 > byte(WeightNeigh):
		return TaskRequest{}, Descriptor{}, r.fail("task %d: weight half %d, want %d, %d or %d", d.Task, h[7]>>1&3, WeightWhole, WeightSelf, WeightNeigh)
	case len(d.Chain) > 0 && len(d.CA) == 0:
		return TaskRequest{}, Descriptor{}, r.fail("a certificate chain of %d bytes without the CA certificate it chains to", len(d.Chain))
	}
	return requestOfHeader(h), d, nil
}

// WithChain returns the descriptor body with its certificate chain replaced by chain.
func WithChain(body, chain []byte) ([]byte, error) {
	_, d, err := DecodeDescriptor(body)
	if err != nil {
		return nil, err
	}
	if len(d.CA) == 0 || len(chain) > MaxCertificate {
		return nil, fmt.Errorf("%w: a certificate chain of %d bytes for a descriptor with a CA certificate of %d", ErrRequest, len(chain), len(d.CA))
	}
	// Chain is the last field: its length and bytes end the body.
	out := slices.Clip(body[:len(body)-2-len(d.Chain)])
	out = le.AppendUint16(out, uint16(len(chain)))
	return append(out, chain...), nil
}

// CheckInputs checks that inputs, a request fetched for the descriptor whose header is want,
// is that task's: same op, layer, weight half, first row and row count.
func CheckInputs(inputs, want *TaskRequest, d Descriptor) error {
	if inputs.Op != want.Op || inputs.Layer != want.Layer || inputs.WeightHalf != want.WeightHalf || inputs.RowOffset != want.RowOffset || inputs.NumRows() != d.Hi-d.Lo {
		return fmt.Errorf("%w: task %d at %s: fetched inputs of %v layer %d (weight half %d) rows %d+%d, the descriptor names %v layer %d (weight half %d) rows %d+%d",
			ErrRequest, d.Task, d.Source, inputs.Op, inputs.Layer, inputs.WeightHalf, inputs.RowOffset, inputs.NumRows(), want.Op, want.Layer, want.WeightHalf, want.RowOffset, d.Hi-d.Lo)
	}
	return nil
}
