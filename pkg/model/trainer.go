package model

import (
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
)

// TrainConfig is what one training run needs besides the data.
type TrainConfig struct {
	GCN         GCNConfig
	SAGE        bool // GraphSAGE layers of GCN's widths (sage.go) instead of GCN layers
	LR          float32
	WeightDecay float32 // L2 decay on layer 0's weight, as in Kipf's GCN
	Seed        uint64
}

// Metrics are the losses and accuracies of one evaluation (no dropout).
type Metrics struct {
	TrainLoss, ValLoss        float64
	TrainAcc, ValAcc, TestAcc float64
}

// Trainer runs GCN or GraphSAGE training in one process over a single partition that holds the whole graph,
// calling the same task functions (AV, GA, ∇GA, ∇AV, WU) the distributed graph servers and
// tensor workers call. Buffers are allocated once and reused across epochs.
type Trainer struct {
	cfg     TrainConfig
	data    *graph.Dataset
	adj     *tensor.CSR // Â (GraphSAGE: M)
	adjT    *tensor.CSR // its transpose; the same matrix when it is symmetric
	weights []*tensor.Dense
	grads   []*tensor.Dense
	adam    *Adam

	act []Activation    // per layer: H_l = drop(σ(input))
	p   []*tensor.Dense // per layer: P_l = H_l W_l, reused for dP_l in the backward pass
	z   []*tensor.Dense // per layer: Z_l = Â P_l (GraphSAGE: S_l + M P_l)
	s   []*tensor.Dense // GraphSAGE, per layer: S_l = H_l W_self; nil for a GCN
	dz  *tensor.Dense   // dLoss/dZ_{L-1}

	trace *trace.Recorder // records the training epochs' tasks; nil: none
}

// NewTrainer prepares a run on d: Â (GraphSAGE: M) from d's adjacency, weights from the seed,
// all buffers.
// The features are used as they are (normalise them first if the model wants it).
func NewTrainer(d *graph.Dataset, cfg TrainConfig) (*Trainer, error) {
	if d.Features.Sparse == nil && d.Features.Dense == nil {
		return nil, fmt.Errorf("dataset %s has no features to train on: %w", d.Name, graph.ErrNoFeatures)
	}
	if cfg.GCN.InDim != d.NumFeatures() || cfg.GCN.Classes != d.NumClasses {
		return nil, fmt.Errorf("model %d→%d does not fit dataset %s (%d features, %d classes): %w",
			cfg.GCN.InDim, cfg.GCN.Classes, d.Name, d.NumFeatures(), d.NumClasses, ErrShape)
	}
	if err := cfg.GCN.Validate(); err != nil {
		return nil, err
	}
	if len(d.Train) == 0 {
		return nil, fmt.Errorf("dataset %s has no training nodes", d.Name)
	}
	var adj *tensor.CSR
	var weights []*tensor.Dense
	if cfg.SAGE {
		adj, weights = MeanAdjacency(d.Adj), cfg.GCN.SAGEInitWeights(cfg.Seed)
	} else {
		adj, weights = graph.NormalizedAdjacency(d.Adj), cfg.GCN.InitWeights(cfg.Seed)
	}
	adjT := tensor.Transpose(adj)
	if adj.Equal(adjT) {
		adjT = adj
	}
	t := &Trainer{cfg: cfg, data: d, adj: adj, adjT: adjT, weights: weights}
	adam, err := NewAdam(DefaultAdam(cfg.LR, cfg.WeightDecay, cfg.GCN.Layers), t.weights)
	if err != nil {
		return nil, err
	}
	t.adam = adam
	n, dims := d.NumNodes(), cfg.GCN.Dims()
	t.act = make([]Activation, cfg.GCN.Layers)
	for l, w := range t.weights {
		t.grads = append(t.grads, tensor.NewDense(w.Rows, w.Cols))
		t.p = append(t.p, tensor.NewDense(n, dims[l+1]))
		t.z = append(t.z, tensor.NewDense(n, dims[l+1]))
		if cfg.SAGE {
			t.s = append(t.s, tensor.NewDense(n, dims[l+1]))
		}
	}
	t.dz = tensor.NewDense(n, dims[len(dims)-1])
	return t, nil
}

// SetTrace has the training epochs record their tasks in r (one interval, server 0, weight
// version = epoch); nil stops recording.
func (t *Trainer) SetTrace(r *trace.Recorder) { t.trace = r }

// span records task k of layer l of epoch, which started at start (the recorder's clock).
func (t *Trainer) span(k trace.Kind, epoch, l int, start int64) {
	if t.trace != nil {
		t.trace.Add(trace.Span{Start: start, End: t.trace.Now(), Kind: k, Lane: trace.Lane(0, k >= trace.BackGA),
			Epoch: int32(epoch), Layer: int32(l), Version: int32(epoch)})
	}
}

// SAGE reports whether the trainer's layers are GraphSAGE's (weights 2·dims[l] × dims[l+1]).
func (t *Trainer) SAGE() bool { return t.s != nil }

// Weights returns the current weights (aliased, not copied).
func (t *Trainer) Weights() []*tensor.Dense { return t.weights }

// layerInput returns the AV input of layer l in epoch epoch of a single-process trainer of d
// whose Gather outputs are z: the features in layer 0, Z_{l-1} after, with the layer's dropout
// key under seed.
func layerInput(d *graph.Dataset, z []*tensor.Dense, seed uint64, l, epoch int, train bool) *AVInput {
	in := &AVInput{Layer: l, Key: DropoutKey(seed, epoch, l), Train: train}
	if l == 0 {
		in.Features = d.Features
	} else {
		in.Z = z[l-1]
	}
	return in
}

// forward runs AV_l and GA_l for every layer and leaves the logits in z[L-1].
func (t *Trainer) forward(epoch int, train bool) error {
	rec := t.trace
	if !train {
		rec = nil
	}
	for l := range t.weights {
		start := rec.Now()
		in := layerInput(t.data, t.z, t.cfg.Seed, l, epoch, train)
		var err error
		if t.s != nil {
			err = t.cfg.GCN.SAGEForward(in, t.weights[l], &t.act[l], t.s[l], t.p[l])
		} else {
			err = t.cfg.GCN.AVForward(in, t.weights[l], &t.act[l], t.p[l])
		}
		if err != nil {
			return fmt.Errorf("epoch %d AV %d: %w", epoch, l, err)
		}
		if rec != nil {
			t.span(trace.AV, epoch, l, start)
			start = rec.Now()
		}
		tensor.SpMM(t.z[l], t.adj, t.p[l]) // GA_l
		if t.s != nil {
			tensor.AddInPlace(t.z[l], t.s[l])
		}
		if rec != nil {
			t.span(trace.GA, epoch, l, start)
		}
	}
	return nil
}

// Epoch runs one training epoch (forward, loss, backward, update) and returns the training loss
// of its forward pass, which used dropout. A NaN or infinite loss, weight gradient or updated
// weight stops it with an error wrapping ErrNotFinite that names the epoch, layer and task.
func (t *Trainer) Epoch(epoch int) (float64, error) {
	if err := t.forward(epoch, true); err != nil {
		return 0, err
	}
	last := len(t.weights) - 1
	start := t.trace.Now()
	loss, err := LossForward(t.z[last], t.data.Labels, t.data.Train, len(t.data.Train), t.dz)
	t.span(trace.AV, epoch, last+1, start)
	if err != nil {
		return 0, fmt.Errorf("epoch %d loss: %w", epoch, err)
	}
	if err := checkLoss(loss, epoch, last); err != nil {
		return 0, err
	}
	dz := t.dz
	for l := last; l >= 0; l-- {
		dp := t.p[l]
		start := t.trace.Now()
		tensor.SpMM(dp, t.adjT, dz) // ∇GA_l: dP_l = Âᵀ dZ_l (GraphSAGE: Mᵀ dZ_l, and dS_l = dZ_l)
		t.span(trace.BackGA, epoch, l, start)
		start = t.trace.Now()
		t.grads[l].Zero()
		var dzPrev *tensor.Dense
		if l > 0 {
			// H_l is dead once dW_l is computed, so its buffer receives dZ_{l-1}.
			dzPrev = t.act[l].Dense
		}
		in := layerInput(t.data, t.z, t.cfg.Seed, l, epoch, true)
		var err error
		if t.s != nil {
			err = t.cfg.GCN.SAGEBackward(in, t.weights[l], &t.act[l], dz, dp, t.grads[l], dzPrev)
		} else {
			err = t.cfg.GCN.AVBackward(in, t.weights[l], &t.act[l], dp, t.grads[l], dzPrev)
		}
		if err != nil {
			return 0, fmt.Errorf("epoch %d ∇AV %d: %w", epoch, l, err)
		}
		if err := checkFinite(t.grads[l].Data, epoch, l, "∇AV", "the weight gradient"); err != nil {
			return 0, err
		}
		t.span(trace.BackAV, epoch, l, start)
		dz = dzPrev
	}
	start = t.trace.Now()
	if err := t.adam.Step(t.weights, t.grads); err != nil {
		return 0, fmt.Errorf("epoch %d WU: %w", epoch, err)
	}
	for l, w := range t.weights {
		if err := checkFinite(w.Data, epoch, l, "WU", "the updated weight"); err != nil {
			return 0, err
		}
	}
	t.span(trace.WU, epoch, 0, start)
	return loss, nil
}

// Evaluate runs a forward pass without dropout and scores every split.
func (t *Trainer) Evaluate() (Metrics, error) {
	if err := t.forward(0, false); err != nil {
		return Metrics{}, err
	}
	logits, labels := t.z[len(t.z)-1], t.data.Labels
	var m Metrics
	var err error
	if m.TrainLoss, err = LossForward(logits, labels, t.data.Train, len(t.data.Train), nil); err != nil {
		return m, err
	}
	if len(t.data.Val) > 0 {
		if m.ValLoss, err = LossForward(logits, labels, t.data.Val, len(t.data.Val), nil); err != nil {
			return m, err
		}
	}
	m.TrainAcc = accuracy(logits, labels, t.data.Train)
	m.ValAcc = accuracy(logits, labels, t.data.Val)
	m.TestAcc = accuracy(logits, labels, t.data.Test)
	return m, nil
}

func accuracy(logits *tensor.Dense, labels, rows []int32) float64 {
	if len(rows) == 0 {
		return 0
	}
	return tensor.Accuracy(logits, labels, rows)
}
