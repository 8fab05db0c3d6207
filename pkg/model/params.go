package model

import (
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Parameters is a model's list of parameter tensors, described before any is made: their
// shapes in the order the optimiser sees them, how they start and which take weight decay.
type Parameters struct {
	Shapes [][2]int // rows and columns of each tensor
	gcn    *GCNConfig
	sage   bool // gcn's widths, GraphSAGE's weights
	gat    *GATConfig
}

// ParametersOf returns the parameters of the model with layer widths dims (the input width,
// every hidden layer's, the classes): a GAT with heads heads in every hidden layer and
// outHeads in the output layer when heads > 0, else a GCN. An error says why dims fit no
// such model.
func ParametersOf(dims []int, heads, outHeads int) (Parameters, error) {
	L := len(dims) - 1
	if L < 1 {
		return Parameters{}, fmt.Errorf("model with %d layer widths", len(dims))
	}
	if heads > 0 {
		g := GATConfig{InDim: dims[0], Heads: heads, OutHeads: outHeads, Classes: dims[L], Layers: L}
		if L > 1 {
			g.Hidden = dims[1] / g.Heads
		}
		for l := range L {
			if s := g.Shape(l); s.In != dims[l] || (l < L-1 && s.Out != dims[l+1]) {
				return Parameters{}, fmt.Errorf("layer widths %v do not fit a GAT of %d heads: every hidden layer must be heads·hidden wide", dims, g.Heads)
			}
		}
		if err := g.Validate(); err != nil {
			return Parameters{}, err
		}
		p := Parameters{gat: &g}
		for l := range L {
			s := g.Shape(l)
			p.Shapes = append(p.Shapes, [2]int{s.In, s.Width()}, [2]int{s.Heads, s.F}, [2]int{s.Heads, s.F}, [2]int{1, s.Out})
		}
		return p, nil
	}
	return gcnParameters(dims)
}

// SAGEParametersOf returns the parameters of the GraphSAGE network with layer widths dims: a
// GCN's widths, each layer's weight [W_self; W_neigh] of 2·dims[l] × dims[l+1].
func SAGEParametersOf(dims []int) (Parameters, error) {
	p, err := gcnParameters(dims)
	if err != nil {
		return p, err
	}
	p.sage, p.Shapes = true, p.gcn.SAGEShapes()
	return p, nil
}

// gcnParameters returns the parameters of the GCN with layer widths dims.
func gcnParameters(dims []int) (Parameters, error) {
	L := len(dims) - 1
	if L < 1 {
		return Parameters{}, fmt.Errorf("model with %d layer widths", len(dims))
	}
	c := GCNConfig{InDim: dims[0], Classes: dims[L], Layers: L}
	if L > 1 {
		c.Hidden = dims[1]
	}
	for i, d := range c.Dims() {
		if d != dims[i] {
			return Parameters{}, fmt.Errorf("layer widths %v: every hidden layer must have the same width", dims)
		}
	}
	if err := c.Validate(); err != nil {
		return Parameters{}, err
	}
	p := Parameters{gcn: &c}
	for l := range L {
		p.Shapes = append(p.Shapes, [2]int{dims[l], dims[l+1]})
	}
	return p, nil
}

// Init returns the tensors as the single-process trainers initialise them from seed: a GCN's
// weight matrices (GCNConfig.InitWeights), a GraphSAGE network's (SAGEInitWeights), or a GAT's W, a_dst, a_src and bias of every layer
// (GATConfig.InitParams).
func (p Parameters) Init(seed uint64) []*tensor.Dense {
	if p.gat != nil {
		return p.gat.InitParams(seed).Tensors()
	}
	if p.sage {
		return p.gcn.SAGEInitWeights(seed)
	}
	return p.gcn.InitWeights(seed)
}

// Decay returns the weight decay of each tensor, as the single-process trainers apply wd: on a
// GCN's or GraphSAGE's first weight matrix (DefaultAdam), on every tensor of a GAT.
func (p Parameters) Decay(wd float32) []float32 {
	if p.gat != nil {
		d := make([]float32, len(p.Shapes))
		for i := range d {
			d[i] = wd
		}
		return d
	}
	return DefaultAdam(1, wd, p.gcn.Layers).WeightDecay
}
