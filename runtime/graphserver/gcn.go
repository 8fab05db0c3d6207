package graphserver

import (
	"context"
	"fmt"
	"math"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// gcn is a graph server's GCN: AV_l and ∇AV_l are tensor tasks, GA_l and ∇GA_l SpMMs here.
type gcn struct {
	cfg model.GCNConfig
	lay *layout
	env taskEnv
	ivs []gcnInterval
	// keepSparse says that AV_0's activation, drop(X) of sparse features, is kept for ∇AV_0:
	// recomputing it costs a random draw per non-zero, a large share of a sparse-featured
	// epoch. Every other activation, drop(σ(Z_{l-1})), AV_l computes a block of rows at a time
	// and ∇AV_l recomputes so from Z_{l-1}, which the server keeps anyway: a vectorised pass
	// over the rows against 4 bytes per row and column of every epoch in flight.
	keepSparse bool
}

// gcnInterval is one interval's GCN state.
type gcnInterval struct {
	// sparse[parity] is AV_0's activation of the epochs of that parity when it is kept (with
	// the backward pass of epoch e beside the forward pass of e+1, the two epochs have one
	// each)
	sparse []model.Activation
	dw     [][]*tensor.Dense // [epoch parity][layer]: dW_l of the epoch, until WU
}

func newGCN(cfg *Config, part *partition.Part, cuts []partition.Interval, env taskEnv) (variant, *layout, modelShape, error) {
	d := cfg.Data
	m := model.GCNConfig{InDim: d.Features.Cols(), Hidden: cfg.Hidden, Classes: d.NumClasses, Layers: cfg.Layers, Dropout: float32(cfg.Dropout)}
	if err := m.Validate(); err != nil {
		return nil, nil, modelShape{}, err
	}
	sh := modelShape{dims: m.Dims(), widths: m.Dims()[1:]}
	for l := range m.Layers {
		sh.params = append(sh.params, [2]int{sh.dims[l], sh.dims[l+1]})
	}
	for _, w := range sh.dims {
		sh.initDims = append(sh.initDims, uint32(w))
	}
	if rows := int64(cfg.slots())*int64(part.Owned) + int64(cfg.ghostSlots())*int64(len(part.Ghosts)); rows > math.MaxInt32 {
		return nil, nil, modelShape{}, fmt.Errorf("partition %d: %d owned rows in %d slots and %d ghost rows in %d exceed the 2³¹ rows a Gather indexes; use more graph servers or a lower staleness bound", cfg.Partition, part.Owned, cfg.slots(), len(part.Ghosts), cfg.ghostSlots())
	}
	lay := newLayout(cfg, part, cuts, sh)
	g := &gcn{cfg: m, lay: lay, env: env, keepSparse: d.Features.Sparse != nil}
	for range lay.ivs {
		gi := gcnInterval{sparse: make([]model.Activation, lay.parities), dw: make([][]*tensor.Dense, lay.parities)}
		for p := range gi.dw {
			for l := range m.Layers {
				gi.dw[p] = append(gi.dw[p], tensor.NewDense(sh.dims[l], sh.dims[l+1]))
			}
		}
		g.ivs = append(g.ivs, gi)
	}
	return g, lay, sh, nil
}

func (g *gcn) run(ctx context.Context, st pipeline.Started) (float64, error) {
	t, b := st.Task, g.lay
	iv, gi := &b.ivs[t.Interval], &g.ivs[t.Interval]
	slot, l, L := t.Epoch%b.slots, t.Layer, g.cfg.Layers
	switch t.Kind {
	case pipeline.KindAV:
		if l == L {
			// The loss is a cheap per-row operation on logits that the Gather has just left in
			// this server's memory: it runs here, which saves every interval one tensor-task
			// round trip per epoch.
			if err := b.claim(rowsDZ, L-1, t); err != nil {
				return 0, err
			}
			res, err := dispatch.Execute(&dispatch.TaskRequest{
				Op: dispatch.OpLoss, Model: g.cfg, Z: iv.zOf(t.Epoch)[L-1], Labels: iv.labels, Rows: iv.train,
				Total: b.part.Totals[0], Out: iv.dzView[L-1][slot],
			}, nil)
			return res.Loss, err
		}
		req, err := g.avRequest(ctx, iv, st)
		if err != nil {
			return 0, err
		}
		if err := b.claim(rowsP, l, t); err != nil {
			return 0, err
		}
		req.Op, req.Out, req.Act = dispatch.OpForward, iv.pView[l][slot], g.kept(gi, t.Epoch, l)
		return 0, g.env.call(ctx, st, req)
	case pipeline.KindGA:
		defer b.guard.read(rowsP, l, st.Reads)()
		b.gather(iv.zOf(t.Epoch)[l], b.part.Adj, rowsP, l, iv, st.Reads, true)
	case pipeline.KindBackGA:
		// dP_l = Âᵀ dZ_l = Â dZ_l: the forward Gather on dZ_l, whose ghost rows the readers
		// shipped (pulled gradients)
		defer b.guard.read(rowsDZ, l, st.Reads)()
		b.gather(iv.dp[l], b.part.Adj, rowsDZ, l, iv, st.Reads, true)
	case pipeline.KindBackAV:
		req, err := g.avRequest(ctx, iv, st)
		if err != nil {
			return 0, err
		}
		req.Op, req.DP, req.DW = dispatch.OpBackward, iv.dp[l], gi.dwOf(t.Epoch)[l]
		req.Act = g.kept(gi, t.Epoch, l)
		req.ActKept = req.Act != nil
		if l > 0 {
			if err := b.claim(rowsDZ, l-1, t); err != nil {
				return 0, err
			}
			req.Out = iv.dzView[l-1][slot]
		}
		return 0, g.env.call(ctx, st, req)
	default:
		return 0, fmt.Errorf("GCN task %v is not run here", t)
	}
	return 0, nil
}

// avRequest returns the request of AV_l or ∇AV_l of an interval in the task's epoch, with the
// weight of the version the scheduler pinned; in the pull data path it names the weight by
// version and the parameter server that holds it instead, so that the function pulls it
// there (the server has pinned the version for the task's lifetime).
func (g *gcn) avRequest(ctx context.Context, iv *interval, st pipeline.Started) (dispatch.TaskRequest, error) {
	t := st.Task
	w, err := g.env.weightsFor(ctx, st)
	if err != nil {
		return dispatch.TaskRequest{}, err
	}
	req := dispatch.TaskRequest{
		Model: g.cfg, Layer: t.Layer, RowOffset: g.lay.part.Lo + iv.Lo, RowIDs: iv.ids,
		Key: model.DropoutKey(g.env.seed, t.Epoch, t.Layer), Train: true, W: w[t.Layer],
	}
	if t.Layer == 0 {
		req.Features = iv.feats
	} else {
		req.Z = iv.zOf(t.Epoch)[t.Layer-1]
	}
	if g.env.holder != nil {
		req.WeightVersion, req.WeightSource = uint64(st.Weights), g.env.holder(t.Layer)
	}
	return req, nil
}

func (g *gcn) gradient(t pipeline.Task, i int) *tensor.Dense {
	return g.ivs[t.Interval].dwOf(t.Epoch)[i]
}

func (g *gcn) evalForward(ctx context.Context, i, l int, w []*tensor.Dense, pb passBuffers) error {
	b := g.lay
	iv := &b.ivs[i]
	req := dispatch.TaskRequest{Op: dispatch.OpForward, Model: g.cfg, Layer: l, RowOffset: b.part.Lo + iv.Lo,
		W: w[l], Out: pb.p.RowSlice(iv.Lo, iv.Hi)}
	if l == 0 {
		req.Features = iv.feats
	} else {
		req.Z = pb.in.RowSlice(iv.Lo, iv.Hi)
	}
	_, err := g.env.backend.Run(ctx, req)
	return err
}

func (g *gcn) evalGather(_ context.Context, _ int, pb passBuffers) error {
	tensor.SpMM(pb.z, g.lay.part.Adj, pb.p)
	return nil
}

func (g *gcn) logits(_ []*tensor.Dense, z *tensor.Dense) (*tensor.Dense, error) { return z, nil }

func (g *gcn) embeddings(_ []*tensor.Dense, z *tensor.Dense) *tensor.Dense {
	h := tensor.NewDense(z.Rows, z.Cols)
	tensor.ReLU(h, z)
	return h
}

func (g *gcn) slots(w []*tensor.Dense) []export.Slot { return export.GCNSlots(w) }

// kept returns the buffer in which AV_l of epoch e keeps its activation for ∇AV_l, or nil when
// ∇AV_l recomputes it.
func (g *gcn) kept(gi *gcnInterval, e, l int) *model.Activation {
	if l > 0 || !g.keepSparse {
		return nil
	}
	return &gi.sparse[e%len(gi.sparse)]
}

// dwOf returns an interval's dW_l buffers of epoch e.
func (gi *gcnInterval) dwOf(e int) []*tensor.Dense { return gi.dw[e%len(gi.dw)] }
