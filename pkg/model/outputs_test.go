package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestOutputs checks that after Evaluate the logits are the ones Evaluate scored and the
// embeddings are the last layer's input after its activation: ReLU(Z_{L-2}) for a GCN,
// ELU(Z_{L-2} + b_{L-2}) for a GAT, without dropout.
func TestOutputs(t *testing.T) {
	d := smallDataset(rand.New(rand.NewPCG(5, 6)), 40, 6, 3)
	g, err := NewTrainer(d, TrainConfig{GCN: GCNConfig{InDim: 6, Hidden: 5, Classes: 3, Layers: 3, Dropout: 0.5}, LR: 0.05, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewGATTrainer(d, GATTrainConfig{GAT: gatSmall(6), LR: 0.05, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		p    Predictor
		want func(i int) float32 // embedding element i
	}{
		"gcn": {g, func(i int) float32 { return max(0, g.z[1].Data[i]) }},
		"gat": {a, func(i int) float32 {
			w := a.z[1].Cols
			x := float64(a.z[1].Data[i] + a.params[1].Bias.Data[i%w])
			if x > 0 {
				return float32(x)
			}
			return float32(math.Expm1(x))
		}},
	} {
		if _, err := c.p.Epoch(0); err != nil {
			t.Fatal(err)
		}
		m, err := c.p.Evaluate()
		if err != nil {
			t.Fatal(err)
		}
		logits, emb := c.p.Outputs()
		if logits.Rows != 40 || logits.Cols != 3 || accuracy(logits, d.Labels, d.Test) != m.TestAcc {
			t.Errorf("%s: logits %dx%d do not score the evaluated test accuracy %v", name, logits.Rows, logits.Cols, m.TestAcc)
		}
		if emb.Rows != 40 || emb.Cols != 5 && name == "gcn" || emb.Cols != 6 && name == "gat" {
			t.Fatalf("%s: embeddings %dx%d", name, emb.Rows, emb.Cols)
		}
		for i, v := range emb.Data {
			if w := c.want(i); math.Abs(float64(v-w)) > 1e-6 {
				t.Fatalf("%s: embedding element %d = %v, want %v", name, i, v, w)
			}
		}
	}
	one, err := NewTrainer(d, TrainConfig{GCN: GCNConfig{InDim: 6, Classes: 3, Layers: 1}, LR: 0.05, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Evaluate(); err != nil {
		t.Fatal(err)
	}
	if _, emb := one.Outputs(); emb != nil {
		t.Error("a one-layer model has embeddings")
	}
}
