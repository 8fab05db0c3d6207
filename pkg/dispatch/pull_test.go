package dispatch_test

import (
	"errors"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// TestDescriptorRoundTrip encodes a descriptor, decodes it back, and refuses damaged ones.
func TestDescriptorRoundTrip(t *testing.T) {
	req := dispatch.TaskRequest{Op: dispatch.OpBackward, Model: cfg, Layer: 1, RowOffset: 120, Key: 77, Train: true, Z: tensor.NewDense(4, 5)}
	d := dispatch.Descriptor{Task: 9, Lo: 20, Hi: 24, Source: "10.0.0.7:7000", WeightVersion: 31, WeightSource: "10.0.0.8:7100"}
	b := dispatch.EncodeDescriptor(&req, d)
	if !dispatch.IsDescriptor(b) || dispatch.IsDescriptor(dispatch.EncodeRequest(&req)) {
		t.Fatal("IsDescriptor does not tell a descriptor from a request")
	}
	if len(b) > 256 {
		t.Errorf("descriptor of %d bytes, want a few hundred at most", len(b))
	}
	got, gd, err := dispatch.DecodeDescriptor(b)
	if err != nil {
		t.Fatal(err)
	}
	if gd != d || got.Op != req.Op || got.Model != req.Model || got.Layer != 1 || got.RowOffset != 120 || got.Key != 77 || !got.Train || got.Z != nil {
		t.Errorf("decoded %+v %+v, want %+v %+v without tensors", got, gd, req, d)
	}
	inputs := req
	if err := dispatch.CheckInputs(&inputs, &got, gd); err != nil {
		t.Errorf("matching inputs refused: %v", err)
	}
	inputs.RowOffset++
	if err := dispatch.CheckInputs(&inputs, &got, gd); !errors.Is(err, dispatch.ErrRequest) {
		t.Errorf("inputs of other rows: got %v, want an error wrapping ErrRequest", err)
	}
	for name, bad := range map[string][]byte{"truncated": b[:len(b)-3], "trailing": append(b[:len(b):len(b)], 0)} {
		if _, _, err := dispatch.DecodeDescriptor(bad); !errors.Is(err, dispatch.ErrRequest) {
			t.Errorf("%s descriptor: got %v, want an error wrapping ErrRequest", name, err)
		}
	}
	d.Source = ""
	if _, _, err := dispatch.DecodeDescriptor(dispatch.EncodeDescriptor(&req, d)); !errors.Is(err, dispatch.ErrRequest) {
		t.Errorf("descriptor without a source: got %v, want an error wrapping ErrRequest", err)
	}
}
