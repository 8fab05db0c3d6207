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

// sageLoss returns Σ rS ⊙ S + Σ rP ⊙ P of a GraphSAGE layer's AV task, with act kept or (nil)
// streamed.
func sageLoss(t *testing.T, cfg GCNConfig, in *AVInput, w *tensor.Dense, act *Activation, rS, rP *tensor.Dense) float64 {
	t.Helper()
	s, p := tensor.NewDense(rS.Rows, rS.Cols), tensor.NewDense(rP.Rows, rP.Cols)
	if err := cfg.SAGEForward(in, w, act, s, p); err != nil {
		t.Fatal(err)
	}
	return dot(s, rS) + dot(p, rP)
}

// The AV task of a GraphSAGE layer: dW (both halves) and dZ against finite differences, in a
// hidden layer with and without dropout and in layer 0 with sparse and dense features; a
// streamed task (act nil) gives the kept activation's outputs bit for bit.
func TestSAGEAVGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	cfg := GCNConfig{InDim: 7, Hidden: 5, Classes: 3, Layers: 3, Dropout: 0.4}
	type tc struct {
		name string
		in   *AVInput
	}
	cases := []tc{
		{"sparse layer 0", &AVInput{Layer: 0, Features: graph.Features{Sparse: randSparse(rng, 8, 7, 0.4)}, RowOffset: 3, Key: DropoutKey(1, 2, 0), Train: true}},
		{"dense layer 0", &AVInput{Layer: 0, Features: graph.Features{Dense: randDense(rng, 8, 7, 0)}, RowOffset: 3, Key: DropoutKey(1, 2, 0), Train: true}},
	}
	for _, train := range []bool{false, true} {
		cases = append(cases, tc{"hidden layer", &AVInput{Layer: 1, Z: randDense(rng, 8, 5, 0.05), RowOffset: 11, Key: DropoutKey(3, 4, 1), Train: train}})
	}
	for _, c := range cases {
		dims := cfg.Dims()
		in, out := dims[c.in.Layer], dims[c.in.Layer+1]
		w := randDense(rng, 2*in, out, 0)
		rS, rP := randDense(rng, 8, out, 0), randDense(rng, 8, out, 0)
		var act Activation
		if err := cfg.Activate(c.in, &act); err != nil {
			t.Fatal(err)
		}
		dW := tensor.NewDense(2*in, out)
		var dZ *tensor.Dense
		if c.in.Layer > 0 {
			dZ = tensor.NewDense(8, in)
		}
		if err := cfg.SAGEBackward(c.in, w, &act, rS, rP, dW, dZ); err != nil {
			t.Fatal(err)
		}
		loss := func() float64 { return sageLoss(t, cfg, c.in, w, &Activation{}, rS, rP) }
		checkGrad(t, c.name+" dW", w, dW, loss)
		if dZ != nil {
			checkGrad(t, c.name+" dZ", c.in.Z, dZ, loss)
		}
		if c.in.Features.Sparse != nil {
			continue // streaming needs dense input
		}
		if kept, streamed := sageLoss(t, cfg, c.in, w, &Activation{}, rS, rP), sageLoss(t, cfg, c.in, w, nil, rS, rP); kept != streamed {
			t.Errorf("%s: streamed outputs give %v, kept %v", c.name, streamed, kept)
		}
		dWs := tensor.NewDense(2*in, out)
		var dZs *tensor.Dense
		if dZ != nil {
			dZs = tensor.NewDense(8, in)
		}
		if err := cfg.SAGEBackward(c.in, w, nil, rS, rP, dWs, dZs); err != nil {
			t.Fatal(err)
		}
		for i, want := range dW.Data {
			if d := math.Abs(float64(dWs.Data[i] - want)); d > 1e-5*(1+math.Abs(float64(want))) {
				t.Fatalf("%s: streamed dW[%d] = %v, kept %v", c.name, i, dWs.Data[i], want)
			}
		}
		if dZ != nil && !slices.Equal(dZ.Data, dZs.Data) {
			t.Errorf("%s: streamed dZ differs", c.name)
		}
	}
	// A GCN-shaped weight (dims[l] rows, not 2·dims[l]) is refused.
	z := randDense(rng, 4, 5, 0)
	if err := cfg.SAGEForward(&AVInput{Layer: 1, Z: z}, randDense(rng, 5, 5, 0), nil, tensor.NewDense(4, 5), tensor.NewDense(4, 5)); !errors.Is(err, ErrShape) {
		t.Errorf("SAGE AV with a 5x5 weight: %v, want ErrShape", err)
	}
}

// A one-layer GraphSAGE without dropout computes x_i W_self + mean over i's in-neighbours j of
// x_j W_neigh, checked against that sum in float64; a vertex without in-neighbours gets x_i W_self.
func TestSAGEForwardIsTheMeanAggregator(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	d := smallDataset(rng, 10, 6, 3)
	isolate(d.Adj, 4)
	tr, err := NewTrainer(d, TrainConfig{GCN: GCNConfig{InDim: 6, Classes: 3, Layers: 1}, SAGE: true, LR: 0.01, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.forward(0, false); err != nil {
		t.Fatal(err)
	}
	x, w := denseOf(d.Features.Sparse), tr.weights[0]
	rowTimes := func(i, top int, k int) float64 { // x_i · column k of W's block starting at row top
		s := 0.0
		for c := range 6 {
			s += float64(x.Data[i*6+c]) * float64(w.Data[(top+c)*3+k])
		}
		return s
	}
	for i := range 10 {
		nb := d.Adj.ColIdx[d.Adj.RowPtr[i]:d.Adj.RowPtr[i+1]]
		if i == 4 && len(nb) != 0 {
			t.Fatal("vertex 4 kept in-neighbours")
		}
		for k := range 3 {
			want := rowTimes(i, 0, k)
			for _, j := range nb {
				want += rowTimes(int(j), 6, k) / float64(len(nb))
			}
			if got := float64(tr.z[0].Data[i*3+k]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("Z[%d][%d] = %v, want %v", i, k, got, want)
			}
		}
	}
}

// isolate removes every edge to and from vertex v of a symmetric adjacency, in place.
func isolate(adj *tensor.CSR, v int32) {
	var cols []int32
	rp := []int64{0}
	for i := range adj.Rows {
		if int32(i) != v {
			for _, c := range adj.ColIdx[adj.RowPtr[i]:adj.RowPtr[i+1]] {
				if c != v {
					cols = append(cols, c)
				}
			}
		}
		rp = append(rp, int64(len(cols)))
	}
	adj.RowPtr, adj.ColIdx = rp, cols
}

// denseOf returns a CSR matrix as a dense one.
func denseOf(m *tensor.CSR) *tensor.Dense {
	d := tensor.NewDense(m.Rows, m.Cols)
	for i := range m.Rows {
		for k := m.RowPtr[i]; k < m.RowPtr[i+1]; k++ {
			d.Data[i*m.Cols+int(m.ColIdx[k])] = m.Val[k]
		}
	}
	return d
}

// TestSAGEWholeModelGradient checks the backward pass of a 3-layer GraphSAGE with dropout, tasks
// chained as the trainer chains them, against finite differences of the training loss with
// respect to every weight, on a graph with an isolated vertex and a one-way edge (M not
// symmetric in structure either). Central differences of 1e-2 straddle a ReLU kink for some
// random graphs; this one keeps every pre-activation away from it.
func TestSAGEWholeModelGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 45))
	d := smallDataset(rng, 12, 6, 3)
	isolate(d.Adj, 5)
	addEdge(d.Adj, 5, 0) // 0 → 5 only: vertex 5 has one in-neighbour, 0 does not gain one
	cfg := TrainConfig{GCN: GCNConfig{InDim: 6, Hidden: 5, Classes: 3, Layers: 3, Dropout: 0.3}, SAGE: true, LR: 0.01, Seed: 4}
	tr, err := NewTrainer(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tr.adj.Equal(tr.adjT) {
		t.Fatal("M equals its transpose")
	}
	lossAt := gradientEpoch(t, tr, d, 2)
	for l, w := range tr.weights {
		if w.Rows != 2*cfg.GCN.Dims()[l] {
			t.Fatalf("W%d is %dx%d", l, w.Rows, w.Cols)
		}
		checkGrad(t, "W"+string(rune('0'+l)), w, tr.grads[l].Clone(), lossAt)
	}
}

// addEdge adds the entry (row, col) to a CSR structure, in sorted position.
func addEdge(adj *tensor.CSR, row, col int32) {
	at := adj.RowPtr[row]
	for at < adj.RowPtr[row+1] && adj.ColIdx[at] < col {
		at++
	}
	adj.ColIdx = slices.Insert(adj.ColIdx, int(at), col)
	for i := row + 1; int(i) <= adj.Rows; i++ {
		adj.RowPtr[i]++
	}
}
