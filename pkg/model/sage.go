package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// GraphSAGE (Hamilton et al. 2017) with the mean aggregator has a GCN's widths (GCNConfig), and
// its layer l computes H_{l+1} = σ([H_l ‖ M H_l] W_l) = σ(H_l W_self + M H_l W_neigh), where
// M = D⁻¹ A averages each vertex's in-neighbours (no self loop; a vertex without any gets 0) and
// W_l, 2·dims[l] × dims[l+1], stacks W_self on top of W_neigh. As for a GCN the weight is applied
// before the Gather, M (H W_neigh) = (M H) W_neigh, so Gather runs on the narrow side:
//
//	AV_l   S_l = H_l W_self and P_l = H_l W_neigh, H_l = drop(σ(Z_{l-1})) (drop(X) in layer 0)
//	SC_l   boundary rows of P_l to their ghosts (S_l stays with its vertex)
//	GA_l   Z_l = S_l + M P_l
//	∇GA_l  dS_l = dZ_l, dP_l = Mᵀ dZ_l
//	∇AV_l  dW_self = H_lᵀ dZ_l, dW_neigh = H_lᵀ dP_l, dZ_{l-1} from dZ_l W_selfᵀ + dP_l W_neighᵀ
//
// The backward passes are GCN's shapes, twice.

// SAGEInitWeights returns a GraphSAGE network's weights W_0 … W_{L-1}, each 2·dims[l] × dims[l+1]
// with W_self and W_neigh drawn Glorot-uniform for their dims[l] × dims[l+1] shape,
// deterministic for a seed.
func (c GCNConfig) SAGEInitWeights(seed uint64) []*tensor.Dense {
	rng := rand.New(rand.NewPCG(seed, 0x5a6e5a6e5a6e5a6e))
	dims := c.Dims()
	ws := make([]*tensor.Dense, c.Layers)
	for l := range ws {
		w := tensor.NewDense(2*dims[l], dims[l+1])
		limit := math.Sqrt(6 / float64(dims[l]+dims[l+1]))
		for i := range w.Data {
			w.Data[i] = float32((2*rng.Float64() - 1) * limit)
		}
		ws[l] = w
	}
	return ws
}

// SAGEShapes returns the rows and columns of a GraphSAGE network's weights.
func (c GCNConfig) SAGEShapes() [][2]int {
	dims := c.Dims()
	s := make([][2]int, c.Layers)
	for l := range s {
		s[l] = [2]int{2 * dims[l], dims[l+1]}
	}
	return s
}

// SplitSAGE returns the views W_self and W_neigh of layer l's weight w (or of its gradient).
func (c GCNConfig) SplitSAGE(l int, w *tensor.Dense) (self, neigh *tensor.Dense, err error) {
	if l < 0 || l >= c.Layers {
		return nil, nil, fmt.Errorf("sage: layer %d of %d: %w", l, c.Layers, ErrShape)
	}
	dims := c.Dims()
	if w == nil || w.Rows != 2*dims[l] || w.Cols != dims[l+1] {
		return nil, nil, fmt.Errorf("sage: weight of layer %d must be %dx%d: %w", l, 2*dims[l], dims[l+1], ErrShape)
	}
	return w.RowSlice(0, dims[l]), w.RowSlice(dims[l], 2*dims[l]), nil
}

// SAGEForward is a GraphSAGE layer's ApplyVertex task: S = H W_self into self and P = H W_neigh
// into neigh (both rows×dims[l+1]) from one H = drop(σ(input)), kept in act as AVForward keeps
// it, or with act nil streamed.
func (c GCNConfig) SAGEForward(in *AVInput, w *tensor.Dense, act *Activation, self, neigh *tensor.Dense) error {
	ws, wn, err := c.SplitSAGE(in.Layer, w)
	if err != nil {
		return err
	}
	return c.avForward(in, act, product{ws, self}, product{wn, neigh})
}

// SAGEBackward is a GraphSAGE layer's ∇AV task: given dS = dLoss/dS (the layer's dZ) and dP =
// dLoss/dP, it adds Hᵀ dS and Hᵀ dP to dW's W_self and W_neigh halves and, for l ≥ 1, writes
// dZ_{l-1} into dZ (rows×dims[l]), as AVBackward does for a GCN.
func (c GCNConfig) SAGEBackward(in *AVInput, w *tensor.Dense, act *Activation, dS, dP, dW, dZ *tensor.Dense) error {
	ws, wn, err := c.SplitSAGE(in.Layer, w)
	if err != nil {
		return err
	}
	dws, dwn, err := c.SplitSAGE(in.Layer, dW)
	if err != nil {
		return err
	}
	return c.avBackward(in, act, dZ, gradient{ws, dS, dws}, gradient{wn, dP, dwn})
}

// MeanAdjacency returns M = D⁻¹ A of adj's structure: row i holds 1/deg(i) at each of i's
// in-neighbours (edge weights ignored; no self loop added), a row without any stays empty.
func MeanAdjacency(adj *tensor.CSR) *tensor.CSR {
	m := &tensor.CSR{Rows: adj.Rows, Cols: adj.Cols, RowPtr: adj.RowPtr, ColIdx: adj.ColIdx, Val: make([]float32, adj.NNZ())}
	for i := range adj.Rows {
		a, b := adj.RowPtr[i], adj.RowPtr[i+1]
		inv := 1 / float32(b-a)
		for k := a; k < b; k++ {
			m.Val[k] = inv
		}
	}
	return m
}
