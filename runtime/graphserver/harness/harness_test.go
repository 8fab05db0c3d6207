package harness_test

import (
	"context"
	"math"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver/harness"
)

// cora loads Cora; each caller gets its own copy, since graph servers normalise their rows.
func cora(t *testing.T) *graph.Dataset {
	t.Helper()
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// gcnConfig is Cora's GCN as `dorylus train` trains it by default.
func gcnConfig(epochs int) graphserver.Config {
	return graphserver.Config{Intervals: 3, Layers: 2, Hidden: 16, Dropout: 0.5, LearningRate: 0.01, WeightDecay: 5e-4,
		Epochs: epochs, Seed: 1, Sync: true, EvalEvery: epochs}
}

// gatConfig is a GAT of the paper's shape: 8 heads of 8 features, dropout 0.6 on inputs and
// attention coefficients.
func gatConfig(epochs int) graphserver.Config {
	return graphserver.Config{Intervals: 3, Layers: 2, Hidden: 8, Heads: 8, OutHeads: 1, Dropout: 0.6, AttentionDropout: 0.6,
		LearningRate: 0.005, WeightDecay: 5e-4, Epochs: epochs, Seed: 1, Sync: true, EvalEvery: 10}
}

// singleProcess trains c with pkg/model's single-process trainer and returns every epoch's
// training loss and the final evaluation.
func singleProcess(t *testing.T, c graphserver.Config) ([]float64, model.Metrics) {
	t.Helper()
	d := cora(t)
	graph.RowNormalize(d.Features.Sparse)
	var (
		tr  model.Learner
		err error
	)
	if c.Heads > 0 {
		tr, err = model.NewGATTrainer(d, model.GATTrainConfig{
			GAT: model.GATConfig{InDim: d.NumFeatures(), Hidden: c.Hidden, Heads: c.Heads, OutHeads: c.OutHeads, Classes: d.NumClasses,
				Layers: c.Layers, Dropout: float32(c.Dropout), AttentionDropout: float32(c.AttentionDropout)},
			LR: float32(c.LearningRate), WeightDecay: float32(c.WeightDecay), Seed: c.Seed})
	} else {
		tr, err = model.NewTrainer(d, model.TrainConfig{
			GCN: model.GCNConfig{InDim: d.NumFeatures(), Hidden: c.Hidden, Classes: d.NumClasses, Layers: c.Layers, Dropout: float32(c.Dropout)},
			LR:  float32(c.LearningRate), WeightDecay: float32(c.WeightDecay), Seed: c.Seed})
	}
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for e := range c.Epochs {
		loss, err := tr.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss)
	}
	m, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	return losses, m
}

// train runs c on graph and parameter servers in this process.
func train(t *testing.T, c graphserver.Config, graphServers, paramServers int) *harness.Result {
	t.Helper()
	res, err := harness.Run(context.Background(), harness.Options{Dataset: cora(t), GraphServers: graphServers, ParamServers: paramServers, Train: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Epochs) != c.Epochs || res.Final.Epoch != c.Epochs {
		t.Fatalf("%d epoch lines and a result after epoch %d, want %d", len(res.Epochs), res.Final.Epoch, c.Epochs)
	}
	return res
}

// syncMatchesSingleProcess trains c synchronously on the servers and checks every epoch's loss
// against the single-process trainer's (within 1e-4) and the final accuracies (within 0.002).
func syncMatchesSingleProcess(t *testing.T, c graphserver.Config, graphServers, paramServers int) {
	t.Helper()
	res := train(t, c, graphServers, paramServers)
	want, final := singleProcess(t, c)
	worst := 0.0
	for e, ev := range res.Epochs {
		if ev.Epoch != e+1 {
			t.Fatalf("line %d is of epoch %d", e, ev.Epoch)
		}
		d := math.Abs(ev.Loss - want[e])
		worst = math.Max(worst, d)
		if d > 1e-4 {
			t.Errorf("epoch %d: loss %.6f, single process %.6f", e+1, ev.Loss, want[e])
		}
	}
	t.Logf("largest loss difference over %d epochs: %.2g; test accuracy %.4f (single process %.4f)", len(want), worst, res.Final.TestAcc, final.TestAcc)
	if math.Abs(res.Final.TestAcc-final.TestAcc) > 0.002 || math.Abs(res.Final.TrainAcc-final.TrainAcc) > 0.002 {
		t.Errorf("final evaluation: test %.4f, train %.4f; single process %.4f, %.4f", res.Final.TestAcc, res.Final.TrainAcc, final.TestAcc, final.TrainAcc)
	}
}

// TestSyncMatchesSingleProcess: a GCN on 2 graph servers and 2 parameter servers in
// synchronous mode follows the single-process loss curve.
func TestSyncMatchesSingleProcess(t *testing.T) {
	syncMatchesSingleProcess(t, gcnConfig(40), 2, 2)
}

// TestSyncMatchesSingleProcessThreeServers: the same with 3 graph servers, so that every
// server has two peers, and one parameter server.
func TestSyncMatchesSingleProcessThreeServers(t *testing.T) {
	syncMatchesSingleProcess(t, gcnConfig(20), 3, 1)
}

// TestGATSyncMatchesSingleProcess: a GAT on 2 graph servers and 3 parameter servers, so that a
// layer's tensors lie on different shards, follows the single-process loss curve.
func TestGATSyncMatchesSingleProcess(t *testing.T) {
	syncMatchesSingleProcess(t, gatConfig(30), 2, 3)
}

// TestAsyncAccuracy trains the GCN asynchronously with S = 0 and S = 1 (200 epochs, 2 seeds)
// and checks each mean test accuracy against the single-process mean (within 1.5 points).
func TestAsyncAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("trains Cora six times")
	}
	const seeds = 2
	mean := func(run func(seed uint64) float64) float64 {
		sum := 0.0
		for s := range uint64(seeds) {
			sum += run(1 + s)
		}
		return sum / seeds
	}
	base := mean(func(seed uint64) float64 {
		c := gcnConfig(200)
		c.Seed = seed
		_, m := singleProcess(t, c)
		return m.TestAcc
	})
	for _, s := range []int{0, 1} {
		acc := mean(func(seed uint64) float64 {
			c := gcnConfig(200)
			c.Seed, c.Sync, c.Staleness = seed, false, s
			return train(t, c, 2, 2).Final.TestAcc
		})
		t.Logf("staleness %d: test accuracy %.4f, single process %.4f", s, acc, base)
		if math.Abs(acc-base) > 0.015 {
			t.Errorf("staleness %d: test accuracy %.4f, single process %.4f", s, acc, base)
		}
	}
}
