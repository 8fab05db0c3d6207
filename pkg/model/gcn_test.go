package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

func randDense(rng *rand.Rand, r, c int, gap float32) *tensor.Dense {
	d := tensor.NewDense(r, c)
	for i := range d.Data {
		v := float32(rng.NormFloat64())
		// Keep values away from ReLU's kink so finite differences do not straddle it.
		if v > -gap && v < gap {
			v += 2 * gap * float32(math.Copysign(1, float64(v)))
		}
		d.Data[i] = v
	}
	return d
}

func randSparse(rng *rand.Rand, r, c int, density float64) *tensor.CSR {
	m := &tensor.CSR{Rows: r, Cols: c, RowPtr: make([]int64, r+1)}
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if rng.Float64() < density {
				m.ColIdx = append(m.ColIdx, int32(j))
				m.Val = append(m.Val, float32(rng.Float64()))
			}
		}
		m.RowPtr[i+1] = int64(len(m.ColIdx))
	}
	return m
}

// dot returns Σ a ⊙ b in float64.
func dot(a, b *tensor.Dense) float64 {
	s := 0.0
	for i := range a.Data {
		s += float64(a.Data[i]) * float64(b.Data[i])
	}
	return s
}

// checkGrad compares an analytic gradient with central differences of f over every element of x.
func checkGrad(t *testing.T, name string, x *tensor.Dense, analytic *tensor.Dense, f func() float64) {
	t.Helper()
	const eps = 1e-2
	worst := 0.0
	for i := range x.Data {
		orig := x.Data[i]
		x.Data[i] = orig + eps
		up := f()
		x.Data[i] = orig - eps
		down := f()
		x.Data[i] = orig
		num := (up - down) / (2 * eps)
		err := math.Abs(num-float64(analytic.Data[i])) / math.Max(1, math.Abs(num))
		worst = math.Max(worst, err)
		if err > 2e-3 {
			t.Fatalf("%s: element %d analytic %.6f numeric %.6f", name, i, analytic.Data[i], num)
		}
	}
	t.Logf("%s: %d elements, worst relative error %.2e", name, len(x.Data), worst)
}

func TestAVHiddenLayerGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := GCNConfig{InDim: 5, Hidden: 6, Classes: 3, Layers: 3, Dropout: 0.4}
	for _, train := range []bool{false, true} {
		z := randDense(rng, 7, 6, 0.05)
		w := randDense(rng, 6, 6, 0)
		r := randDense(rng, 7, 6, 0) // dLoss/dP for loss = Σ R ⊙ P
		in := &AVInput{Layer: 1, Z: z, RowOffset: 11, Key: DropoutKey(3, 4, 1), Train: train}
		loss := func() float64 {
			var act Activation
			out := tensor.NewDense(7, 6)
			if err := cfg.AVForward(in, w, &act, out); err != nil {
				t.Fatal(err)
			}
			return dot(out, r)
		}
		var act Activation
		if err := cfg.Activate(in, &act); err != nil {
			t.Fatal(err)
		}
		dW, dZ := tensor.NewDense(6, 6), tensor.NewDense(7, 6)
		if err := cfg.AVBackward(in, w, &act, r, dW, dZ); err != nil {
			t.Fatal(err)
		}
		checkGrad(t, "dW", w, dW, loss)
		checkGrad(t, "dZ", z, dZ, loss)
	}
}

func TestAVInputLayerGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cfg := GCNConfig{InDim: 9, Hidden: 4, Classes: 3, Layers: 2, Dropout: 0.5}
	sparse := randSparse(rng, 8, 9, 0.3)
	dense := randDense(rng, 8, 9, 0)
	for name, feats := range map[string]graph.Features{"sparse": {Sparse: sparse}, "dense": {Dense: dense}} {
		w := randDense(rng, 9, 4, 0)
		r := randDense(rng, 8, 4, 0)
		in := &AVInput{Layer: 0, Features: feats, RowOffset: 3, Key: DropoutKey(1, 2, 0), Train: true}
		loss := func() float64 {
			var act Activation
			out := tensor.NewDense(8, 4)
			if err := cfg.AVForward(in, w, &act, out); err != nil {
				t.Fatal(err)
			}
			return dot(out, r)
		}
		var act Activation
		if err := cfg.Activate(in, &act); err != nil {
			t.Fatal(err)
		}
		dW := tensor.NewDense(9, 4)
		if err := cfg.AVBackward(in, w, &act, r, dW, nil); err != nil {
			t.Fatal(err)
		}
		checkGrad(t, name+" dW", w, dW, loss)
	}
}

// An activation buffer reused for inputs of other sizes (a pool's, across intervals) holds
// what a fresh one would (for sparse input features, dense ones and a hidden layer), and is
// not reallocated for smaller input.
func TestActivateReusesBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cfg := GCNConfig{InDim: 9, Hidden: 4, Classes: 3, Layers: 2, Dropout: 0.5}
	var reused Activation
	for _, rows := range []int{8, 3, 12, 5} {
		for _, in := range []*AVInput{
			{Layer: 0, Features: graph.Features{Sparse: randSparse(rng, rows, 9, 0.4)}},
			{Layer: 0, Features: graph.Features{Dense: randDense(rng, rows, 9, 0)}},
			{Layer: 1, Z: randDense(rng, rows, 4, 0)},
		} {
			in.Key, in.Train = DropoutKey(1, rows, in.Layer), true
			var fresh Activation
			if err := cfg.Activate(in, &fresh); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Activate(in, &reused); err != nil {
				t.Fatal(err)
			}
			if in.Features.Sparse != nil {
				if g, w := reused.Sparse, fresh.Sparse; g.Rows != w.Rows || g.Cols != w.Cols || !slices.Equal(g.Val, w.Val) || !slices.Equal(g.ColIdx, w.ColIdx) {
					t.Fatalf("%d rows, sparse features: reused activation %+v, fresh %+v", rows, g, w)
				}
				continue
			}
			if g, w := reused.Dense, fresh.Dense; g.Rows != w.Rows || g.Cols != w.Cols || !slices.Equal(g.Data, w.Data) {
				t.Fatalf("%d rows, layer %d: reused activation %+v, fresh %+v", rows, in.Layer, g, w)
			}
		}
	}
	// Sparse inputs of two sizes, both smaller than the buffer held: no allocation.
	in := &AVInput{Layer: 0, Features: graph.Features{Sparse: randSparse(rng, 4, 9, 0.4)}, Train: true}
	in2 := &AVInput{Layer: 0, Features: graph.Features{Sparse: randSparse(rng, 2, 9, 0.4)}, Train: true}
	if n := testing.AllocsPerRun(10, func() { _, _ = cfg.Activate(in, &reused), cfg.Activate(in2, &reused) }); n != 0 {
		t.Errorf("%v allocations per Activate into a buffer large enough", n)
	}
}

// A task that keeps no activation (act nil) computes a dense one a block of rows at a time: P
// equal bit for bit to the kept activation's, dW within rounding (the blocks sum in another
// order), dZ equal; over several blocks, a partial last block, row ids and a row offset.
func TestStreamedActivation(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cfg := GCNConfig{InDim: 20, Hidden: 12, Classes: 5, Layers: 2, Dropout: 0.5}
	rows := 3*streamRows + 77
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(rng.IntN(1 << 20))
	}
	for _, in := range []*AVInput{
		{Layer: 0, Features: graph.Features{Dense: randDense(rng, rows, 20, 0)}, RowOffset: 5},
		{Layer: 1, Z: randDense(rng, rows, 12, 0), RowIDs: ids},
	} {
		in.Key, in.Train = DropoutKey(3, 4, in.Layer), true
		dims := cfg.Dims()
		w := randDense(rng, dims[in.Layer], dims[in.Layer+1], 0)
		var act Activation
		kept, streamed := tensor.NewDense(rows, w.Cols), tensor.NewDense(rows, w.Cols)
		if err := cfg.AVForward(in, w, &act, kept); err != nil {
			t.Fatal(err)
		}
		if err := cfg.AVForward(in, w, nil, streamed); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(kept.Data, streamed.Data) {
			t.Errorf("layer %d: streamed P differs from the kept activation's", in.Layer)
		}
		dP := randDense(rng, rows, w.Cols, 0)
		dWk, dWs := tensor.NewDense(w.Rows, w.Cols), tensor.NewDense(w.Rows, w.Cols)
		var dZk, dZs *tensor.Dense
		if in.Layer > 0 {
			dZk, dZs = tensor.NewDense(rows, w.Rows), tensor.NewDense(rows, w.Rows)
		}
		if err := cfg.AVBackward(in, w, &act, dP, dWk, dZk); err != nil {
			t.Fatal(err)
		}
		if err := cfg.AVBackward(in, w, nil, dP, dWs, dZs); err != nil {
			t.Fatal(err)
		}
		for i, want := range dWk.Data {
			if d := math.Abs(float64(dWs.Data[i] - want)); d > 1e-4*(1+math.Abs(float64(want))) {
				t.Fatalf("layer %d: streamed dW[%d] = %v, kept %v", in.Layer, i, dWs.Data[i], want)
			}
		}
		if in.Layer > 0 && !slices.Equal(dZk.Data, dZs.Data) {
			t.Errorf("layer %d: streamed dZ differs", in.Layer)
		}
	}
	sparse := &AVInput{Layer: 0, Features: graph.Features{Sparse: randSparse(rng, 4, 20, 0.3)}, Train: true}
	w := randDense(rng, 20, 12, 0)
	if err := cfg.AVBackward(sparse, w, nil, randDense(rng, 4, 12, 0), tensor.NewDense(20, 12), nil); !errors.Is(err, ErrShape) {
		t.Errorf("∇AV of sparse features without their activation: %v, want ErrShape", err)
	}
	// Bad inputs are refused, not a panic, whether an activation is given or not.
	for _, act := range []*Activation{nil, {}} {
		for _, in := range []*AVInput{{Layer: 2, Z: randDense(rng, 4, 12, 0)}, {Layer: 1}, {Layer: 1, Z: randDense(rng, 4, 7, 0)}} {
			if err := cfg.AVForward(in, w, act, tensor.NewDense(4, 12)); !errors.Is(err, ErrShape) {
				t.Errorf("AV of layer %d (activation %v): %v, want ErrShape", in.Layer, act != nil, err)
			}
			if err := cfg.AVBackward(in, w, act, tensor.NewDense(4, 12), tensor.NewDense(20, 12), nil); !errors.Is(err, ErrShape) {
				t.Errorf("∇AV of layer %d (activation %v): %v, want ErrShape", in.Layer, act != nil, err)
			}
		}
	}
}

func TestLossGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	logits := randDense(rng, 10, 4, 0)
	labels := []int32{0, 1, 2, 3, -1, 1, 2, 0, 3, 1}
	rows := []int32{0, 2, 3, 5, 9}
	dZ := tensor.NewDense(10, 4)
	if _, err := LossForward(logits, labels, rows, 8, dZ); err != nil {
		t.Fatal(err)
	}
	checkGrad(t, "dlogits", logits, dZ, func() float64 {
		l, err := LossForward(logits, labels, rows, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
	for _, r := range []int{1, 4, 6, 7, 8} {
		for _, v := range dZ.Row(r) {
			if v != 0 {
				t.Fatalf("row %d is not a training row but has gradient %v", r, v)
			}
		}
	}
}

func TestGatherBackwardIsTranspose(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := randSparse(rng, 6, 8, 0.4) // a non-square, non-symmetric block, as a partition has
	p := randDense(rng, 8, 3, 0)
	r := randDense(rng, 6, 3, 0)
	dP := tensor.NewDense(8, 3)
	tensor.SpMM(dP, tensor.Transpose(a), r)
	checkGrad(t, "dP", p, dP, func() float64 {
		z := tensor.NewDense(6, 3)
		tensor.SpMM(z, a, p)
		return dot(z, r)
	})
}

// smallDataset is a random undirected graph with sparse features and labels.
func smallDataset(rng *rand.Rand, n, f, c int) *graph.Dataset {
	adj := &tensor.CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1)}
	edges := make([][]bool, n)
	for i := range edges {
		edges[i] = make([]bool, n)
	}
	for k := 0; k < 3*n; k++ {
		u, v := rng.IntN(n), rng.IntN(n)
		if u != v {
			edges[u][v], edges[v][u] = true, true
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if edges[i][j] {
				adj.ColIdx = append(adj.ColIdx, int32(j))
			}
		}
		adj.RowPtr[i+1] = int64(len(adj.ColIdx))
	}
	d := &graph.Dataset{Name: "small", NumClasses: c, Adj: adj, Features: graph.Features{Sparse: randSparse(rng, n, f, 0.4)}}
	for i := 0; i < n; i++ {
		d.Labels = append(d.Labels, int32(rng.IntN(c)))
		switch i % 3 {
		case 0:
			d.Train = append(d.Train, int32(i))
		case 1:
			d.Val = append(d.Val, int32(i))
		default:
			d.Test = append(d.Test, int32(i))
		}
	}
	return d
}

// TestWholeModelGradient checks the backward pass of a 3-layer GCN, tasks chained as the trainer
// chains them, against finite differences of the training loss with respect to every weight.
func TestWholeModelGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	d := smallDataset(rng, 12, 6, 3)
	cfg := TrainConfig{GCN: GCNConfig{InDim: 6, Hidden: 5, Classes: 3, Layers: 3, Dropout: 0.3}, LR: 0.01, Seed: 4}
	tr, err := NewTrainer(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lossAt := gradientEpoch(t, tr, d, 2)
	for l, w := range tr.weights {
		g := tr.grads[l].Clone()
		checkGrad(t, "W"+string(rune('0'+l)), w, g, lossAt)
	}
}

// gradientEpoch runs epoch of tr with a zero learning rate, which leaves the weights in place
// and their gradients in tr.grads, and returns the training loss of that epoch's forward pass
// as a function of the weights.
func gradientEpoch(t *testing.T, tr *Trainer, d *graph.Dataset, epoch int) func() float64 {
	t.Helper()
	tr.adam.cfg.LR = 0
	if _, err := tr.Epoch(epoch); err != nil {
		t.Fatal(err)
	}
	return func() float64 {
		if err := tr.forward(epoch, true); err != nil {
			t.Fatal(err)
		}
		l, err := LossForward(tr.z[len(tr.z)-1], d.Labels, d.Train, len(d.Train), nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func TestAdamMatchesHandComputedStep(t *testing.T) {
	w := &tensor.Dense{Rows: 1, Cols: 2, Data: []float32{1, -2}}
	g := &tensor.Dense{Rows: 1, Cols: 2, Data: []float32{0.5, 0.25}}
	a, err := NewAdam(AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: []float32{0.1}}, []*tensor.Dense{w})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Step([]*tensor.Dense{w}, []*tensor.Dense{g}); err != nil {
		t.Fatal(err)
	}
	// First step: m̂ = g', v̂ = g'², so the update is lr·g'/(|g'|+eps) = ±lr with g' = g + wd·w.
	want := []float64{1 - 0.1, -2 - 0.1} // g' = 0.6 and 0.05, both positive
	for i, v := range w.Data {
		if math.Abs(float64(v)-want[i]) > 1e-6 {
			t.Fatalf("weight %d = %v, want %v", i, v, want[i])
		}
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []GCNConfig{
		{InDim: 0, Hidden: 4, Classes: 3, Layers: 2},
		{InDim: 4, Hidden: 4, Classes: 1, Layers: 2},
		{InDim: 4, Hidden: 0, Classes: 3, Layers: 2},
		{InDim: 4, Hidden: 4, Classes: 3, Layers: 0},
		{InDim: 4, Hidden: 4, Classes: 3, Layers: 2, Dropout: 1},
		{InDim: 4, Hidden: 4, Classes: 3, Layers: 2, Dropout: float32(math.NaN())},
	}
	for _, c := range bad {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (GCNConfig{InDim: 4, Classes: 3, Layers: 1}).Validate(); err != nil {
		t.Errorf("one-layer GCN refused: %v", err)
	}
}
