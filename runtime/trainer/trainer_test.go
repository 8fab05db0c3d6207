package trainer

import (
	"context"
	"math"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/runpolicy"
)

// coraGCN returns a fresh 2-layer GCN learner on Cora, as dorylus train builds it by default
// but for its learning rate.
func coraGCN(t *testing.T, lr float32) model.Learner {
	t.Helper()
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	graph.RowNormalize(d.Features.Sparse)
	tr, err := model.NewTrainer(d, model.TrainConfig{
		GCN: model.GCNConfig{InDim: d.NumFeatures(), Hidden: 16, Classes: d.NumClasses, Layers: 2, Dropout: 0.5},
		LR:  lr, WeightDecay: 5e-4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTrainEvaluatesAsThePolicySays trains 5 epochs evaluating every 2: the curve holds every
// epoch's loss, the validation accuracy from the second epoch on, and the result is the final
// evaluation — the same losses and metrics as the learner trained by hand.
func TestTrainEvaluatesAsThePolicySays(t *testing.T) {
	var seen []int
	res, err := Train(context.Background(), coraGCN(t, 0.01), Config{Seed: 1, Policy: runpolicy.Config{Epochs: 5, EvalEvery: 2},
		Epoch: func(r Record, _ *runpolicy.Policy) error { seen = append(seen, r.Epoch); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ref := coraGCN(t, 0.01)
	if len(res.Curve) != 5 || len(seen) != 5 {
		t.Fatalf("%d records, %d hook calls; want 5", len(res.Curve), len(seen))
	}
	var val float64
	for i, r := range res.Curve {
		loss, err := ref.Epoch(i)
		if err != nil {
			t.Fatal(err)
		}
		if r.Epoch != i+1 || r.Loss != loss {
			t.Errorf("record %d: epoch %d loss %v, want epoch %d loss %v", i, r.Epoch, r.Loss, i+1, loss)
		}
		if r.Epoch%2 == 0 || r.Epoch == 5 {
			m, err := ref.Evaluate()
			if err != nil {
				t.Fatal(err)
			}
			val = m.ValAcc
		}
		if want := val; (r.Epoch == 1 && !math.IsNaN(r.ValAcc)) || (r.Epoch > 1 && r.ValAcc != want) {
			t.Errorf("epoch %d: val accuracy %v, want %v (NaN before the first evaluation)", r.Epoch, r.ValAcc, want)
		}
	}
	m, err := ref.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics != m || res.BestEpoch != 0 {
		t.Errorf("result %+v epoch %d, want the last evaluation %+v", res.Metrics, res.BestEpoch, m)
	}
}

// TestTrainStopsOnPatience selects by validation with patience 2 (at a learning rate that
// overfits Cora within a few dozen epochs): the run stops where
// model.BestValidation, fed every epoch's evaluation by hand, says to, and reports its kept
// epoch.
func TestTrainStopsOnPatience(t *testing.T) {
	const epochs, patience = 200, 2
	res, err := Train(context.Background(), coraGCN(t, 0.2), Config{Policy: runpolicy.Config{Epochs: epochs, EvalEvery: 1, Patience: patience}})
	if err != nil {
		t.Fatal(err)
	}
	ref, sel := coraGCN(t, 0.2), model.NewBestValidation(patience)
	stopped := epochs
	for e := range epochs {
		if _, err := ref.Epoch(e); err != nil {
			t.Fatal(err)
		}
		m, err := ref.Evaluate()
		if err != nil {
			t.Fatal(err)
		}
		if sel.Observe(e+1, m) {
			stopped = e + 1
			break
		}
	}
	kept, m := sel.Best()
	if stopped == epochs {
		t.Fatalf("patience %d never ran out in %d epochs: the test shows nothing", patience, epochs)
	}
	if len(res.Curve) != stopped || res.BestEpoch != kept || res.Metrics != m {
		t.Errorf("ran %d epochs, kept %d %+v; want %d, %d %+v", len(res.Curve), res.BestEpoch, res.Metrics, stopped, kept, m)
	}
}
