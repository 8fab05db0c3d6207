package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// A GAT layer l (Veličković et al. 2018) with K heads of width F computes, for every vertex i
// and head k, h'_i = Σ_{j ∈ N(i) ∪ {i}} α^k_ij W^k h_j, with
//
//	α^k_ij = softmax_j(LeakyReLU(a^kᵀ [W^k h_i ‖ W^k h_j])),   slope 0.2,
//
// the heads concatenated in hidden layers and averaged in the output layer, a bias added after
// aggregation, ELU between layers, and dropout on every layer's input and on the coefficients.
// Writing a^k = [a^k_dst ‖ a^k_src], the logit is s^k_dst(i) + s^k_src(j) with per-vertex scores
// s = aᵀ W h, so the edge work is O(E·K) once the O(N·K·F) scores exist. Cut into Dorylus tasks:
//
//	AV_l   H = drop(σ(Z_{l-1} + b_{l-1})), P = H W, scores s_dst, s_src     worker (σ = ELU; id. in layer 0)
//	SC_l   send boundary rows of P and s_src to their ghosts                 graph server
//	AE_l   α̃ = drop(softmax(LeakyReLU(s_dst(i) + s_src(j)))) per in-edge   worker, one interval's in-edges
//	GA_l   Z_l = Σ_j α̃_ij P_j, per head                                       graph server
//	AV_L   logits = mean over heads of Z_{L-1} + b_{L-1}, softmax cross-entropy
//
// Backward, per layer from the top: ∇GA computes dα̃_ij = ⟨dZ_i, P_j⟩ per head (the edge dot) and
// dP_j = Σ_i α̃_ij dZ_i (the aggregation over the transposed edges); ∇AE turns dα̃ into du_ij,
// the gradient of the logit before the LeakyReLU, and sums it over each destination's in-edges
// into ds_dst; the graph server sums du over each source's out-edges into ds_src; ∇AV adds the
// score gradients to dP and yields dW, da_dst, da_src, the previous layer's db and dZ_{l-1}.
//
// Unlike the paper's TensorFlow code, and like PyTorch Geometric's GATConv, the heads of a layer
// share one input-dropout mask, P itself is not dropped, and the scores have no bias of their
// own (that code's 1×1 score convolutions add one scalar per head before the LeakyReLU).

// AttentionSlope is the negative slope of the LeakyReLU on the attention logits.
const AttentionSlope = 0.2

// GATConfig describes a graph attention network of any depth.
type GATConfig struct {
	InDim            int     // input feature width
	Hidden           int     // features per head in every hidden layer
	Heads            int     // attention heads of every hidden layer, concatenated
	OutHeads         int     // attention heads of the output layer, averaged
	Classes          int     // output width
	Layers           int     // number of attention layers, ≥ 1
	Dropout          float32 // dropout rate on each layer's input, in [0, 1)
	AttentionDropout float32 // dropout rate on the attention coefficients, in [0, 1)
}

// Validate reports a configuration that cannot be built.
func (c GATConfig) Validate() error {
	switch {
	case c.InDim < 1:
		return fmt.Errorf("gat: input width %d, want ≥ 1", c.InDim)
	case c.Classes < 2:
		return fmt.Errorf("gat: %d classes, want ≥ 2", c.Classes)
	case c.Layers < 1:
		return fmt.Errorf("gat: %d layers, want ≥ 1", c.Layers)
	case c.Layers > 1 && c.Hidden < 1:
		return fmt.Errorf("gat: hidden width %d per head, want ≥ 1", c.Hidden)
	case c.Layers > 1 && c.Heads < 1:
		return fmt.Errorf("gat: %d heads, want ≥ 1", c.Heads)
	case c.OutHeads < 1:
		return fmt.Errorf("gat: %d output heads, want ≥ 1", c.OutHeads)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("gat: dropout %g, want a rate in [0, 1)", c.Dropout)
	case !(c.AttentionDropout >= 0 && c.AttentionDropout < 1):
		return fmt.Errorf("gat: attention dropout %g, want a rate in [0, 1)", c.AttentionDropout)
	}
	return nil
}

// GATLayerShape gives the sizes of one attention layer.
type GATLayerShape struct {
	In    int // input width
	Heads int // attention heads
	F     int // features per head
	Out   int // width after combining the heads: Heads·F when concatenated, F when averaged
}

// Width returns the width of the layer's transformed features P = H W: Heads·F.
func (s GATLayerShape) Width() int { return s.Heads * s.F }

// Shape returns the sizes of layer l.
func (c GATConfig) Shape(l int) GATLayerShape {
	in := c.InDim
	if l > 0 {
		in = c.Heads * c.Hidden
	}
	if l == c.Layers-1 {
		return GATLayerShape{In: in, Heads: c.OutHeads, F: c.Classes, Out: c.Classes}
	}
	return GATLayerShape{In: in, Heads: c.Heads, F: c.Hidden, Out: c.Heads * c.Hidden}
}

// GATLayer holds the trainable tensors of one attention layer, or their gradients.
type GATLayer struct {
	W    *tensor.Dense // In × Heads·F
	ADst *tensor.Dense // Heads × F: attention weights of the destination vertex
	ASrc *tensor.Dense // Heads × F: attention weights of the source vertex
	Bias *tensor.Dense // 1 × Out, added after the heads are combined; may be nil for AVForward and AVBackward, which do not use it
}

// GATParams are the parameters of every layer.
type GATParams []GATLayer

// Tensors returns the parameters as one list (W, ADst, ASrc, Bias of layer 0, then layer 1, …),
// the order the optimizer sees them in.
func (p GATParams) Tensors() []*tensor.Dense {
	out := make([]*tensor.Dense, 0, 4*len(p))
	for _, l := range p {
		out = append(out, l.W, l.ADst, l.ASrc, l.Bias)
	}
	return out
}

// NewParams returns zeroed parameters of the model's shapes (the gradient buffers).
func (c GATConfig) NewParams() GATParams {
	p := make(GATParams, c.Layers)
	for l := range p {
		s := c.Shape(l)
		p[l] = GATLayer{
			W:    tensor.NewDense(s.In, s.Width()),
			ADst: tensor.NewDense(s.Heads, s.F),
			ASrc: tensor.NewDense(s.Heads, s.F),
			Bias: tensor.NewDense(1, s.Out),
		}
	}
	return p
}

// InitParams returns parameters deterministic for a seed: every head's W and attention vectors
// Glorot-uniform (W^k as an In×F matrix, a^k as an F×1 one), biases zero.
func (c GATConfig) InitParams(seed uint64) GATParams {
	rng := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	uniform := func(d []float32, fanIn, fanOut int) {
		limit := math.Sqrt(6 / float64(fanIn+fanOut))
		for i := range d {
			d[i] = float32((2*rng.Float64() - 1) * limit)
		}
	}
	p := c.NewParams()
	for l, layer := range p {
		s := c.Shape(l)
		uniform(layer.W.Data, s.In, s.F)
		uniform(layer.ADst.Data, s.F, 1)
		uniform(layer.ASrc.Data, s.F, 1)
	}
	return p
}

// AttentionKey derives the key of the attention-dropout mask of one layer in one epoch of a run.
func AttentionKey(seed uint64, epoch, layer int) uint64 {
	return mix64(DropoutKey(seed, epoch, layer) ^ 0xa0761d6478bd642f)
}

// GATVertex holds the per-vertex tensors of one layer for an interval of rows: in the forward
// pass P = H W and its scores, in the backward pass their gradients.
type GATVertex struct {
	P        *tensor.Dense // rows × Heads·F
	DstScore *tensor.Dense // rows × Heads: s_dst = a_dstᵀ P per head
	SrcScore *tensor.Dense // rows × Heads: s_src = a_srcᵀ P per head
}

// NewVertex returns zeroed per-vertex tensors of layer l for rows rows.
func (c GATConfig) NewVertex(l, rows int) *GATVertex {
	s := c.Shape(l)
	return &GATVertex{P: tensor.NewDense(rows, s.Width()), DstScore: tensor.NewDense(rows, s.Heads), SrcScore: tensor.NewDense(rows, s.Heads)}
}

func (c GATConfig) checkLayer(l int, p GATLayer) error {
	if l < 0 || l >= c.Layers {
		return fmt.Errorf("gat: layer %d of %d: %w", l, c.Layers, ErrShape)
	}
	s := c.Shape(l)
	ok := func(d *tensor.Dense, r, k int) bool {
		return d != nil && d.Rows == r && d.Cols == k && len(d.Data) == r*k
	}
	if !ok(p.W, s.In, s.Width()) || !ok(p.ADst, s.Heads, s.F) || !ok(p.ASrc, s.Heads, s.F) || (p.Bias != nil && !ok(p.Bias, 1, s.Out)) {
		return fmt.Errorf("gat: layer %d wants W %dx%d, attention %dx%d, bias 1x%d: %w", l, s.In, s.Width(), s.Heads, s.F, s.Out, ErrShape)
	}
	return nil
}

func (c GATConfig) checkVertex(l, rows int, v *GATVertex) error {
	s := c.Shape(l)
	if v == nil || v.P == nil || v.DstScore == nil || v.SrcScore == nil ||
		v.P.Rows != rows || v.P.Cols != s.Width() || v.DstScore.Rows != rows || v.DstScore.Cols != s.Heads ||
		v.SrcScore.Rows != rows || v.SrcScore.Cols != s.Heads {
		return fmt.Errorf("gat layer %d: vertex tensors must be %dx%d and %dx%d: %w", l, rows, s.Width(), rows, s.Heads, ErrShape)
	}
	return nil
}

// GATActivation is what one GAT AV task keeps for ∇AV: H = drop(σ(input)) and, above layer 0,
// the ELU output before dropout. A stateless worker recomputes it with Activate.
type GATActivation struct {
	Activation               // H
	ELU        *tensor.Dense // layer ≥ 1: ELU(Z_{l-1} + b_{l-1})

	// Layer 0 with sparse features: Hᵀ, so that dW = Hᵀ dP is a row-parallel SpMM; its
	// structure is built once per feature block (tOf) and its values gathered each backward pass.
	hT    *tensor.CSR
	permT []int64 // entry k of hT is entry permT[k] of H
	tOf   *tensor.CSR
	dW    *tensor.Dense // Hᵀ dP before it is added to the gradient
}

// addSparseWeightGrad adds Hᵀ dP to dW for a sparse layer-0 activation H whose features are x.
func (act *GATActivation) addSparseWeightGrad(x *tensor.CSR, dP, dW *tensor.Dense) {
	if act.tOf != x {
		act.hT, act.permT = tensor.EdgeTranspose(x)
		act.hT.Val = make([]float32, len(act.permT))
		act.tOf = x
	}
	val, src, perm := act.hT.Val, act.Sparse.Val, act.permT
	tensor.ParallelFor(len(perm), 1<<14, func(lo, hi int) {
		for k, p := range perm[lo:hi] {
			val[lo+k] = src[p]
		}
	})
	act.dW = reshape(act.dW, dW.Rows, dW.Cols)
	tensor.SpMM(act.dW, act.hT, dP)
	tensor.AddInPlace(dW, act.dW)
}

// Activate computes H = drop(σ(input)) into act, allocating act's buffers on first use and
// reusing them afterwards: in layer 0 σ is the identity on the features, above it H =
// drop(ELU(Z_{l-1} + b_{l-1})) with prevBias = b_{l-1} (nil in layer 0).
func (c GATConfig) Activate(in *AVInput, prevBias *tensor.Dense, act *GATActivation) error {
	if in.Layer < 0 || in.Layer >= c.Layers {
		return fmt.Errorf("gat AV: layer %d of %d: %w", in.Layer, c.Layers, ErrShape)
	}
	if err := in.checkRowIDs("gat AV"); err != nil {
		return err
	}
	p := float32(0)
	if in.Train {
		p = c.Dropout
	}
	width := c.Shape(in.Layer).In
	if in.Layer == 0 {
		switch x := in.Features; {
		case x.Sparse != nil && x.Sparse.Cols == width:
			if act.Sparse == nil {
				act.Sparse = &tensor.CSR{}
			}
			tensor.DropoutCSR(act.Sparse, x.Sparse, p, in.Key, in.RowOffset, in.RowIDs)
			return nil
		case x.Dense != nil && x.Dense.Cols == width:
			act.Dense = reshape(act.Dense, x.Dense.Rows, width)
			tensor.Dropout(act.Dense, x.Dense, p, in.Key, in.RowOffset, in.RowIDs)
			return nil
		}
		return fmt.Errorf("gat AV 0: features are not %d columns wide: %w", width, ErrShape)
	}
	if in.Z == nil || in.Z.Cols != width || prevBias == nil || len(prevBias.Data) != width {
		return fmt.Errorf("gat AV %d: input must be %d columns wide with a bias of %d: %w", in.Layer, width, width, ErrShape)
	}
	act.ELU = reshape(act.ELU, in.Z.Rows, width)
	act.Dense = reshape(act.Dense, in.Z.Rows, width)
	tensor.ELU(act.ELU, in.Z, prevBias.Data)
	tensor.Dropout(act.Dense, act.ELU, p, in.Key, in.RowOffset, in.RowIDs)
	return nil
}

// AVForward is the ApplyVertex task of layer l: H = drop(σ(input)) into act, then P = H W and
// the scores s_dst = a_dstᵀ P, s_src = a_srcᵀ P of every head into out (rows of the interval).
func (c GATConfig) AVForward(in *AVInput, prevBias *tensor.Dense, p GATLayer, act *GATActivation, out *GATVertex) error {
	if err := c.checkLayer(in.Layer, p); err != nil {
		return err
	}
	if err := c.Activate(in, prevBias, act); err != nil {
		return err
	}
	if err := c.checkVertex(in.Layer, in.Rows(), out); err != nil {
		return err
	}
	if in.Layer == 0 && act.Sparse != nil {
		tensor.SpMM(out.P, act.Sparse, p.W)
	} else {
		tensor.MatMul(out.P, act.Dense, false, p.W, false, 1, 0)
	}
	tensor.HeadDot(out.DstScore, out.P, p.ADst)
	tensor.HeadDot(out.SrcScore, out.P, p.ASrc)
	return nil
}

// AVBackward is the ∇AV task of layer l. v is the forward output of AVForward (only P is read)
// and act its activation (recomputed by Activate when the worker kept none); dv holds dLoss/dP
// from ∇GA and the score gradients from ∇AE. It adds the score gradients into dv.P, adds dW,
// dADst and dASrc to g (g.Bias is not touched: the bias of layer l is applied, and its gradient
// found, in the task above), and for l ≥ 1 writes dZ_{l-1} = dLoss/dZ_{l-1} into dZ and adds
// its column sums to dPrevBias, the gradient of b_{l-1}. In layer 0 dZ and dPrevBias may be nil.
func (c GATConfig) AVBackward(in *AVInput, p, g GATLayer, act *GATActivation, v, dv *GATVertex, dZ, dPrevBias *tensor.Dense) error {
	if err := c.checkLayer(in.Layer, p); err != nil {
		return err
	}
	if err := c.checkLayer(in.Layer, g); err != nil {
		return fmt.Errorf("gradient: %w", err)
	}
	rows := in.Rows()
	if err := c.checkVertex(in.Layer, rows, v); err != nil {
		return err
	}
	if err := c.checkVertex(in.Layer, rows, dv); err != nil {
		return fmt.Errorf("gradient: %w", err)
	}
	tensor.HeadDotBackward(dv.P, g.ADst, dv.DstScore, v.P, p.ADst)
	tensor.HeadDotBackward(dv.P, g.ASrc, dv.SrcScore, v.P, p.ASrc)
	if in.Layer == 0 && act.Sparse != nil {
		if in.Features.Sparse == nil || act.Sparse.Rows != rows {
			return fmt.Errorf("gat ∇AV 0: no sparse activation for %d rows: %w", rows, ErrShape)
		}
		act.addSparseWeightGrad(in.Features.Sparse, dv.P, g.W)
		return nil
	}
	if act.Dense == nil || act.Dense.Rows != rows {
		return fmt.Errorf("gat ∇AV %d: no activation for %d rows: %w", in.Layer, rows, ErrShape)
	}
	tensor.MatMul(g.W, act.Dense, true, dv.P, false, 1, 1)
	if in.Layer == 0 {
		return nil
	}
	width := c.Shape(in.Layer).In
	if dZ == nil || dZ.Rows != rows || dZ.Cols != width || dPrevBias == nil || len(dPrevBias.Data) != width ||
		act.ELU == nil || act.ELU.Rows != rows || act.ELU.Cols != width {
		return fmt.Errorf("gat ∇AV %d: dZ must be %dx%d with a bias gradient of %d: %w", in.Layer, rows, width, width, ErrShape)
	}
	pDrop := float32(0)
	if in.Train {
		pDrop = c.Dropout
	}
	tensor.MatMul(dZ, dv.P, false, p.W, true, 1, 0)
	tensor.DropoutBackward(dZ, pDrop, in.Key, in.RowOffset, in.RowIDs)
	tensor.ELUBackward(dZ, act.ELU)
	addColSums(dPrevBias, dZ)
	return nil
}

// addColSums adds the column sums of src to the 1×Cols matrix sums.
func addColSums(sums, src *tensor.Dense) {
	s := make([]float32, src.Cols)
	tensor.ColSums(s, src)
	for j, v := range s {
		sums.Data[j] += v
	}
}

// AEInput is what one ApplyEdge task of layer l reads: the in-edges of an interval of
// destination vertices and the attention scores of both ends.
type AEInput struct {
	Layer     int
	Adj       *tensor.CSR   // row r lists the sources of destination r of the interval (self loop included); Cols spans SrcScore
	DstScore  *tensor.Dense // Adj.Rows × Heads: s_dst of the interval's vertices
	SrcScore  *tensor.Dense // Adj.Cols × Heads: s_src of every vertex a source id can name (locals and ghosts)
	SrcIDs    []int32       // global id of every source column (nil: the column is the id); keys the attention dropout
	RowOffset int           // global id of the interval's first destination; keys the attention dropout
	RowIDs    []int32       // when set, the id keying each destination's mask instead (a partition's original ids)
	Key       uint64        // AttentionKey(seed, epoch, Layer)
	Train     bool          // apply attention dropout
}

func (c GATConfig) checkAE(in *AEInput, edges *tensor.Dense) error {
	if in.Layer < 0 || in.Layer >= c.Layers {
		return fmt.Errorf("gat AE: layer %d of %d: %w", in.Layer, c.Layers, ErrShape)
	}
	heads := c.Shape(in.Layer).Heads
	if in.Adj == nil || edges == nil || edges.Cols != heads {
		return fmt.Errorf("gat AE %d: want a block and %d head columns: %w", in.Layer, heads, ErrShape)
	}
	if err := tensor.CheckEdgeAttention(edges, in.Adj, in.DstScore, in.SrcScore); err != nil {
		return fmt.Errorf("gat AE %d: %w", in.Layer, err)
	}
	if in.SrcIDs != nil && len(in.SrcIDs) != in.Adj.Cols {
		return fmt.Errorf("gat AE %d: %d source ids for %d columns: %w", in.Layer, len(in.SrcIDs), in.Adj.Cols, ErrShape)
	}
	if in.RowIDs != nil && len(in.RowIDs) != in.Adj.Rows {
		return fmt.Errorf("gat AE %d: %d row ids for %d destinations: %w", in.Layer, len(in.RowIDs), in.Adj.Rows, ErrShape)
	}
	return nil
}

// AEForward is the ApplyEdge task: alpha (one row per in-edge of the block, one column per
// head) receives the attention coefficients softmax_j(LeakyReLU(s_dst(i) + s_src(j))) over every
// destination's in-edges, then, in training, attention dropout keyed by (Key, the edge's global
// CSR position).
func (c GATConfig) AEForward(in *AEInput, alpha *tensor.Dense) error {
	if err := c.checkAE(in, alpha); err != nil {
		return err
	}
	tensor.EdgeAttention(alpha, in.Adj, in.DstScore, in.SrcScore, AttentionSlope)
	if in.Train && c.AttentionDropout > 0 {
		tensor.DropoutEdges(alpha, in.Adj, in.SrcIDs, c.AttentionDropout, in.Key, in.RowOffset, in.RowIDs)
	}
	return nil
}

// AEBackward is the ∇AE task. Given grad = dLoss/dα̃ for the block's in-edges (from ∇GA), it
// recomputes the coefficients from the scores, overwrites grad with dLoss/du, u_ij = s_dst(i) +
// s_src(j) the logit before the LeakyReLU, and writes dLoss/ds_dst of the interval's vertices
// into dDst (Adj.Rows × Heads). dLoss/ds_src is the sum of grad over each source's out-edges,
// which the graph server forms (tensor.EdgeSum over the transposed edges).
func (c GATConfig) AEBackward(in *AEInput, grad, dDst *tensor.Dense) error {
	if err := c.checkAE(in, grad); err != nil {
		return err
	}
	if dDst == nil || dDst.Rows != in.Adj.Rows || dDst.Cols != grad.Cols {
		return fmt.Errorf("gat ∇AE %d: dDst must be %dx%d: %w", in.Layer, in.Adj.Rows, grad.Cols, ErrShape)
	}
	if in.Train && c.AttentionDropout > 0 {
		tensor.DropoutEdges(grad, in.Adj, in.SrcIDs, c.AttentionDropout, in.Key, in.RowOffset, in.RowIDs)
	}
	tensor.EdgeAttentionBackward(grad, dDst, in.Adj, in.DstScore, in.SrcScore, AttentionSlope)
	return nil
}

// OutputForward is the output layer's AV before the loss: logits = the mean of z's OutHeads
// head blocks (z is rows × OutHeads·Classes, the last GA's output) plus the output bias.
func (c GATConfig) OutputForward(z, bias, logits *tensor.Dense) error {
	k, n := c.OutHeads, c.Classes
	if z.Cols != k*n || logits.Rows != z.Rows || logits.Cols != n || len(bias.Data) != n {
		return fmt.Errorf("gat output: z %dx%d, logits %dx%d, bias %d for %d heads of %d classes: %w",
			z.Rows, z.Cols, logits.Rows, logits.Cols, len(bias.Data), k, n, ErrShape)
	}
	inv := 1 / float32(k)
	tensor.ParallelFor(z.Rows, 1024, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out, zi := logits.Data[i*n:i*n+n], z.Data[i*k*n:(i+1)*k*n]
			copy(out, bias.Data)
			for h := 0; h < k; h++ {
				for j, v := range zi[h*n : h*n+n] {
					out[j] += inv * v
				}
			}
		}
	})
	return nil
}

// OutputBackward is the backward pass of OutputForward: given dLogits it writes dZ (rows ×
// OutHeads·Classes) and adds the column sums of dLogits to dBias.
func (c GATConfig) OutputBackward(dLogits, dZ, dBias *tensor.Dense) error {
	k, n := c.OutHeads, c.Classes
	if dLogits.Cols != n || dZ.Rows != dLogits.Rows || dZ.Cols != k*n || len(dBias.Data) != n {
		return fmt.Errorf("gat output backward: dlogits %dx%d, dZ %dx%d, bias %d: %w",
			dLogits.Rows, dLogits.Cols, dZ.Rows, dZ.Cols, len(dBias.Data), ErrShape)
	}
	inv := 1 / float32(k)
	tensor.ParallelFor(dZ.Rows, 1024, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g, dz := dLogits.Data[i*n:i*n+n], dZ.Data[i*k*n:(i+1)*k*n]
			for h := 0; h < k; h++ {
				for j, v := range g {
					dz[h*n+j] = inv * v
				}
			}
		}
	})
	addColSums(dBias, dLogits)
	return nil
}
