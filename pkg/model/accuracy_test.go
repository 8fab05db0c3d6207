package model

import (
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// meanTestAccuracy trains a 2-layer GCN (sage: GraphSAGE) with Kipf's hyper-parameters for 200
// epochs on each of seeds 1..runs and returns the mean test accuracy at the last epoch.
func meanTestAccuracy(t testing.TB, dir string, runs int, sage bool) float64 {
	d, err := graph.Load(filepath.Join("..", "..", "datasets", dir), graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	graph.RowNormalize(d.Features.Sparse)
	sum := 0.0
	for seed := 1; seed <= runs; seed++ {
		tr, err := NewTrainer(d, TrainConfig{
			GCN:  GCNConfig{InDim: d.NumFeatures(), Hidden: 16, Classes: d.NumClasses, Layers: 2, Dropout: 0.5},
			SAGE: sage, LR: 0.01, WeightDecay: 5e-4, Seed: uint64(seed),
		})
		if err != nil {
			t.Fatal(err)
		}
		for e := 0; e < 200; e++ {
			if _, err := tr.Epoch(e); err != nil {
				t.Fatal(err)
			}
		}
		m, err := tr.Evaluate()
		if err != nil {
			t.Fatal(err)
		}
		sum += m.TestAcc
	}
	return sum / float64(runs)
}

// TestPublishedAccuracy checks the mean of 10 seeds against the published GCN numbers (Kipf &
// Welling 2017: Cora 81.5 %, CiteSeer 70.3 %), with half a point of slack.
func TestPublishedAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 20 models")
	}
	for _, c := range []struct {
		dir  string
		want float64
	}{{"cora", 0.810}, {"citeseer", 0.700}} {
		got := meanTestAccuracy(t, c.dir, 10, false)
		t.Logf("%s: mean test accuracy of 10 seeds %.2f%%", c.dir, 100*got)
		if got < c.want {
			t.Errorf("%s: mean test accuracy %.2f%%, want ≥ %.1f%%", c.dir, 100*got, 100*c.want)
		}
	}
}
