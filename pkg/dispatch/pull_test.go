package dispatch_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// TestDescriptorRoundTrip encodes descriptors without a CA, with one and with a certificate
// chain, of a GraphSAGE task on W_neigh, decodes them back, replaces their chain (WithChain),
// and refuses damaged ones and inputs of other rows or of the other half of the weight.
func TestDescriptorRoundTrip(t *testing.T) {
	req := dispatch.TaskRequest{Op: dispatch.OpBackward, Model: cfg, Layer: 1, RowOffset: 120, Key: 77, Train: true, Z: tensor.NewDense(4, 5),
		WeightHalf: dispatch.WeightNeigh}
	plain := dispatch.Descriptor{Task: 9, Lo: 20, Hi: 24, Source: "10.0.0.7:7000", WeightVersion: 31, WeightSource: "10.0.0.8:7100"}
	withCA := plain
	withCA.CA, withCA.Chain = certificates(t)
	chainless := withCA
	chainless.Chain = nil
	d := withCA
	for _, c := range []struct {
		d   dispatch.Descriptor
		max int
	}{{plain, 256}, {chainless, 700}, {d, 1600}} {
		b := dispatch.EncodeDescriptor(&req, c.d)
		if len(b) > c.max {
			t.Errorf("descriptor of %d bytes, want at most %d", len(b), c.max)
		}
		_, gd, err := dispatch.DecodeDescriptor(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.d, gd); diff != "" {
			t.Errorf("decoded descriptor (-want +got):\n%s", diff)
		}
	}
	b := dispatch.EncodeDescriptor(&req, d)
	if !dispatch.IsDescriptor(b) || dispatch.IsDescriptor(dispatch.EncodeRequest(&req)) {
		t.Fatal("IsDescriptor does not tell a descriptor from a request")
	}
	got, gd, err := dispatch.DecodeDescriptor(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Op != req.Op || got.Model != req.Model || got.Layer != 1 || got.RowOffset != 120 || got.Key != 77 || !got.Train || got.Z != nil || got.WeightHalf != dispatch.WeightNeigh {
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
	inputs.RowOffset, inputs.WeightHalf = req.RowOffset, dispatch.WeightSelf
	if err := dispatch.CheckInputs(&inputs, &got, gd); !errors.Is(err, dispatch.ErrRequest) {
		t.Errorf("inputs of W_self for a task on W_neigh: got %v, want an error wrapping ErrRequest", err)
	}
	half3 := slices.Clone(b)
	half3[7] |= 3 << 1 // flags bits 1–2: no such half
	if _, _, err := dispatch.DecodeDescriptor(half3); !errors.Is(err, dispatch.ErrRequest) {
		t.Errorf("descriptor of weight half 3: got %v, want an error wrapping ErrRequest", err)
	}
	for _, from := range []dispatch.Descriptor{chainless, d} {
		body, err := dispatch.WithChain(dispatch.EncodeDescriptor(&req, from), d.Chain[:100])
		if err != nil {
			t.Fatal(err)
		}
		want := from
		want.Chain = d.Chain[:100]
		if _, gd, err := dispatch.DecodeDescriptor(body); err != nil || !cmp.Equal(gd, want) {
			t.Errorf("WithChain: %+v, %v; want %+v", gd, err, want)
		}
	}
	if _, err := dispatch.WithChain(dispatch.EncodeDescriptor(&req, plain), d.Chain); !errors.Is(err, dispatch.ErrRequest) {
		t.Errorf("WithChain of a plaintext descriptor: %v, want an error wrapping ErrRequest", err)
	}
	for name, bad := range map[string][]byte{"truncated": b[:len(b)-3], "trailing": append(b[:len(b):len(b)], 0)} {
		if _, _, err := dispatch.DecodeDescriptor(bad); !errors.Is(err, dispatch.ErrRequest) {
			t.Errorf("%s descriptor: got %v, want an error wrapping ErrRequest", name, err)
		}
	}
	bad := map[string]func(*dispatch.Descriptor){
		"no source":            func(d *dispatch.Descriptor) { d.Source = "" },
		"a long address":       func(d *dispatch.Descriptor) { d.WeightSource = strings.Repeat("a", dispatch.MaxAddress+1) },
		"a long chain":         func(d *dispatch.Descriptor) { d.Chain = make([]byte, dispatch.MaxCertificate+1) },
		"a chain without a CA": func(d *dispatch.Descriptor) { d.CA = nil },
	}
	for name, edit := range bad {
		e := d
		edit(&e)
		if _, _, err := dispatch.DecodeDescriptor(dispatch.EncodeDescriptor(&req, e)); !errors.Is(err, dispatch.ErrRequest) {
			t.Errorf("descriptor with %s: got %v, want an error wrapping ErrRequest", name, err)
		}
	}
}

// certificates returns the CA certificate of a new job's credentials and a certificate chain
// its function issuer signed for a new key.
func certificates(t testing.TB) (ca, chain []byte) {
	_, _, is := remotetest.NewJob(t)
	_, pub, err := pki.NewFunctionKey()
	if err != nil {
		t.Fatal(err)
	}
	if chain, err = is.Certify(pub); err != nil {
		t.Fatal(err)
	}
	return is.CA(), chain
}
