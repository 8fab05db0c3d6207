package graphserver

import (
	"context"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// A GraphSAGE network (pkg/model, sage.go) runs through a GCN's pipeline steps and buffers:
// P_l = H_l W_neigh is what SC_l ships and GA_l gathers, dZ_l is what the readers pull for
// ∇GA_l, and every tensor task is a GCN's, twice, once per half of [W_self; W_neigh]:
//
//	AV_l   OpForward with W_self into S_l (owned rows, here) and with W_neigh into P_l
//	GA_l   Z_l = S_l + M P_l, M = D⁻¹A on the owned rows: 1/deg(i) at each neighbour j
//	∇GA_l  dP_l = Mᵀ dZ_l: on the same structure 1/deg(j) at neighbour j (A is symmetric),
//	       from dZ_l's ghost rows as a GCN's
//	∇AV_l  OpBackward with W_self on dS_l = dZ_l and with W_neigh on dP_l, each into its half
//	       of dW_l; dZ_{l-1} the sum of their two (the dropout and ReLU masks are linear)
//
// M and Mᵀ share the partition's adjacency structure, whose self loop gets 0.

// sage is a graph server's GraphSAGE: a GCN with its own Gather values and two products.
type sage struct {
	*gcn
	mean, meanT *tensor.CSR       // M and Mᵀ on the owned rows, part.Adj's structure
	s           [][]*tensor.Dense // [layer][slot]: S_l, owned rows
	dzSelf      [][]*tensor.Dense // [interval][layer]: the W_self half of dZ_{l-1} (l ≥ 1)
}

func newSAGE(cfg *Config, part *partition.Part, cuts []partition.Interval, env taskEnv) (variant, *layout, modelShape, error) {
	v, lay, sh, err := newGCN(cfg, part, cuts, env)
	if err != nil {
		return nil, nil, modelShape{}, err
	}
	g := &sage{gcn: v.(*gcn)}
	sh.params, sh.sage = g.cfg.SAGEShapes(), true
	g.mean, g.meanT = meanAdjacency(part)
	for _, gi := range g.ivs { // dW_l is as large as W_l: [dW_self; dW_neigh]
		for _, dw := range gi.dw {
			for l, s := range sh.params {
				dw[l] = tensor.NewDense(s[0], s[1])
			}
		}
	}
	n, R := part.Owned, lay.slots
	for l := range g.cfg.Layers {
		var slots []*tensor.Dense
		for range R {
			slots = append(slots, tensor.NewDense(n, sh.dims[l+1]))
		}
		g.s = append(g.s, slots)
	}
	for i := range lay.ivs {
		bufs := make([]*tensor.Dense, g.cfg.Layers)
		for l := 1; l < g.cfg.Layers; l++ {
			bufs[l] = tensor.NewDense(lay.ivs[i].Rows(), sh.dims[l])
		}
		g.dzSelf = append(g.dzSelf, bufs)
	}
	return g, lay, sh, nil
}

// meanAdjacency returns M and Mᵀ of the partition's owned rows on part.Adj's structure (its
// self loops valued 0): row i of M holds 1/deg(i) at each neighbour, row i of Mᵀ 1/deg(j) at
// neighbour j, deg the whole graph's (a ghost's from part.GhostDegree).
func meanAdjacency(part *partition.Part) (mean, meanT *tensor.CSR) {
	a, n := part.Adj, part.Owned
	mean = &tensor.CSR{Rows: a.Rows, Cols: a.Cols, RowPtr: a.RowPtr, ColIdx: a.ColIdx, Val: make([]float32, a.NNZ())}
	meanT = &tensor.CSR{Rows: a.Rows, Cols: a.Cols, RowPtr: a.RowPtr, ColIdx: a.ColIdx, Val: make([]float32, a.NNZ())}
	inv := make([]float32, a.Cols) // 1/deg of every local column
	for r := range n {
		if d := a.Degree(r) - 1; d > 0 { // the self loop is not a neighbour
			inv[r] = 1 / float32(d)
		}
	}
	for i, d := range part.GhostDegree {
		inv[n+i] = 1 / float32(d)
	}
	for r := range n {
		for k := a.RowPtr[r]; k < a.RowPtr[r+1]; k++ {
			if c := a.ColIdx[k]; int(c) != r {
				mean.Val[k], meanT.Val[k] = inv[r], inv[c]
			}
		}
	}
	return mean, meanT
}

func (g *sage) run(ctx context.Context, st pipeline.Started) (float64, error) {
	t, b := st.Task, g.lay
	iv := &b.ivs[t.Interval]
	slot, l := t.Epoch%b.slots, t.Layer
	switch {
	case t.Kind == pipeline.KindAV && l < g.cfg.Layers:
		self, neigh, err := g.halves(ctx, iv, st)
		if err != nil {
			return 0, err
		}
		if err := b.claim(rowsP, l, t); err != nil {
			return 0, err
		}
		self.Op, neigh.Op = dispatch.OpForward, dispatch.OpForward
		self.Out, neigh.Out = g.s[l][slot].RowSlice(iv.Lo, iv.Hi), iv.pView[l][slot]
		if err := g.env.call(ctx, st, self); err != nil {
			return 0, err
		}
		return 0, g.env.call(ctx, st, neigh)
	case t.Kind == pipeline.KindGA:
		defer b.guard.read(rowsP, l, st.Reads)()
		z := iv.zOf(t.Epoch)[l]
		b.gather(z, g.mean, rowsP, l, iv, st.Reads, true)
		tensor.AddInPlace(z, g.s[l][slot].RowSlice(iv.Lo, iv.Hi))
	case t.Kind == pipeline.KindBackGA:
		defer b.guard.read(rowsDZ, l, st.Reads)()
		b.gather(iv.dp[l], g.meanT, rowsDZ, l, iv, st.Reads, true)
	case t.Kind == pipeline.KindBackAV:
		self, neigh, err := g.halves(ctx, iv, st)
		if err != nil {
			return 0, err
		}
		dws, dwn, err := g.cfg.SplitSAGE(l, g.ivs[t.Interval].dwOf(t.Epoch)[l])
		if err != nil {
			return 0, err
		}
		self.Op, neigh.Op = dispatch.OpBackward, dispatch.OpBackward
		self.ActKept, neigh.ActKept = self.Act != nil, neigh.Act != nil
		self.DP, self.DW = iv.dzView[l][slot], dws
		neigh.DP, neigh.DW = iv.dp[l], dwn
		if l > 0 {
			if err := b.claim(rowsDZ, l-1, t); err != nil {
				return 0, err
			}
			self.Out, neigh.Out = g.dzSelf[t.Interval][l], iv.dzView[l-1][slot]
		}
		if err := g.env.call(ctx, st, self); err != nil {
			return 0, err
		}
		if err := g.env.call(ctx, st, neigh); err != nil {
			return 0, err
		}
		if l > 0 {
			tensor.AddInPlace(neigh.Out, self.Out)
		}
	default:
		return g.gcn.run(ctx, st) // the loss
	}
	return 0, nil
}

// halves returns the requests of an interval's AV_l or ∇AV_l on the two halves of the layer's
// weight of the task's pinned version, W_self and W_neigh (on the pull data path named as the
// halves of the version the functions pull), with the activation AV_l keeps.
func (g *sage) halves(ctx context.Context, iv *interval, st pipeline.Started) (self, neigh dispatch.TaskRequest, err error) {
	t := st.Task
	req, err := g.avRequest(ctx, iv, st)
	if err != nil {
		return req, req, err
	}
	ws, wn, err := g.cfg.SplitSAGE(t.Layer, req.W)
	if err != nil {
		return req, req, err
	}
	req.Act = g.kept(&g.ivs[t.Interval], t.Epoch, t.Layer)
	self, neigh = req, req
	self.W, neigh.W = ws, wn
	self.WeightHalf, neigh.WeightHalf = dispatch.WeightSelf, dispatch.WeightNeigh // what a pull-mode function pulls
	return self, neigh, nil
}

func (g *sage) evalForward(ctx context.Context, i, l int, w []*tensor.Dense, pb passBuffers) error {
	ws, wn, err := g.cfg.SplitSAGE(l, w[l])
	if err != nil {
		return err
	}
	self := pb
	self.p = pb.self
	if err := g.gcn.evalForward(ctx, i, l, layerWeight(l, ws), self); err != nil {
		return err
	}
	return g.gcn.evalForward(ctx, i, l, layerWeight(l, wn), pb)
}

// layerWeight returns a weight list whose layer l is w, as a GCN's evalForward reads it.
func layerWeight(l int, w *tensor.Dense) []*tensor.Dense {
	ws := make([]*tensor.Dense, l+1)
	ws[l] = w
	return ws
}

func (g *sage) evalGather(_ context.Context, l int, pb passBuffers) error {
	tensor.SpMM(pb.z, g.mean, pb.p)
	tensor.AddInPlace(pb.z, pb.self)
	return nil
}

func (g *sage) selfRows(l int) *tensor.Dense { return g.s[l][0] }

func (g *sage) slots(w []*tensor.Dense) []export.Slot { return export.SAGESlots(w) }
