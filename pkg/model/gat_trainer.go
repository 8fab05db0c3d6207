package model

import (
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// GATTrainConfig is what one GAT training run needs besides the data.
type GATTrainConfig struct {
	GAT         GATConfig
	LR          float32
	WeightDecay float32 // L2 decay on every parameter, as in the reference GAT
	Seed        uint64
	Intervals   int // destination-vertex intervals the edge tasks (AE, GA, ∇AE) are cut into; 0 means 1
}

// GATTrainer runs GAT training in one process over a single partition that holds the whole
// graph, calling the task functions (AV, AE, GA, their backward passes, WU) the distributed graph
// servers and tensor workers call. The edge tasks run once per destination interval, each on
// that interval's in-edges. Buffers are allocated once and reused across epochs.
type GATTrainer struct {
	cfg    GATTrainConfig
	data   *graph.Dataset
	adj    *tensor.CSR // A + I: row i lists the in-edges (j → i) of i, self loop included
	adjT   *tensor.CSR // its transpose: row j lists the out-edges of j
	perm   []int64     // entry k of adjT is entry perm[k] of adj
	parts  []edgeInterval
	params GATParams
	grads  GATParams
	flatP  []*tensor.Dense // params and grads as the optimizer sees them
	flatG  []*tensor.Dense
	adam   *Adam

	act     []GATActivation // per layer: H_l
	v, dv   []*GATVertex    // per layer: P_l and its scores; their gradients
	alpha   []*tensor.Dense // per layer: α̃_l, one row per entry of adj
	dAlpha  []*tensor.Dense // per layer: dLoss/dα̃_l, then dLoss/du_l
	z, dz   []*tensor.Dense // per layer: Z_l = GA_l output, dLoss/dZ_l
	logits  *tensor.Dense   // N × Classes
	dLogits *tensor.Dense
}

// edgeInterval is a range [lo, hi) of destination vertices and the block of their in-edges.
type edgeInterval struct {
	lo, hi int
	adj    *tensor.CSR // rows lo..hi of the trainer's adj, offsets rebased to 0
	edge0  int64       // global position of the block's first entry
}

// NewGATTrainer prepares a GAT run on d: the adjacency with self loops and its transpose, the
// destination intervals, parameters from the seed and all buffers. The features are used as
// they are (normalise them first if the model wants it).
func NewGATTrainer(d *graph.Dataset, cfg GATTrainConfig) (*GATTrainer, error) {
	if !d.Features.Present() {
		return nil, fmt.Errorf("dataset %s has no features to train on: %w", d.Name, graph.ErrNoFeatures)
	}
	g := cfg.GAT
	if g.InDim != d.NumFeatures() || g.Classes != d.NumClasses {
		return nil, fmt.Errorf("model %d→%d does not fit dataset %s (%d features, %d classes): %w",
			g.InDim, g.Classes, d.Name, d.NumFeatures(), d.NumClasses, ErrShape)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if len(d.Train) == 0 {
		return nil, fmt.Errorf("dataset %s has no training nodes", d.Name)
	}
	n := d.NumNodes()
	if cfg.Intervals == 0 {
		cfg.Intervals = 1
	}
	if cfg.Intervals < 1 || cfg.Intervals > max(n, 1) {
		return nil, fmt.Errorf("gat: %d intervals for %d vertices", cfg.Intervals, n)
	}
	t := &GATTrainer{cfg: cfg, data: d, adj: withSelfLoops(d.Adj)}
	t.adjT, t.perm = tensor.EdgeTranspose(t.adj)
	for c := 0; c < cfg.Intervals; c++ {
		t.parts = append(t.parts, rowBlock(t.adj, c*n/cfg.Intervals, (c+1)*n/cfg.Intervals))
	}
	t.params, t.grads = g.InitParams(cfg.Seed), g.NewParams()
	t.flatP, t.flatG = t.params.Tensors(), t.grads.Tensors()
	decay := make([]float32, len(t.flatP))
	for i := range decay {
		decay[i] = cfg.WeightDecay
	}
	adam, err := NewAdam(AdamConfig{LR: cfg.LR, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: decay}, t.flatP)
	if err != nil {
		return nil, err
	}
	t.adam = adam
	nnz := int(t.adj.NNZ())
	t.act = make([]GATActivation, g.Layers)
	for l := 0; l < g.Layers; l++ {
		s := g.Shape(l)
		t.v = append(t.v, g.NewVertex(l, n))
		t.dv = append(t.dv, g.NewVertex(l, n))
		t.alpha = append(t.alpha, tensor.NewDense(nnz, s.Heads))
		t.dAlpha = append(t.dAlpha, tensor.NewDense(nnz, s.Heads))
		t.z = append(t.z, tensor.NewDense(n, s.Width()))
		t.dz = append(t.dz, tensor.NewDense(n, s.Width()))
	}
	t.logits, t.dLogits = tensor.NewDense(n, g.Classes), tensor.NewDense(n, g.Classes)
	return t, nil
}

// withSelfLoops returns the structure of adj + I (Val nil): every row gains its diagonal entry,
// in sorted position, unless it has one.
func withSelfLoops(adj *tensor.CSR) *tensor.CSR {
	n := adj.Rows
	out := &tensor.CSR{Rows: n, Cols: adj.Cols, RowPtr: make([]int64, n+1), ColIdx: make([]int32, 0, adj.NNZ()+int64(n))}
	for i := 0; i < n; i++ {
		row := adj.ColIdx[adj.RowPtr[i]:adj.RowPtr[i+1]]
		k := 0
		for k < len(row) && int(row[k]) < i {
			k++
		}
		out.ColIdx = append(out.ColIdx, row[:k]...)
		if k == len(row) || int(row[k]) != i {
			out.ColIdx = append(out.ColIdx, int32(i))
		}
		out.ColIdx = append(out.ColIdx, row[k:]...)
		out.RowPtr[i+1] = int64(len(out.ColIdx))
	}
	return out
}

// rowBlock returns the interval [lo, hi) of a's rows as a block whose offsets start at 0,
// sharing a's column indices.
func rowBlock(a *tensor.CSR, lo, hi int) edgeInterval {
	s, e := a.RowPtr[lo], a.RowPtr[hi]
	rp := make([]int64, hi-lo+1)
	for i := range rp {
		rp[i] = a.RowPtr[lo+i] - s
	}
	return edgeInterval{lo: lo, hi: hi, edge0: s, adj: &tensor.CSR{Rows: hi - lo, Cols: a.Cols, RowPtr: rp, ColIdx: a.ColIdx[s:e]}}
}

// Params returns the current parameters (aliased, not copied).
func (t *GATTrainer) Params() GATParams { return t.params }

// edgeInput returns the AE input of layer l for interval p.
func (t *GATTrainer) edgeInput(l int, p edgeInterval, epoch int, train bool) *AEInput {
	return &AEInput{
		Layer: l, Adj: p.adj, DstScore: t.v[l].DstScore.RowSlice(p.lo, p.hi), SrcScore: t.v[l].SrcScore,
		RowOffset: p.lo, Key: AttentionKey(t.cfg.Seed, epoch, l), Train: train,
	}
}

// edgeRows returns the rows of an edge-value matrix that belong to interval p.
func edgeRows(m *tensor.Dense, p edgeInterval) *tensor.Dense {
	return m.RowSlice(int(p.edge0), int(p.edge0+p.adj.NNZ()))
}

// prevBias returns b_{l-1}, nil in layer 0.
func (t *GATTrainer) prevBias(params GATParams, l int) *tensor.Dense {
	if l == 0 {
		return nil
	}
	return params[l-1].Bias
}

// forward runs AV_l, AE_l and GA_l for every layer and the output AV, leaving the logits.
func (t *GATTrainer) forward(epoch int, train bool) error {
	g := t.cfg.GAT
	for l := range t.params {
		if err := g.AVForward(layerInput(t.data, t.z, t.cfg.Seed, l, epoch, train), t.prevBias(t.params, l), t.params[l], &t.act[l], t.v[l]); err != nil {
			return fmt.Errorf("epoch %d AV %d: %w", epoch, l, err)
		}
		for _, p := range t.parts {
			alpha := edgeRows(t.alpha[l], p)
			if err := g.AEForward(t.edgeInput(l, p, epoch, train), alpha); err != nil {
				return fmt.Errorf("epoch %d AE %d: %w", epoch, l, err)
			}
			tensor.EdgeAggregate(t.z[l].RowSlice(p.lo, p.hi), p.adj, alpha, nil, t.v[l].P) // GA_l
		}
	}
	last := len(t.params) - 1
	if err := g.OutputForward(t.z[last], t.params[last].Bias, t.logits); err != nil {
		return fmt.Errorf("epoch %d output AV: %w", epoch, err)
	}
	return nil
}

// Epoch runs one training epoch (forward, loss, backward, update) and returns the training loss
// of its forward pass, which used dropout. A NaN or infinite loss, gradient or updated parameter
// stops it with an error wrapping ErrNotFinite that names the epoch, layer and task.
func (t *GATTrainer) Epoch(epoch int) (float64, error) {
	if err := t.forward(epoch, true); err != nil {
		return 0, err
	}
	loss, err := LossForward(t.logits, t.data.Labels, t.data.Train, len(t.data.Train), t.dLogits)
	if err != nil {
		return 0, fmt.Errorf("epoch %d loss: %w", epoch, err)
	}
	if err := checkLoss(loss, epoch, len(t.params)-1); err != nil {
		return 0, err
	}
	for _, gr := range t.flatG {
		gr.Zero()
	}
	g, last := t.cfg.GAT, len(t.params)-1
	if err := g.OutputBackward(t.dLogits, t.dz[last], t.grads[last].Bias); err != nil {
		return 0, fmt.Errorf("epoch %d ∇output AV: %w", epoch, err)
	}
	for l := last; l >= 0; l-- {
		// ∇GA_l: dα̃ = ⟨dZ_i, P_j⟩ on every in-edge, dP = the aggregation over the transposed edges.
		for _, p := range t.parts {
			tensor.EdgeDot(edgeRows(t.dAlpha[l], p), p.adj, t.dz[l].RowSlice(p.lo, p.hi), t.v[l].P)
		}
		tensor.EdgeAggregate(t.dv[l].P, t.adjT, t.alpha[l], t.perm, t.dz[l])
		for _, p := range t.parts {
			if err := g.AEBackward(t.edgeInput(l, p, epoch, true), edgeRows(t.dAlpha[l], p), t.dv[l].DstScore.RowSlice(p.lo, p.hi)); err != nil {
				return 0, fmt.Errorf("epoch %d ∇AE %d: %w", epoch, l, err)
			}
		}
		tensor.EdgeSum(t.dv[l].SrcScore, t.adjT, t.dAlpha[l], t.perm) // ds_src: a source's out-edges
		var dzPrev, dbPrev *tensor.Dense
		if l > 0 {
			dzPrev, dbPrev = t.dz[l-1], t.grads[l-1].Bias
		}
		if err := g.AVBackward(layerInput(t.data, t.z, t.cfg.Seed, l, epoch, true), t.params[l], t.grads[l], &t.act[l], t.v[l], t.dv[l], dzPrev, dbPrev); err != nil {
			return 0, fmt.Errorf("epoch %d ∇AV %d: %w", epoch, l, err)
		}
	}
	if err := t.checkFinite(t.flatG, epoch, "∇AV/∇AE", "gradient"); err != nil {
		return 0, err
	}
	if err := t.adam.Step(t.flatP, t.flatG); err != nil {
		return 0, fmt.Errorf("epoch %d WU: %w", epoch, err)
	}
	if err := t.checkFinite(t.flatP, epoch, "WU", "updated parameter"); err != nil {
		return 0, err
	}
	return loss, nil
}

// gatParamNames names the four tensors of a GAT layer in the order of GATParams.Tensors.
var gatParamNames = [4]string{"W", "a_dst", "a_src", "bias"}

// checkFinite checks flat parameters or gradients (in GATParams.Tensors order) for NaN and Inf.
func (t *GATTrainer) checkFinite(flat []*tensor.Dense, epoch int, task, what string) error {
	for i, d := range flat {
		if err := checkFinite(d.Data, epoch, i/4, task, "the "+what+" "+gatParamNames[i%4]); err != nil {
			return err
		}
	}
	return nil
}

// Evaluate runs a forward pass without dropout and scores every split.
func (t *GATTrainer) Evaluate() (Metrics, error) {
	if err := t.forward(0, false); err != nil {
		return Metrics{}, err
	}
	return score(t.logits, t.data)
}

// score returns the losses and accuracies of logits on d's splits.
func score(logits *tensor.Dense, d *graph.Dataset) (Metrics, error) {
	var m Metrics
	var err error
	if m.TrainLoss, err = LossForward(logits, d.Labels, d.Train, len(d.Train), nil); err != nil {
		return m, err
	}
	if len(d.Val) > 0 {
		if m.ValLoss, err = LossForward(logits, d.Labels, d.Val, len(d.Val), nil); err != nil {
			return m, err
		}
	}
	m.TrainAcc = accuracy(logits, d.Labels, d.Train)
	m.ValAcc = accuracy(logits, d.Labels, d.Val)
	m.TestAcc = accuracy(logits, d.Labels, d.Test)
	return m, nil
}
