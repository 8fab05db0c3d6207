package dispatch_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/hostile"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Memory budgets of the fuzz targets: decoding allocates in proportion to the input's bytes;
// running a task may allocate the product of an interval's rows and a weight's columns, both
// bounded by the input's bytes, never what a header merely declares.
var (
	decodeBudget  = hostile.Budget{Fixed: 64 << 10, PerByte: 16}
	executeBudget = hostile.Budget{Fixed: 1 << 20, PerByte: 64, Quadratic: 8}
)

// seedTasks returns small requests of every op, GCN and GAT.
func seedTasks() []dispatch.TaskRequest {
	return append(remotetest.Tasks(1, 4, 6, 3), remotetest.GATTasks(2, 3, 5, 2)...)
}

// wireError reports whether err is one a decoder or Execute may return for bad bytes: the
// function answers those with a bad-request error (HTTP 400).
func wireError(err error) bool {
	return errors.Is(err, dispatch.ErrRequest) || errors.Is(err, dispatch.ErrWireVersion)
}

// FuzzDecodeRequest decodes hostile request bytes and runs what decodes, as the function does:
// every refusal is a request error, nothing panics, and memory follows the input's size.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range seedTasks() {
		f.Add(dispatch.EncodeRequest(&r))
	}
	for _, b := range hostileRequests() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req dispatch.TaskRequest
		var err error
		decodeBudget.Check(t, len(b), "DecodeRequest", func() { req, err = dispatch.DecodeRequest(b) })
		if err != nil {
			if !wireError(err) {
				t.Fatalf("DecodeRequest: %v: not a request error", err)
			}
			return
		}
		executeBudget.Check(t, len(b), "Execute", func() { _, err = dispatch.Execute(&req, nil) })
		if err != nil && !errors.Is(err, dispatch.ErrRequest) {
			t.Fatalf("Execute of decoded bytes: %v: not a request error", err)
		}
	})
}

// hostileRequests returns requests that once made Execute allocate what their headers declared:
// an interval of 2³²−1 rows of zero-width features (it allocated 2³²−1 output rows).
func hostileRequests() [][]byte {
	fwd := seedTasks()[0] // AV_0 with sparse features
	fwd.Features.Sparse = nil
	fwd.Features.Dense = &tensor.Dense{Rows: 1<<32 - 1}
	return [][]byte{dispatch.EncodeRequest(&fwd)}
}

// TestHostileRequests runs the hostile requests: each is refused as a bad request within the
// memory budget.
func TestHostileRequests(t *testing.T) {
	for i, b := range hostileRequests() {
		req, err := dispatch.DecodeRequest(b)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		executeBudget.Check(t, len(b), "Execute", func() { _, err = dispatch.Execute(&req, nil) })
		if !errors.Is(err, dispatch.ErrRequest) {
			t.Errorf("request %d: %v, want a request error", i, err)
		}
	}
}

// FuzzDecodeResult decodes hostile result bytes, with and without destination buffers.
func FuzzDecodeResult(f *testing.F) {
	for _, r := range seedTasks() {
		res, err := dispatch.Execute(&r, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(r.Op), false, dispatch.EncodeResult(r.Op, res))
	}
	f.Fuzz(func(t *testing.T, op byte, into bool, b []byte) {
		var dst dispatch.TaskResult
		if into {
			dst = dispatch.TaskResult{Out: tensor.NewDense(4, 3), DW: tensor.NewDense(6, 3)}
		}
		var res dispatch.TaskResult
		var err error
		decodeBudget.Check(t, len(b), "DecodeResult", func() { res, err = dispatch.DecodeResult(b, dispatch.Op(op), dst) })
		switch {
		case err != nil && !wireError(err):
			t.Fatalf("DecodeResult: %v: not a request error", err)
		case err == nil && into && res.Out != nil && res.Out != dst.Out:
			t.Fatal("a result was not copied into its destination")
		}
	})
}

// FuzzDecodeDescriptor decodes hostile pull-mode descriptors, with and without a CA and a
// certificate chain.
func FuzzDecodeDescriptor(f *testing.F) {
	ca, chain := certificates(f)
	for i, r := range seedTasks() {
		d := dispatch.Descriptor{Task: uint64(i), Lo: 1, Hi: 3, Source: "10.0.0.1:7070", WeightVersion: 4, WeightSource: "ps:7071"}
		f.Add(dispatch.EncodeDescriptor(&r, d))
		d.CA = ca
		f.Add(dispatch.EncodeDescriptor(&r, d))
		d.Chain = chain
		f.Add(dispatch.EncodeDescriptor(&r, d))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d dispatch.Descriptor
		var err error
		decodeBudget.Check(t, len(b), "DecodeDescriptor", func() { _, d, err = dispatch.DecodeDescriptor(b) })
		switch {
		case err != nil && !wireError(err):
			t.Fatalf("DecodeDescriptor: %v: not a request error", err)
		case err == nil && (d.Source == "" || d.Lo < 0 || d.Hi < d.Lo || len(d.Source) > dispatch.MaxAddress || len(d.WeightSource) > dispatch.MaxAddress):
			t.Fatalf("DecodeDescriptor accepted %+v", d)
		case err == nil && (len(d.Chain) > 0 && len(d.CA) == 0 || len(d.CA) > dispatch.MaxCertificate || len(d.Chain) > dispatch.MaxCertificate):
			t.Fatalf("DecodeDescriptor accepted a CA of %d bytes and a chain of %d", len(d.CA), len(d.Chain))
		}
	})
}

// TestDecodeRequestChecksCSRs: a request whose CSR has a column out of range, out of order or
// decreasing offsets is refused as it is decoded, since Execute checks only a CSR's sizes.
func TestDecodeRequestChecksCSRs(t *testing.T) {
	checked := 0
	for name, spoil := range map[string]func(*tensor.CSR){
		"column out of range": func(m *tensor.CSR) { m.ColIdx[len(m.ColIdx)-1] = int32(m.Cols) },
		"columns out of order": func(m *tensor.CSR) {
			lo := m.RowPtr[0]
			for r := range m.Rows {
				if m.RowPtr[r+1]-m.RowPtr[r] >= 2 {
					lo = m.RowPtr[r]
					break
				}
			}
			m.ColIdx[lo], m.ColIdx[lo+1] = m.ColIdx[lo+1], m.ColIdx[lo]
		},
		"offsets decrease": func(m *tensor.CSR) { m.RowPtr[1] = m.RowPtr[m.Rows] + 1 },
	} {
		for _, r := range seedTasks() {
			if r.Features.Sparse == nil || r.Layer != 0 {
				continue
			}
			m := r.Features.Sparse
			bad := &tensor.CSR{Rows: m.Rows, Cols: m.Cols, RowPtr: slices.Clone(m.RowPtr), ColIdx: slices.Clone(m.ColIdx), Val: slices.Clone(m.Val)}
			spoil(bad)
			r.Features.Sparse = bad
			if _, err := dispatch.DecodeRequest(dispatch.EncodeRequest(&r)); !errors.Is(err, dispatch.ErrRequest) {
				t.Errorf("%s: %v layer %d: DecodeRequest: %v, want a request error", name, r.Op, r.Layer, err)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no seed task has sparse features")
	}
}
