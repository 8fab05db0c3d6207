package graph_test

import (
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
)

// trainCora trains a GCN on d for a few epochs with a fixed seed and returns the losses of
// every epoch and the final metrics.
func trainCora(t *testing.T, d *graph.Dataset) ([]float64, model.Metrics) {
	t.Helper()
	tr, err := model.NewTrainer(d, model.TrainConfig{
		GCN: model.GCNConfig{InDim: d.NumFeatures(), Hidden: 16, Classes: d.NumClasses, Layers: 2, Dropout: 0.5},
		LR:  0.01, WeightDecay: 5e-4, Seed: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for e := range 30 {
		l, err := tr.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	m, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	return losses, m
}

// TestLayoutsTrainAlike trains Cora from the text layout and from its OGB and NumPy layouts
// with the same seed: the loss of every epoch and the accuracies are identical.
func TestLayoutsTrainAlike(t *testing.T) {
	text, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLoss, want := trainCora(t, text)
	for _, layout := range []struct {
		name  string
		write func(dir string, d *graph.Dataset) error
	}{
		{"ogb", graph.WriteOGB},
		{"numpy", graph.WriteNumPy},
		{"npz", func(dir string, d *graph.Dataset) error { return graph.WriteNumPy(dir+".npz", d) }},
	} {
		dir := filepath.Join(t.TempDir(), "cora")
		if err := layout.write(dir, text); err != nil {
			t.Fatal(err)
		}
		p := dir
		if layout.name == "npz" {
			p += ".npz"
		}
		d, err := graph.Load(p, graph.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		loss, got := trainCora(t, d)
		for e := range loss {
			if loss[e] != wantLoss[e] {
				t.Fatalf("%s layout: epoch %d loss %v, text layout %v", layout.name, e, loss[e], wantLoss[e])
			}
		}
		if got != want {
			t.Errorf("%s layout: %+v, text layout %+v", layout.name, got, want)
		}
		t.Logf("%s layout: train %.4f val %.4f test %.4f (text: %.4f %.4f %.4f)", layout.name, got.TrainAcc, got.ValAcc, got.TestAcc, want.TrainAcc, want.ValAcc, want.TestAcc)
	}
}
