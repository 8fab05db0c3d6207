package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// GCNConfig describes a graph convolutional network (Kipf & Welling 2017) of any depth.
type GCNConfig struct {
	InDim   int     // input feature width
	Hidden  int     // width of every hidden layer
	Classes int     // output width
	Layers  int     // number of weight matrices, ≥ 1
	Dropout float32 // dropout rate on each layer's input, in [0, 1)
}

// Validate reports a configuration that cannot be built.
func (c GCNConfig) Validate() error {
	switch {
	case c.InDim < 1:
		return fmt.Errorf("gcn: input width %d, want ≥ 1", c.InDim)
	case c.Classes < 2:
		return fmt.Errorf("gcn: %d classes, want ≥ 2", c.Classes)
	case c.Layers < 1:
		return fmt.Errorf("gcn: %d layers, want ≥ 1", c.Layers)
	case c.Layers > 1 && c.Hidden < 1:
		return fmt.Errorf("gcn: hidden width %d, want ≥ 1", c.Hidden)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("gcn: dropout %g, want a rate in [0, 1)", c.Dropout)
	}
	return nil
}

// Dims returns the width of every layer boundary: [InDim, Hidden, …, Hidden, Classes].
func (c GCNConfig) Dims() []int {
	d := make([]int, c.Layers+1)
	d[0] = c.InDim
	for i := 1; i < c.Layers; i++ {
		d[i] = c.Hidden
	}
	d[c.Layers] = c.Classes
	return d
}

// InitWeights returns Glorot-uniform weights W_0 … W_{L-1}, deterministic for a seed.
func (c GCNConfig) InitWeights(seed uint64) []*tensor.Dense {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	dims := c.Dims()
	ws := make([]*tensor.Dense, c.Layers)
	for l := range ws {
		w := tensor.NewDense(dims[l], dims[l+1])
		limit := math.Sqrt(6 / float64(dims[l]+dims[l+1]))
		for i := range w.Data {
			w.Data[i] = float32((2*rng.Float64() - 1) * limit)
		}
		ws[l] = w
	}
	return ws
}

// DropoutKey derives the dropout-mask key of one layer in one epoch of a run.
func DropoutKey(seed uint64, epoch, layer int) uint64 {
	return mix64(mix64(seed^0x5851f42d4c957f2d) ^ uint64(epoch)<<16 ^ uint64(layer))
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// AVInput is what one ApplyVertex task of layer l ≥ 0 reads for an interval of rows.
type AVInput struct {
	Layer     int            // weight index l
	Features  graph.Features // layer 0: the interval's feature rows
	Z         *tensor.Dense  // layer ≥ 1: the interval's gathered rows Z_{l-1}
	RowOffset int            // global id of the interval's first row; keys the dropout mask
	RowIDs    []int32        // when set, the id keying each row's mask instead (a partition's original ids)
	Key       uint64         // DropoutKey(seed, epoch, Layer)
	Train     bool           // apply dropout
}

// Rows returns the number of rows in the interval.
func (in *AVInput) Rows() int {
	switch {
	case in.Layer > 0:
		return in.Z.Rows
	case in.Features.Sparse != nil:
		return in.Features.Sparse.Rows
	default:
		return in.Features.Dense.Rows
	}
}

// checkRowIDs checks that RowIDs, when set, names every input row.
func (in *AVInput) checkRowIDs(op string) error {
	rows := in.Features.Rows()
	if in.Layer > 0 && in.Z != nil {
		rows = in.Z.Rows
	}
	if in.RowIDs != nil && len(in.RowIDs) != rows {
		return fmt.Errorf("%s %d: %d row ids for %d rows: %w", op, in.Layer, len(in.RowIDs), rows, ErrShape)
	}
	return nil
}

// Activation is H = drop(σ(input)) of one AV task, held so that ∇AV can reuse it; a stateless
// worker recomputes it with Activate.
type Activation struct {
	Sparse *tensor.CSR   // layer 0 with sparse features: drop(X), sharing X's structure
	Dense  *tensor.Dense // otherwise
}

// ErrShape reports tensors whose shapes do not fit the model.
var ErrShape = errors.New("shape mismatch")

// Activate computes H = drop(σ(input)) into act, allocating act's buffers on first use and reusing
// them afterwards. σ is the identity in layer 0 and ReLU above it.
func (c GCNConfig) Activate(in *AVInput, act *Activation) error {
	p, err := c.dropout(in)
	if err != nil {
		return err
	}
	if in.Layer == 0 && in.Features.Sparse != nil {
		x := in.Features.Sparse
		if x.Cols != c.InDim {
			return fmt.Errorf("gcn AV 0: %d feature columns, model takes %d: %w", x.Cols, c.InDim, ErrShape)
		}
		if act.Sparse == nil || cap(act.Sparse.Val) < len(x.ColIdx) {
			act.Sparse = &tensor.CSR{Val: make([]float32, len(x.ColIdx))}
		}
		act.Sparse.Rows, act.Sparse.Cols, act.Sparse.RowPtr, act.Sparse.ColIdx = x.Rows, x.Cols, x.RowPtr, x.ColIdx
		act.Sparse.Val = act.Sparse.Val[:len(x.ColIdx)]
		tensor.DropoutCSR(act.Sparse, x, p, in.Key, in.RowOffset, in.RowIDs)
		return nil
	}
	src, err := c.denseInput(in)
	if err != nil {
		return err
	}
	act.Dense = reshape(act.Dense, src.Rows, src.Cols)
	activateRows(in, src, p, 0, src.Rows, act.Dense)
	return nil
}

// dropout checks an AV task's layer and row ids and returns the dropout rate it applies.
func (c GCNConfig) dropout(in *AVInput) (float32, error) {
	if in.Layer < 0 || in.Layer >= c.Layers {
		return 0, fmt.Errorf("gcn AV: layer %d of %d: %w", in.Layer, c.Layers, ErrShape)
	}
	if err := in.checkRowIDs("gcn AV"); err != nil {
		return 0, err
	}
	if !in.Train {
		return 0, nil
	}
	return c.Dropout, nil
}

// denseInput returns the dense block an AV task activates: Z_{l-1}, or layer 0's features.
func (c GCNConfig) denseInput(in *AVInput) (*tensor.Dense, error) {
	src := in.Z
	if in.Layer == 0 {
		src = in.Features.Dense
	}
	if want := c.Dims()[in.Layer]; src == nil || src.Cols != want {
		return nil, fmt.Errorf("gcn AV %d: input is not a %d-column block: %w", in.Layer, want, ErrShape)
	}
	return src, nil
}

// activateRows computes rows [lo, hi) of H = drop(σ(src)) into h, which has hi−lo rows.
func activateRows(in *AVInput, src *tensor.Dense, p float32, lo, hi int, h *tensor.Dense) {
	s := src.RowSlice(lo, hi)
	var ids []int32
	if in.RowIDs != nil {
		ids = in.RowIDs[lo:hi]
	}
	if in.Layer > 0 {
		tensor.ReLU(h, s)
		s = h
	}
	tensor.Dropout(h, s, p, in.Key, in.RowOffset+lo, ids)
}

// streamRows is how many rows an AV task that keeps no activation activates at a time: a block
// that stays in a core's cache until the product reads it, where a whole interval's H (tens of
// MB at 128 columns) would be written out and read back.
const streamRows = 512

// blocks holds free buffers that streamed tasks activate blocks of rows into: as many as the
// kernel threads of a few tasks use at once (a sync.Pool would drop them at every collection).
var blocks = make(chan []float32, 64)

// stream activates rows [lo, hi) of drop(σ(src)) block by block into a free buffer and calls fn
// with each block's rows and values.
func stream(in *AVInput, src *tensor.Dense, p float32, lo, hi int, fn func(lo, hi int, h *tensor.Dense)) {
	var buf []float32
	select {
	case buf = <-blocks:
	default:
	}
	if n := streamRows * src.Cols; cap(buf) < n {
		buf = make([]float32, n)
	}
	defer func() {
		select {
		case blocks <- buf:
		default:
		}
	}()
	for b := lo; b < hi; b += streamRows {
		e := min(b+streamRows, hi)
		h := &tensor.Dense{Rows: e - b, Cols: src.Cols, Data: buf[:(e-b)*src.Cols]}
		activateRows(in, src, p, b, e, h)
		fn(b, e, h)
	}
}

// AVForward is the ApplyVertex task of layer l: P = H W with H = drop(σ(input)) computed into act.
// out must be rows×dims[l+1]. With act nil (a task that keeps no activation: its ∇AV recomputes
// it) a dense H is computed a block of rows at a time and never written out whole.
func (c GCNConfig) AVForward(in *AVInput, w *tensor.Dense, act *Activation, out *tensor.Dense) error {
	return c.avForward(in, act, product{w, out})
}

// product is one output of an AV task: out = H w.
type product struct{ w, out *tensor.Dense }

// avForward computes every product's out = H w from one H = drop(σ(input)) (a GCN's one, a
// GraphSAGE layer's two), kept in act or, with act nil, streamed a block of rows at a time.
func (c GCNConfig) avForward(in *AVInput, act *Activation, ps ...product) error {
	p, err := c.dropout(in)
	if err != nil {
		return err
	}
	if act == nil && in.Layer == 0 && in.Features.Sparse != nil {
		act = &Activation{}
	}
	var src *tensor.Dense
	if act == nil {
		src, err = c.denseInput(in)
	} else {
		err = c.Activate(in, act)
	}
	if err != nil {
		return err
	}
	for _, q := range ps {
		if err := c.checkWeight(in.Layer, q.w); err != nil {
			return err
		}
		if q.out.Rows != in.Rows() || q.out.Cols != q.w.Cols {
			return fmt.Errorf("gcn AV %d: output %dx%d, want %dx%d: %w", in.Layer, q.out.Rows, q.out.Cols, in.Rows(), q.w.Cols, ErrShape)
		}
	}
	switch {
	case act == nil:
		tensor.ParallelFor(src.Rows, streamRows, func(lo, hi int) {
			stream(in, src, p, lo, hi, func(b, e int, h *tensor.Dense) {
				for _, q := range ps {
					tensor.MatMul(q.out.RowSlice(b, e), h, false, q.w, false, 1, 0)
				}
			})
		})
	case act.Sparse != nil && in.Layer == 0:
		for _, q := range ps {
			tensor.SpMM(q.out, act.Sparse, q.w)
		}
	default:
		for _, q := range ps {
			tensor.MatMul(q.out, act.Dense, false, q.w, false, 1, 0)
		}
	}
	return nil
}

// AVBackward is the ∇AV task of layer l. Given the activation H of the forward pass (computed by
// Activate), or with act nil recomputing a dense H a block of rows at a time, and dP =
// dLoss/dP, it adds Hᵀ dP to dW and, for l ≥ 1, writes dZ_{l-1} = dLoss/dZ_{l-1} into dZ
// (rows×dims[l]). dP is not modified. In layer 0 dZ may be nil: the features need no gradient.
// A sparse H must be given.
func (c GCNConfig) AVBackward(in *AVInput, w *tensor.Dense, act *Activation, dP, dW, dZ *tensor.Dense) error {
	return c.avBackward(in, act, dZ, gradient{w, dP, dW})
}

// gradient is the backward pass of one product out = H w: dP = dLoss/dout, and dW, which
// receives Hᵀ dP added.
type gradient struct{ w, dP, dW *tensor.Dense }

// avBackward adds every gradient's Hᵀ dP to its dW and, for l ≥ 1, writes dZ_{l-1} = the
// backward pass of drop(σ(·)) on Σ dP wᵀ into dZ.
func (c GCNConfig) avBackward(in *AVInput, act *Activation, dZ *tensor.Dense, gs ...gradient) error {
	p, err := c.dropout(in)
	if err != nil {
		return err
	}
	var src *tensor.Dense
	switch {
	case act != nil:
	case in.Layer == 0 && in.Features.Sparse != nil:
		return fmt.Errorf("gcn ∇AV 0: sparse features need their activation: %w", ErrShape)
	default:
		if src, err = c.denseInput(in); err != nil {
			return err
		}
	}
	for _, g := range gs {
		if err := c.checkWeight(in.Layer, g.w); err != nil {
			return err
		}
		if g.dW.Rows != g.w.Rows || g.dW.Cols != g.w.Cols || g.dP.Rows != in.Rows() || g.dP.Cols != g.w.Cols {
			return fmt.Errorf("gcn ∇AV %d: dW %dx%d and dP %dx%d for a %dx%d weight and %d rows: %w",
				in.Layer, g.dW.Rows, g.dW.Cols, g.dP.Rows, g.dP.Cols, g.w.Rows, g.w.Cols, in.Rows(), ErrShape)
		}
	}
	switch {
	case src != nil:
		streamWeightGradient(in, src, p, gs)
	case in.Layer == 0 && act.Sparse != nil:
		for _, g := range gs {
			tensor.SpMMTransAdd(g.dW, act.Sparse, g.dP)
		}
		return nil
	default:
		for _, g := range gs {
			tensor.MatMul(g.dW, act.Dense, true, g.dP, false, 1, 1)
		}
	}
	if in.Layer == 0 {
		return nil
	}
	if dZ == nil || dZ.Rows != in.Rows() || dZ.Cols != c.Dims()[in.Layer] {
		return fmt.Errorf("gcn ∇AV %d: dZ must be %dx%d: %w", in.Layer, in.Rows(), c.Dims()[in.Layer], ErrShape)
	}
	for i, g := range gs {
		tensor.MatMul(dZ, g.dP, false, g.w, true, 1, float32(min(i, 1)))
	}
	tensor.DropoutBackward(dZ, p, in.Key, in.RowOffset, in.RowIDs)
	tensor.ReLUBackward(dZ, in.Z)
	return nil
}

// streamWeightGradient adds Hᵀ dP to every gradient's dW, recomputing H = drop(σ(src)) a block
// of rows at a time: the rows are cut in one part per kernel thread, each summing into its own
// partial gradients.
func streamWeightGradient(in *AVInput, src *tensor.Dense, p float32, gs []gradient) {
	rows := src.Rows
	parts := max(1, min(tensor.Threads(), (rows+streamRows-1)/streamRows))
	partial := make([][]*tensor.Dense, parts) // part 0 sums into the dWs themselves
	tensor.ParallelFor(parts, 1, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			acc := make([]*tensor.Dense, len(gs))
			for i, g := range gs {
				acc[i] = g.dW
				if k > 0 {
					acc[i] = tensor.NewDense(g.dW.Rows, g.dW.Cols)
				}
			}
			if k > 0 {
				partial[k] = acc
			}
			stream(in, src, p, k*rows/parts, (k+1)*rows/parts, func(b, e int, h *tensor.Dense) {
				for i, g := range gs {
					tensor.MatMul(acc[i], h, true, g.dP.RowSlice(b, e), false, 1, 1)
				}
			})
		}
	})
	for _, ds := range partial[1:] {
		for i, d := range ds {
			tensor.AddInPlace(gs[i].dW, d)
		}
	}
}

func (c GCNConfig) checkWeight(l int, w *tensor.Dense) error {
	dims := c.Dims()
	if w == nil || w.Rows != dims[l] || w.Cols != dims[l+1] {
		return fmt.Errorf("gcn: weight of layer %d must be %dx%d: %w", l, dims[l], dims[l+1], ErrShape)
	}
	return nil
}

// LossForward is the output layer's AV task: softmax cross-entropy of the logits Z_{L-1} over the
// labelled training rows of an interval. rows index the interval; labels are the interval's
// labels. The loss is summed over rows and divided by total, the number of training rows of the
// whole graph, so that the gradients of all intervals add up to the gradient of the mean loss.
// dZ (same shape as logits) receives dLoss/dlogits when non-nil.
func LossForward(logits *tensor.Dense, labels []int32, rows []int32, total int, dZ *tensor.Dense) (float64, error) {
	if len(labels) != logits.Rows {
		return 0, fmt.Errorf("loss: %d labels for %d rows: %w", len(labels), logits.Rows, ErrShape)
	}
	if dZ != nil && (dZ.Rows != logits.Rows || dZ.Cols != logits.Cols) {
		return 0, fmt.Errorf("loss: gradient %dx%d for %dx%d logits: %w", dZ.Rows, dZ.Cols, logits.Rows, logits.Cols, ErrShape)
	}
	if len(rows) == 0 {
		if dZ != nil {
			dZ.Zero()
		}
		return 0, nil
	}
	if total < len(rows) {
		return 0, fmt.Errorf("loss: %d training rows in an interval but %d in the graph: %w", len(rows), total, ErrShape)
	}
	mean := tensor.SoftmaxCrossEntropy(logits, labels, rows, dZ)
	scale := float32(len(rows)) / float32(total)
	if dZ != nil && scale != 1 {
		for i := range dZ.Data {
			dZ.Data[i] *= scale
		}
	}
	return mean * float64(len(rows)) / float64(total), nil
}

// reshape returns d resized to rows×cols, reusing its storage when it is large enough.
func reshape(d *tensor.Dense, rows, cols int) *tensor.Dense {
	if d != nil && cap(d.Data) >= rows*cols {
		d.Rows, d.Cols, d.Data = rows, cols, d.Data[:rows*cols]
		return d
	}
	return tensor.NewDense(rows, cols)
}
