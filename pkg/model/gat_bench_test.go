package model

import (
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

// BenchmarkGATEpoch times one training epoch (forward, loss, backward, Adam) of the GAT paper's
// model on Cora and CiteSeer.
func BenchmarkGATEpoch(b *testing.B) {
	for _, name := range []string{"cora", "citeseer"} {
		d := gatDataset(b, name)
		tr, err := NewGATTrainer(d, GATTrainConfig{GAT: paperGAT(d), LR: 0.005, WeightDecay: 5e-4, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for e := 0; b.Loop(); e++ {
				if _, err := tr.Epoch(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// paperGAT is the GAT paper's transductive model for d: 8 heads of 8 features, one output head,
// dropout 0.6 on the inputs and the coefficients.
func paperGAT(d *graph.Dataset) GATConfig {
	return GATConfig{InDim: d.NumFeatures(), Hidden: 8, Heads: 8, OutHeads: 1, Classes: d.NumClasses, Layers: 2, Dropout: 0.6, AttentionDropout: 0.6}
}
