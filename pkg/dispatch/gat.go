package dispatch

import (
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// denseIs reports whether d is a well-formed rows×cols block.
func denseIs(d *tensor.Dense, rows, cols int) bool {
	return d != nil && d.Validate() == nil && d.Rows == rows && d.Cols == cols
}

// validateGAT checks a GAT op's shapes; bad formats the error.
func (r *TaskRequest) validateGAT(bad func(string, ...any) error) error {
	g := r.GAT
	if err := g.Validate(); err != nil {
		return bad("%v", err)
	}
	if g.Layers > MaxLayers {
		return bad("%d layers, want at most %d", g.Layers, MaxLayers)
	}
	if r.Layer < 0 || r.Layer >= g.Layers {
		return bad("no such layer")
	}
	s := g.Shape(r.Layer)
	n := r.NumRows()
	optional := func(name string, d *tensor.Dense, rows, cols int) error {
		if d != nil && (d.Rows != rows || d.Cols != cols) {
			return bad("%s is %dx%d, want %dx%d", name, d.Rows, d.Cols, rows, cols)
		}
		return nil
	}
	if r.Op == OpEdgeForward || r.Op == OpEdgeBackward {
		switch {
		case r.Adj == nil:
			return bad("no in-edges")
		case csrShape(r.Adj) != nil:
			return bad("in-edges: %v", csrShape(r.Adj))
		case !denseIs(r.DstScore, n, s.Heads):
			return bad("destination scores must be %dx%d", n, s.Heads)
		case !denseIs(r.SrcScore, r.Adj.Cols, s.Heads):
			return bad("source scores must be %dx%d", r.Adj.Cols, s.Heads)
		case r.SrcIDs != nil && len(r.SrcIDs) != r.Adj.Cols:
			return bad("%d source ids for %d columns", len(r.SrcIDs), r.Adj.Cols)
		case slices.ContainsFunc(r.SrcIDs, func(id int32) bool { return id < 0 }):
			return bad("negative source id")
		}
		nnz := int(r.Adj.NNZ())
		if r.Op == OpEdgeBackward {
			if !denseIs(r.DAlpha, nnz, s.Heads) {
				return bad("dα̃ must be %dx%d", nnz, s.Heads)
			}
			if err := optional("dLoss/ds_dst", r.OutDst, n, s.Heads); err != nil {
				return err
			}
		}
		return optional("output", r.Out, nnz, s.Heads)
	}
	switch {
	case !denseIs(r.W, s.In, s.Width()):
		return bad("weight must be %dx%d", s.In, s.Width())
	case !denseIs(r.ADst, s.Heads, s.F) || !denseIs(r.ASrc, s.Heads, s.F):
		return bad("attention vectors must be %dx%d", s.Heads, s.F)
	case r.Layer == 0 && r.Features.Sparse == nil && r.Features.Dense == nil:
		return bad("no input features")
	case r.Layer == 0 && r.Features.Sparse != nil && csrShape(r.Features.Sparse) != nil:
		return bad("input features: %v", csrShape(r.Features.Sparse))
	case r.Layer == 0 && r.Features.Sparse == nil && r.Features.Dense.Validate() != nil:
		return bad("input features: %v", r.Features.Dense.Validate())
	case r.Layer == 0 && r.Features.Cols() != s.In:
		return bad("input features are %d columns wide, want %d", r.Features.Cols(), s.In)
	case r.Layer > 0 && !denseIs(r.Z, n, s.In):
		return bad("input rows Z must be %d columns wide", s.In)
	case r.Layer > 0 && !denseIs(r.PrevBias, 1, s.In):
		return bad("the previous layer's bias must be 1x%d", s.In)
	}
	if r.Op == OpGATForward {
		if err := optional("output", r.Out, n, s.Width()); err != nil {
			return err
		}
		if err := optional("destination scores", r.OutDst, n, s.Heads); err != nil {
			return err
		}
		return optional("source scores", r.OutSrc, n, s.Heads)
	}
	switch {
	case !denseIs(r.P, n, s.Width()) || !denseIs(r.DP, n, s.Width()):
		return bad("P and dP must be %dx%d", n, s.Width())
	case !denseIs(r.DDst, n, s.Heads) || !denseIs(r.DSrc, n, s.Heads):
		return bad("score gradients must be %dx%d", n, s.Heads)
	}
	for _, o := range []struct {
		name       string
		d          *tensor.Dense
		rows, cols int
	}{{"dW", r.DW, s.In, s.Width()}, {"da_dst", r.DADst, s.Heads, s.F}, {"da_src", r.DASrc, s.Heads, s.F},
		{"output", r.Out, n, s.In}, {"db", r.DBias, 1, s.In}} {
		if err := optional(o.name, o.d, o.rows, o.cols); err != nil {
			return err
		}
	}
	return nil
}

// orNew returns d, or a new rows×cols block when d is nil.
func orNew(d *tensor.Dense, rows, cols int) *tensor.Dense {
	if d == nil {
		return tensor.NewDense(rows, cols)
	}
	return d
}

// zeroed returns d zeroed, or a new zero rows×cols block when d is nil.
func zeroed(d *tensor.Dense, rows, cols int) *tensor.Dense {
	if d == nil {
		return tensor.NewDense(rows, cols)
	}
	d.Zero()
	return d
}

// executeGAT runs a validated GAT op with pkg/model's GAT task functions. OpEdgeBackward
// works in place on DAlpha when Out is nil.
func executeGAT(req *TaskRequest) (TaskResult, error) {
	g, l := req.GAT, req.Layer
	s := g.Shape(l)
	n := req.NumRows()
	switch req.Op {
	case OpEdgeForward, OpEdgeBackward:
		in := &model.AEInput{Layer: l, Adj: req.Adj, DstScore: req.DstScore, SrcScore: req.SrcScore, SrcIDs: req.SrcIDs,
			RowOffset: req.RowOffset, RowIDs: req.RowIDs, Key: req.Key, Train: req.Train}
		if req.Op == OpEdgeForward {
			alpha := orNew(req.Out, int(req.Adj.NNZ()), s.Heads)
			return TaskResult{Out: alpha}, g.AEForward(in, alpha)
		}
		du := req.Out
		if du == nil {
			du = req.DAlpha
		} else if du != req.DAlpha {
			tensor.Copy(du, req.DAlpha)
		}
		dDst := orNew(req.OutDst, n, s.Heads)
		return TaskResult{Out: du, Dst: dDst}, g.AEBackward(in, du, dDst)
	}
	in := &model.AVInput{Layer: l, Features: req.Features, Z: req.Z, RowOffset: req.RowOffset, RowIDs: req.RowIDs, Key: req.Key, Train: req.Train}
	act := req.GATAct
	if act == nil {
		act = &model.GATActivation{}
	}
	p := model.GATLayer{W: req.W, ADst: req.ADst, ASrc: req.ASrc}
	if req.Op == OpGATForward {
		v := &model.GATVertex{P: orNew(req.Out, n, s.Width()), DstScore: orNew(req.OutDst, n, s.Heads), SrcScore: orNew(req.OutSrc, n, s.Heads)}
		err := g.AVForward(in, req.PrevBias, p, act, v)
		return TaskResult{Out: v.P, Dst: v.DstScore, Src: v.SrcScore}, err
	}
	grad := model.GATLayer{W: zeroed(req.DW, s.In, s.Width()), ADst: zeroed(req.DADst, s.Heads, s.F), ASrc: zeroed(req.DASrc, s.Heads, s.F)}
	var dz, db *tensor.Dense
	if l > 0 {
		dz, db = orNew(req.Out, n, s.In), zeroed(req.DBias, 1, s.In)
	}
	if err := g.Activate(in, req.PrevBias, act); err != nil {
		return TaskResult{}, err
	}
	v := &model.GATVertex{P: req.P, DstScore: req.DDst, SrcScore: req.DSrc} // only P is read
	dv := &model.GATVertex{P: req.DP, DstScore: req.DDst, SrcScore: req.DSrc}
	err := g.AVBackward(in, p, grad, act, v, dv, dz, db)
	return TaskResult{Out: dz, DW: grad.W, DADst: grad.ADst, DASrc: grad.ASrc, DBias: db}, err
}
