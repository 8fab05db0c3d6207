package dispatch

import (
	"fmt"
)

// Descriptor is a pull-mode request, the small message the original Dorylus sends its
// functions: it names a task the graph server at Source holds in flight, and the function
// fetches rows [Lo, Hi) of the task's inputs from there (rpc.TaskSource) and, when
// WeightSource is set, the weight as layer Layer of version WeightVersion from that parameter
// server.
//
// On the wire a descriptor is the request header (magic "DRYP", the fields of the row range's
// request, no tensors) followed by the task id (8 bytes), Lo and Hi (4 each), the weight
// version (8), then Source and WeightSource, each as a 2-byte length and its bytes.
type Descriptor struct {
	Task          uint64
	Lo, Hi        int
	Source        string
	WeightVersion uint64
	WeightSource  string
}

const (
	magicDescriptor = "DRYP"
	descriptorFixed = 24
)

// IsDescriptor reports whether b starts as a descriptor rather than a request.
func IsDescriptor(b []byte) bool { return len(b) >= 4 && string(b[:4]) == magicDescriptor }

// EncodeDescriptor returns the wire bytes of a descriptor of req, the request of the rows the
// call computes (its tensors are not sent).
func EncodeDescriptor(req *TaskRequest, d Descriptor) []byte {
	b := make([]byte, wireHeader, wireHeader+descriptorFixed+4+len(d.Source)+len(d.WeightSource))
	putRequestHeader(b, magicDescriptor, req)
	b = le.AppendUint64(b, d.Task)
	b = le.AppendUint32(b, uint32(d.Lo))
	b = le.AppendUint32(b, uint32(d.Hi))
	b = le.AppendUint64(b, d.WeightVersion)
	for _, s := range []string{d.Source, d.WeightSource} {
		b = le.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
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
	for _, s := range []*string{&d.Source, &d.WeightSource} {
		n, err := r.take(2, "address length")
		if err != nil {
			return TaskRequest{}, Descriptor{}, err
		}
		v, err := r.take(int64(le.Uint16(n)), "address")
		if err != nil {
			return TaskRequest{}, Descriptor{}, err
		}
		*s = string(v)
	}
	switch {
	case len(r.b) != 0:
		return TaskRequest{}, Descriptor{}, r.fail("%d trailing bytes", len(r.b))
	case d.Source == "" || d.Lo < 0 || d.Hi < d.Lo:
		return TaskRequest{}, Descriptor{}, r.fail("task %d rows [%d, %d) at %q: want a source and a row range", d.Task, d.Lo, d.Hi, d.Source)
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
