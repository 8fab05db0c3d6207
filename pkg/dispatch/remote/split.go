package remote

import (
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// part is a row range [lo, hi) of a request, with its request and encoded bytes.
type part struct {
	lo, hi int
	req    dispatch.TaskRequest
	body   []byte
}

// split cuts req into row ranges whose request (as encode makes it) is at most maxRequest
// bytes and whose result is at most maxResult bytes (0: no limit), halving ranges until they
// fit.
func split(req *dispatch.TaskRequest, encode encoder, maxRequest, maxResult int) ([]part, error) {
	var parts []part
	var cut func(lo, hi int) error
	cut = func(lo, hi int) error {
		r := rowRange(req, lo, hi)
		body := encode(&r, lo, hi)
		res := resultSize(&r)
		if (maxRequest == 0 || len(body) <= maxRequest) && (maxResult == 0 || res <= maxResult) {
			parts = append(parts, part{lo: lo, hi: hi, req: r, body: body})
			return nil
		}
		if req.Op.IsGAT() {
			return fmt.Errorf("%w: %v layer %d: a %d-byte request and a %d-byte result, over the limits of %d and %d bytes: GAT tasks are not split by rows; use more intervals",
				dispatch.ErrRequest, req.Op, req.Layer, len(body), res, maxRequest, maxResult)
		}
		if hi-lo <= 1 {
			return fmt.Errorf("%w: %v layer %d: row %d alone needs a %d-byte request and a %d-byte result, over the limits of %d and %d bytes",
				dispatch.ErrRequest, req.Op, req.Layer, req.RowOffset+lo, len(body), res, maxRequest, maxResult)
		}
		mid := lo + (hi-lo)/2
		if err := cut(lo, mid); err != nil {
			return err
		}
		return cut(mid, hi)
	}
	if err := cut(0, req.NumRows()); err != nil {
		return nil, err
	}
	return parts, nil
}

// rowRange returns the request of rows [lo, hi) of req, sharing its tensors; it has no Out,
// DW or Act (the caller places the results).
func rowRange(req *dispatch.TaskRequest, lo, hi int) dispatch.TaskRequest {
	r := *req
	r.Out, r.DW, r.Act = nil, nil, nil
	if lo == 0 && hi == req.NumRows() {
		return r
	}
	r.RowOffset += lo
	if req.RowIDs != nil {
		r.RowIDs = req.RowIDs[lo:hi]
	}
	if s := req.Features.Sparse; s != nil {
		r.Features = graph.Features{Sparse: csrRows(s, lo, hi)}
	} else if d := req.Features.Dense; d != nil {
		r.Features = graph.Features{Dense: d.RowSlice(lo, hi)}
	}
	for _, t := range []**tensor.Dense{&r.Z, &r.DP} {
		if *t != nil {
			*t = (*t).RowSlice(lo, hi)
		}
	}
	if req.Labels != nil {
		r.Labels = req.Labels[lo:hi]
	}
	if req.Rows != nil {
		r.Rows = nil
		for _, row := range req.Rows {
			if int(row) >= lo && int(row) < hi {
				r.Rows = append(r.Rows, row-int32(lo))
			}
		}
	}
	return r
}

// csrRows returns rows [lo, hi) of m, sharing its columns and values.
func csrRows(m *tensor.CSR, lo, hi int) *tensor.CSR {
	a, b := m.RowPtr[lo], m.RowPtr[hi]
	ptr := make([]int64, hi-lo+1)
	for i := range ptr {
		ptr[i] = m.RowPtr[lo+i] - a
	}
	s := &tensor.CSR{Rows: hi - lo, Cols: m.Cols, RowPtr: ptr, ColIdx: m.ColIdx[a:b]}
	if m.Val != nil {
		s.Val = m.Val[a:b]
	}
	return s
}

// outShape returns the shape of the Out tensor a task returns; ok is false when it returns
// none (∇AV of layer 0).
func outShape(req *dispatch.TaskRequest) (rows, cols int, ok bool) {
	n := req.NumRows()
	switch {
	case req.Op == dispatch.OpLoss && req.Z != nil:
		return n, req.Z.Cols, true
	case req.Op == dispatch.OpForward && req.W != nil:
		return n, req.W.Cols, true
	case req.Op == dispatch.OpBackward && req.W != nil && req.Layer > 0:
		return n, req.W.Rows, true
	}
	return 0, 0, false
}

// resultSize returns the bytes of the encoded result of req.
func resultSize(req *dispatch.TaskRequest) int {
	const header, tensorHeader = 72, 24
	n := header
	if req.Op.IsGAT() {
		return n + 7*tensorHeader + 4*gatResultValues(req)
	}
	if r, c, ok := outShape(req); ok {
		n += tensorHeader + 4*r*c
	}
	if req.Op == dispatch.OpBackward && req.W != nil {
		n += tensorHeader + 4*len(req.W.Data)
	}
	return n
}

// gatResultValues returns the float32 values of a GAT op's result.
func gatResultValues(req *dispatch.TaskRequest) int {
	if req.GAT.Validate() != nil || req.Layer < 0 || req.Layer >= req.GAT.Layers {
		return 0
	}
	s, n := req.GAT.Shape(req.Layer), req.NumRows()
	switch req.Op {
	case dispatch.OpGATForward:
		return n * (s.Width() + 2*s.Heads)
	case dispatch.OpGATBackward:
		return s.In*s.Width() + 2*s.Heads*s.F + n*s.In + s.In
	case dispatch.OpEdgeForward, dispatch.OpEdgeBackward:
		if req.Adj == nil {
			return 0
		}
		return int(req.Adj.NNZ())*s.Heads + n*s.Heads
	}
	return 0
}
