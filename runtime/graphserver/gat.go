package graphserver

import (
	"context"
	"fmt"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// A GAT (pkg/model) runs through the same pipeline steps as a GCN, with pkg/model's GAT cut:
//
//	AV_l   worker (OpGATForward): P_l and the scores s_dst, s_src of the interval's rows
//	SC_l   the rows of P_l, each followed by its s_src, to their ghosts
//	GA_l   worker (OpEdgeForward) AE_l: α̃ of the interval's in-edges from s_dst and the
//	       sources' s_src (ghosts included); then here Z_l = Σ_j α̃_ij P_j
//	AV_L   here: logits = mean of the heads + bias, the loss, dZ_{L-1} and the bias gradient
//	∇GA_l  here dα̃ = ⟨dZ_i, P_j⟩; worker (OpEdgeBackward) ∇AE_l: du and ds_dst; here the
//	       interval's contributions to its ghost sources: Σ_i α̃_ij dZ_i and Σ_i du_ij
//	∇SC_l  those contributions ([dP | ds_src] rows) to the ghosts' owners
//	∇AV_l  here the owned part of dP_j and ds_src_j from the local intervals' α̃, du and dZ_l,
//	       plus the pushed contributions; worker (OpGATBackward): dW, da_dst, da_src, and for
//	       l ≥ 1 dZ_{l-1} and db_{l-1}
//	WU     the interval's gradients of every parameter tensor to the parameter servers
//
// α̃_l and du_l (one row per in-edge of the partition) are kept in the R slots as P_l is,
// since ∇AV of one interval reads those of the others at the epoch the scheduler names; GA_l's
// reads are remembered so that ∇GA_l recomposes the P_l and s_src it saw.

// gat is a graph server's GAT.
type gat struct {
	cfg   model.GATConfig
	lay   *layout
	env   taskEnv
	adj   *tensor.CSR       // A + I on the owned rows, local columns (part.Adj's structure)
	ssrc  [][]*tensor.Dense // [layer][slot]: s_src, owned then ghost rows (layout.scores)
	sdst  []*tensor.Dense   // [layer]: s_dst of the owned rows
	alpha [][]*tensor.Dense // [layer][slot]: α̃ of every entry of adj
	du    [][]*tensor.Dense // [layer][slot]: dLoss/dα̃ of every entry, then dLoss/du
	compS []*bufPool        // [layer]: composite s_src buffers of mixed-epoch reads
	compE []*bufPool        // [layer]: composite edge buffers of mixed-epoch reads
	ivs   []gatInterval
	eval  gatEval
}

// gatInterval is one interval's GAT state.
type gatInterval struct {
	e0, e1    int64       // its rows' entries in adj
	block     *tensor.CSR // its rows of adj, offsets from 0
	localT    *tensor.CSR // its rows of adjᵀ restricted to owned columns: the owned destinations of each row's out-edges
	localPerm []int64     // entry k of localT is entry localPerm[k] of adj
	ghostT    *tensor.CSR // the entries of its rows to ghosts, transposed: one row per touched ghost (Interval.Touched)
	ghostPerm []int64     // entry k of ghostT is entry ghostPerm[k] of adj
	act       []model.GATActivation
	reads     [][]pipeline.Read // [layer]: what GA_l read
	version   int               // the weight version pinned in the current epoch
	grads     model.GATParams   // the epoch's gradients, until WU
	flatG     []*tensor.Dense
	dDst      []*tensor.Dense // [layer]: dLoss/ds_dst of its rows
	dSrc      []*tensor.Dense // [layer]: dLoss/ds_src of its rows
	ghostP    []*tensor.Dense // [layer]: contributions to the touched ghosts' dP
	ghostS    []*tensor.Dense // [layer]: and to their ds_src
	logits    *tensor.Dense
	dLogits   *tensor.Dense
}

// gatEval holds the evaluation pass's GAT buffers.
type gatEval struct {
	sdst, alpha []*tensor.Dense // [layer]
	logits      *tensor.Dense
	act         [][]model.GATActivation // [interval][layer]
}

func newGAT(cfg *Config, part *partition.Part, cuts []partition.Interval, env taskEnv) (variant, *layout, modelShape, error) {
	d := cfg.Data
	c := model.GATConfig{InDim: d.Features.Cols(), Hidden: cfg.Hidden, Heads: cfg.Heads, OutHeads: cfg.OutHeads, Classes: d.NumClasses,
		Layers: cfg.Layers, Dropout: float32(cfg.Dropout), AttentionDropout: float32(cfg.AttentionDropout)}
	if err := c.Validate(); err != nil {
		return nil, nil, modelShape{}, err
	}
	sh := modelShape{dims: []int{c.InDim}, heads: uint32(c.Heads), outHeads: uint32(c.OutHeads)}
	for l := range c.Layers {
		s := c.Shape(l)
		sh.dims = append(sh.dims, s.Width())
		sh.widths = append(sh.widths, s.Width()+s.Heads) // P_l, then s_src
	}
	for _, t := range c.NewParams().Tensors() {
		sh.params = append(sh.params, [2]int{t.Rows, t.Cols})
	}
	for _, w := range sh.dims {
		sh.initDims = append(sh.initDims, uint32(w))
	}
	sh.initDims[len(sh.initDims)-1] = uint32(c.Classes) // the parameter servers' width of the output layer
	lay := newLayout(cfg, part, cuts, sh)
	g := &gat{cfg: c, lay: lay, env: env}
	g.allocate()
	lay.scores = g.ssrc
	return g, lay, sh, nil
}

// allocate sets up the edge structures and the GAT buffers.
func (g *gat) allocate() {
	b := g.lay
	n, p := b.part.Owned, b.part
	g.adj = &tensor.CSR{Rows: n, Cols: p.Adj.Cols, RowPtr: p.Adj.RowPtr, ColIdx: p.Adj.ColIdx}
	localT, localPerm := transposeWhere(g.adj, 0, n, n, func(c int32) int {
		if int(c) < n {
			return int(c)
		}
		return -1
	})
	L, R, nnz := g.cfg.Layers, b.slots, int(g.adj.NNZ())
	rows := n + len(p.Ghosts)
	g.ssrc, g.alpha, g.du = make([][]*tensor.Dense, L), make([][]*tensor.Dense, L), make([][]*tensor.Dense, L)
	for l := range L {
		h := g.cfg.Shape(l).Heads
		g.sdst = append(g.sdst, tensor.NewDense(n, h))
		for range R {
			g.ssrc[l] = append(g.ssrc[l], tensor.NewDense(rows, h))
			g.alpha[l] = append(g.alpha[l], tensor.NewDense(nnz, h))
			g.du[l] = append(g.du[l], tensor.NewDense(nnz, h))
		}
		g.compS = append(g.compS, newBufPool(rows, h))
		g.compE = append(g.compE, newBufPool(nnz, h))
		g.eval.sdst = append(g.eval.sdst, tensor.NewDense(n, h))
		g.eval.alpha = append(g.eval.alpha, tensor.NewDense(nnz, h))
	}
	g.eval.logits = tensor.NewDense(n, g.cfg.Classes)
	for i := range b.ivs {
		iv := b.ivs[i].Interval
		gi := gatInterval{e0: g.adj.RowPtr[iv.Lo], e1: g.adj.RowPtr[iv.Hi], act: make([]model.GATActivation, L), reads: make([][]pipeline.Read, L)}
		gi.block = rowBlock(g.adj, iv.Lo, iv.Hi)
		gi.localT = rowBlock(localT, iv.Lo, iv.Hi)
		gi.localPerm = localPerm[localT.RowPtr[iv.Lo]:localT.RowPtr[iv.Hi]]
		gi.ghostT, gi.ghostPerm = transposeWhere(g.adj, iv.Lo, iv.Hi, len(iv.Touched), func(c int32) int {
			if int(c) < n {
				return -1
			}
			t, _ := slices.BinarySearch(iv.Touched, c-int32(n))
			return t
		})
		gi.grads = g.cfg.NewParams()
		gi.flatG = gi.grads.Tensors()
		for l := range L {
			sh := g.cfg.Shape(l)
			gi.dDst = append(gi.dDst, tensor.NewDense(iv.Rows(), sh.Heads))
			gi.dSrc = append(gi.dSrc, tensor.NewDense(iv.Rows(), sh.Heads))
			gi.ghostP = append(gi.ghostP, tensor.NewDense(len(iv.Touched), sh.Width()))
			gi.ghostS = append(gi.ghostS, tensor.NewDense(len(iv.Touched), sh.Heads))
		}
		gi.logits, gi.dLogits = tensor.NewDense(iv.Rows(), g.cfg.Classes), tensor.NewDense(iv.Rows(), g.cfg.Classes)
		g.ivs = append(g.ivs, gi)
		g.eval.act = append(g.eval.act, make([]model.GATActivation, L))
	}
}

// rowBlock returns rows [lo, hi) of a with offsets from 0, sharing a's column indices.
func rowBlock(a *tensor.CSR, lo, hi int) *tensor.CSR {
	s, e := a.RowPtr[lo], a.RowPtr[hi]
	rp := make([]int64, hi-lo+1)
	for i := range rp {
		rp[i] = a.RowPtr[lo+i] - s
	}
	return &tensor.CSR{Rows: hi - lo, Cols: a.Cols, RowPtr: rp, ColIdx: a.ColIdx[s:e]}
}

// transposeWhere returns the entries of rows [lo, hi) of a whose column rowOf maps to an output
// row (rows of them; −1 skips the entry), transposed: output row t lists, ascending, the rows r
// of a with such an entry (columns span a.Rows). perm gives each output entry's position in a.
func transposeWhere(a *tensor.CSR, lo, hi, rows int, rowOf func(c int32) int) (*tensor.CSR, []int64) {
	t := &tensor.CSR{Rows: rows, Cols: a.Rows, RowPtr: make([]int64, rows+1)}
	for k := a.RowPtr[lo]; k < a.RowPtr[hi]; k++ {
		if o := rowOf(a.ColIdx[k]); o >= 0 {
			t.RowPtr[o+1]++
		}
	}
	for o := range rows {
		t.RowPtr[o+1] += t.RowPtr[o]
	}
	t.ColIdx = make([]int32, t.RowPtr[rows])
	perm := make([]int64, t.RowPtr[rows])
	next := slices.Clone(t.RowPtr[:rows])
	for r := lo; r < hi; r++ {
		for k := a.RowPtr[r]; k < a.RowPtr[r+1]; k++ {
			if o := rowOf(a.ColIdx[k]); o >= 0 {
				t.ColIdx[next[o]], perm[next[o]] = int32(r), k
				next[o]++
			}
		}
	}
	return t, perm
}

// layerParams returns layer l's parameters in the weights w (every parameter tensor).
func layerParams(w []*tensor.Dense, l int) model.GATLayer {
	return model.GATLayer{W: w[4*l], ADst: w[4*l+1], ASrc: w[4*l+2], Bias: w[4*l+3]}
}

// prevBias returns b_{l-1} of the weights w, nil in layer 0.
func prevBias(w []*tensor.Dense, l int) *tensor.Dense {
	if l == 0 {
		return nil
	}
	return w[4*(l-1)+3]
}

// avRequest returns the request of AV_l or ∇AV_l of interval i in epoch e.
func (g *gat) avRequest(i, l, e int, w []*tensor.Dense, train bool) dispatch.TaskRequest {
	iv := &g.lay.ivs[i]
	p := layerParams(w, l)
	req := dispatch.TaskRequest{GAT: g.cfg, Layer: l, RowOffset: g.lay.part.Lo + iv.Lo, RowIDs: iv.ids, Key: model.DropoutKey(g.env.seed, e, l),
		Train: train, W: p.W, ADst: p.ADst, ASrc: p.ASrc, PrevBias: prevBias(w, l)}
	if l == 0 {
		req.Features = iv.feats
	}
	return req
}

// aeRequest returns the request of AE_l or ∇AE_l of interval i in epoch e, given the sources'
// s_src (owned then ghost rows) and the interval's s_dst.
func (g *gat) aeRequest(i, l, e int, dst, src *tensor.Dense, train bool) dispatch.TaskRequest {
	iv := &g.lay.ivs[i]
	return dispatch.TaskRequest{Op: dispatch.OpEdgeForward, GAT: g.cfg, Layer: l, RowOffset: g.lay.part.Lo + iv.Lo, RowIDs: iv.ids,
		Key: model.AttentionKey(g.env.seed, e, l), Train: train, Adj: g.ivs[i].block, DstScore: dst, SrcScore: src, SrcIDs: g.lay.part.OriginalIDs}
}

func (g *gat) run(ctx context.Context, st pipeline.Started) (float64, error) {
	t, b := st.Task, g.lay
	iv, gi := &b.ivs[t.Interval], &g.ivs[t.Interval]
	slot, l, L := t.Epoch%b.slots, t.Layer, g.cfg.Layers
	switch t.Kind {
	case pipeline.KindAV:
		if l == L {
			return g.loss(ctx, t, iv, gi)
		}
		gi.version = st.Weights
		w, err := g.env.weightsFor(ctx, st)
		if err != nil {
			return 0, err
		}
		req := g.avRequest(t.Interval, l, t.Epoch, w, true)
		if l > 0 {
			req.Z = iv.zOf(t.Epoch)[l-1]
		}
		req.Op, req.Out, req.GATAct = dispatch.OpGATForward, iv.pView[l][slot], &gi.act[l]
		req.OutDst, req.OutSrc = g.sdst[l].RowSlice(iv.Lo, iv.Hi), g.ssrc[l][slot].RowSlice(iv.Lo, iv.Hi)
		return 0, g.env.call(ctx, st, req)
	case pipeline.KindGA:
		gi.reads[l] = append(gi.reads[l][:0], st.Reads...)
		p, doneP := b.compose(b.p[l], b.compP[l], st.Reads, true)
		defer doneP()
		src, doneS := b.compose(g.ssrc[l], g.compS[l], st.Reads, true)
		defer doneS()
		alpha := g.alpha[l][slot].RowSlice(int(gi.e0), int(gi.e1))
		req := g.aeRequest(t.Interval, l, t.Epoch, g.sdst[l].RowSlice(iv.Lo, iv.Hi), src, true)
		req.Out = alpha
		if err := g.env.call(ctx, st, req); err != nil {
			return 0, err
		}
		tensor.EdgeAggregate(iv.zOf(t.Epoch)[l], gi.block, alpha, nil, p)
	case pipeline.KindBackGA:
		p, doneP := b.compose(b.p[l], b.compP[l], gi.reads[l], true)
		defer doneP()
		src, doneS := b.compose(g.ssrc[l], g.compS[l], gi.reads[l], true)
		defer doneS()
		dz := b.dz[l][slot]
		du := g.du[l][slot].RowSlice(int(gi.e0), int(gi.e1))
		tensor.EdgeDot(du, gi.block, dz.RowSlice(iv.Lo, iv.Hi), p) // dα̃
		req := g.aeRequest(t.Interval, l, t.Epoch, g.sdst[l].RowSlice(iv.Lo, iv.Hi), src, true)
		req.Op, req.DAlpha, req.Out, req.OutDst = dispatch.OpEdgeBackward, du, du, gi.dDst[l]
		if err := g.env.call(ctx, st, req); err != nil {
			return 0, err
		}
		if gi.ghostT.Rows > 0 {
			tensor.EdgeAggregate(gi.ghostP[l], gi.ghostT, g.alpha[l][slot], gi.ghostPerm, dz)
			tensor.EdgeSum(gi.ghostS[l], gi.ghostT, g.du[l][slot], gi.ghostPerm)
			interleave(iv.ghostC[l], gi.ghostP[l], gi.ghostS[l])
		}
	case pipeline.KindBackAV:
		g.gatherGradients(iv, gi, l, st.Reads)
		w, err := g.env.weightsFor(ctx, st)
		if err != nil {
			return 0, err
		}
		req := g.avRequest(t.Interval, l, t.Epoch, w, true)
		if l > 0 {
			req.Z = iv.zOf(t.Epoch)[l-1]
			req.Out, req.DBias = iv.dzView[l-1][slot], gi.grads[l-1].Bias
		}
		req.Op, req.GATAct, req.P, req.DP, req.DDst, req.DSrc = dispatch.OpGATBackward, &gi.act[l], iv.pView[l][slot], iv.dp[l], gi.dDst[l], gi.dSrc[l]
		req.DW, req.DADst, req.DASrc = gi.grads[l].W, gi.grads[l].ADst, gi.grads[l].ASrc
		return 0, g.env.call(ctx, st, req)
	default:
		return 0, fmt.Errorf("GAT task %v is not run here", t)
	}
	return 0, nil
}

// loss is the GAT's AV_L: the logits of the interval's rows (the mean of the heads plus the
// output bias of the pinned version), the loss, dZ_{L-1} and the output bias's gradient.
func (g *gat) loss(ctx context.Context, t pipeline.Task, iv *interval, gi *gatInterval) (float64, error) {
	L := g.cfg.Layers
	w, err := g.env.weights.at(ctx, gi.version)
	if err != nil {
		return 0, err
	}
	bias, dBias := w[4*(L-1)+3], gi.grads[L-1].Bias
	if err := g.cfg.OutputForward(iv.zOf(t.Epoch)[L-1], bias, gi.logits); err != nil {
		return 0, err
	}
	loss, err := model.LossForward(gi.logits, iv.labels, iv.train, g.lay.part.Totals[0], gi.dLogits)
	if err != nil {
		return 0, err
	}
	dBias.Zero()
	return loss, g.cfg.OutputBackward(gi.dLogits, iv.dzView[L-1][t.Epoch%g.lay.slots], dBias)
}

// interleave writes the rows of a followed by those of b into dst (a.Cols+b.Cols wide).
func interleave(dst, a, b *tensor.Dense) {
	for r := range dst.Rows {
		n := copy(dst.Row(r), a.Row(r))
		copy(dst.Row(r)[n:], b.Row(r))
	}
}

// composeEdges returns the edge-value buffer ∇AV reads: the slot of the common epoch when the
// local intervals are read at the same epoch, otherwise a composite holding each local
// interval's entries of its epoch.
func (g *gat) composeEdges(slots []*tensor.Dense, pool *bufPool, reads []pipeline.Read) (*tensor.Dense, func()) {
	return g.lay.composeRows(slots, pool, reads, func(r pipeline.Read) (lo, hi int, ok bool) {
		if r.From.Partition != g.lay.self {
			return 0, 0, false
		}
		gi := &g.ivs[r.From.Interval]
		return int(gi.e0), int(gi.e1), true
	})
}

// gatherGradients computes dP_l and ds_src of the interval's rows: the owned part from the
// local intervals' α̃_l, du_l and dZ_l rows, plus the contributions remote intervals pushed,
// each of the epoch the scheduler names.
func (g *gat) gatherGradients(iv *interval, gi *gatInterval, l int, reads []pipeline.Read) {
	b := g.lay
	dz, doneZ := b.compose(b.dz[l], b.compDZ[l], reads, false)
	defer doneZ()
	alpha, doneA := g.composeEdges(g.alpha[l], g.compE[l], reads)
	defer doneA()
	du, doneU := g.composeEdges(g.du[l], g.compE[l], reads)
	defer doneU()
	dp, ds := iv.dp[l], gi.dSrc[l]
	tensor.EdgeAggregate(dp, gi.localT, alpha, gi.localPerm, dz)
	tensor.EdgeSum(ds, gi.localT, du, gi.localPerm)
	w := dp.Cols
	b.eachContribution(iv, l, reads, func(i int, src []float32) {
		for j, v := range src[:w] {
			dp.Data[i*w+j] += v
		}
		for j, v := range src[w:] {
			ds.Data[i*ds.Cols+j] += v
		}
	})
}

func (g *gat) gradient(t pipeline.Task, i int) *tensor.Dense { return g.ivs[t.Interval].flatG[i] }

func (g *gat) evalForward(ctx context.Context, i, l int, w []*tensor.Dense, pb passBuffers) error {
	iv, ev := &g.lay.ivs[i], &g.eval
	req := g.avRequest(i, l, 0, w, false)
	if l > 0 {
		req.Z = pb.in.RowSlice(iv.Lo, iv.Hi)
	}
	req.Op, req.Out, req.GATAct = dispatch.OpGATForward, pb.p.RowSlice(iv.Lo, iv.Hi), &ev.act[i][l]
	req.OutDst, req.OutSrc = ev.sdst[l].RowSlice(iv.Lo, iv.Hi), pb.scores.RowSlice(iv.Lo, iv.Hi)
	_, err := g.env.backend.Run(ctx, req)
	return err
}

// evalGather is the evaluation's AE_l and GA_l of a GAT: the attention coefficients of every
// interval's in-edges (no dropout), then Z_l.
func (g *gat) evalGather(ctx context.Context, l int, pb passBuffers) error {
	b, ev := g.lay, &g.eval
	err := fanOut(indices(len(b.ivs)), func(i int) error {
		iv, gi := &b.ivs[i], &g.ivs[i]
		req := g.aeRequest(i, l, 0, ev.sdst[l].RowSlice(iv.Lo, iv.Hi), pb.scores, false)
		req.Out = ev.alpha[l].RowSlice(int(gi.e0), int(gi.e1))
		_, err := g.env.backend.Run(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	tensor.EdgeAggregate(pb.z, g.adj, ev.alpha[l], nil, pb.p)
	return nil
}

func (g *gat) logits(w []*tensor.Dense, z *tensor.Dense) (*tensor.Dense, error) {
	L := g.cfg.Layers
	if err := g.cfg.OutputForward(z, w[4*(L-1)+3], g.eval.logits); err != nil {
		return nil, err
	}
	return g.eval.logits, nil
}

func (g *gat) embeddings(w []*tensor.Dense, z *tensor.Dense) *tensor.Dense {
	h := tensor.NewDense(z.Rows, z.Cols)
	tensor.ELU(h, z, w[4*(g.cfg.Layers-2)+3].Data)
	return h
}

// slots names the flat parameter list (W, ADst, ASrc, Bias of every layer).
func (g *gat) slots(w []*tensor.Dense) []export.Slot {
	p := make(model.GATParams, g.cfg.Layers)
	for l := range p {
		p[l] = model.GATLayer{W: w[4*l], ADst: w[4*l+1], ASrc: w[4*l+2], Bias: w[4*l+3]}
	}
	return export.GATSlots(p)
}
