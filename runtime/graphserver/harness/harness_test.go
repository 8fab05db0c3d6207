package harness_test

import (
	"context"
	"math"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
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
		Epochs: epochs, Seed: 1, Staleness: jobconfig.Sync, EvalEvery: epochs}
}

// gatConfig is a GAT of the paper's shape: 8 heads of 8 features, dropout 0.6 on inputs and
// attention coefficients.
func gatConfig(epochs int) graphserver.Config {
	return graphserver.Config{Intervals: 3, Layers: 2, Hidden: 8, Heads: 8, OutHeads: 1, Dropout: 0.6, AttentionDropout: 0.6,
		LearningRate: 0.005, WeightDecay: 5e-4, Epochs: epochs, Seed: 1, Staleness: jobconfig.Sync, EvalEvery: 10}
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
			GCN:  model.GCNConfig{InDim: d.NumFeatures(), Hidden: c.Hidden, Classes: d.NumClasses, Layers: c.Layers, Dropout: float32(c.Dropout)},
			SAGE: c.SAGE, LR: float32(c.LearningRate), WeightDecay: float32(c.WeightDecay), Seed: c.Seed})
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

// train runs c on graph and parameter servers in this process, on the default cut.
func train(t *testing.T, c graphserver.Config, graphServers, paramServers int) *harness.Result {
	t.Helper()
	return trainCut(t, c, partition.DefaultMethod, graphServers, paramServers)
}

// trainCut runs c on graph servers holding the partitions method cuts.
func trainCut(t *testing.T, c graphserver.Config, method partition.Method, graphServers, paramServers int) *harness.Result {
	t.Helper()
	res, err := harness.Run(context.Background(), harness.Options{Dataset: cora(t), Method: method, GraphServers: graphServers, ParamServers: paramServers, Train: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Epochs) != c.Epochs || res.Final.Epoch != c.Epochs {
		t.Fatalf("%d epoch lines and a result after epoch %d, want %d", len(res.Epochs), res.Final.Epoch, c.Epochs)
	}
	return res
}

// syncMatchesSingleProcess trains c synchronously on the servers, on the partitions of each
// method (a renumbering cut included: dropout masks are keyed by the original vertex ids), and
// checks every epoch's loss against the single-process trainer's (within maxLossDiff,
// relative) and the final accuracies (within 0.002).
func syncMatchesSingleProcess(t *testing.T, c graphserver.Config, graphServers, paramServers int, methods ...partition.Method) {
	t.Helper()
	want, final := singleProcess(t, c)
	for _, m := range methods {
		res := trainCut(t, c, m, graphServers, paramServers)
		worst := 0.0
		for e, ev := range res.Epochs {
			if ev.Epoch != e+1 {
				t.Fatalf("line %d is of epoch %d", e, ev.Epoch)
			}
			d := math.Abs(ev.Loss-want[e]) / want[e]
			worst = math.Max(worst, d)
			if d > maxLossDiff {
				t.Errorf("%s cut, epoch %d: loss %.7f, single process %.7f", m, e+1, ev.Loss, want[e])
			}
		}
		t.Logf("%s cut: largest relative loss difference over %d epochs: %.2g; test accuracy %.4f (single process %.4f)", m, len(want), worst, res.Final.TestAcc, final.TestAcc)
		if math.Abs(res.Final.TestAcc-final.TestAcc) > 0.002 || math.Abs(res.Final.TrainAcc-final.TrainAcc) > 0.002 {
			t.Errorf("%s cut, final evaluation: test %.4f, train %.4f; single process %.4f, %.4f", m, res.Final.TestAcc, res.Final.TrainAcc, final.TestAcc, final.TrainAcc)
		}
	}
}

// maxLossDiff bounds the relative difference of a synchronous run's loss from the single
// process's in any epoch: float sums taken in another order, nothing more.
const maxLossDiff = 1e-6

// TestSyncMatchesSingleProcess: a GCN on 2 graph servers and 2 parameter servers in
// synchronous mode follows the single-process loss curve, on the contiguous and the multilevel
// (renumbering) cut.
func TestSyncMatchesSingleProcess(t *testing.T) {
	syncMatchesSingleProcess(t, gcnConfig(40), 2, 2, partition.MethodContiguous, partition.MethodMultilevel)
}

// TestSyncMatchesSingleProcessThreeServers: the same with 3 graph servers, so that every
// server has two peers, and one parameter server, on the default (multilevel) cut.
func TestSyncMatchesSingleProcessThreeServers(t *testing.T) {
	syncMatchesSingleProcess(t, gcnConfig(30), 3, 1, partition.DefaultMethod)
}

// TestGATSyncMatchesSingleProcess: a GAT on 2 graph servers and 3 parameter servers, so that a
// layer's tensors lie on different shards, follows the single-process loss curve on both cuts.
func TestGATSyncMatchesSingleProcess(t *testing.T) {
	syncMatchesSingleProcess(t, gatConfig(30), 2, 3, partition.MethodContiguous, partition.MethodMultilevel)
}

// TestSAGESyncMatchesSingleProcess: a GraphSAGE network with GCN's settings and three layers
// (a hidden layer's backward pass sums both halves' dZ) on 2 graph servers and 3 parameter
// servers follows the single-process loss curve on both cuts.
func TestSAGESyncMatchesSingleProcess(t *testing.T) {
	syncMatchesSingleProcess(t, sageConfig(30), 2, 3, partition.MethodContiguous, partition.MethodMultilevel)
}

// sageConfig is a 3-layer GraphSAGE network with the GCN's settings.
func sageConfig(epochs int) graphserver.Config {
	c := gcnConfig(epochs)
	c.SAGE, c.Layers = true, 3
	return c
}

// TestAsyncLearns trains a GCN with S = 0 and S = 1 (with an update per graph server per epoch,
// the default, and per interval), and a GAT and a 3-layer GraphSAGE network with S = 1, for a
// few epochs (the asynchronous paths, short enough for the race detector):
// every epoch is reported with a finite loss, the loss falls, and the result is the last epoch's.
func TestAsyncLearns(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   graphserver.Config
		s     int
		every jobconfig.UpdateEvery
	}{{"gcn-S0", gcnConfig(12), 0, jobconfig.UpdateEvery{}}, {"gcn-S1", gcnConfig(12), 1, jobconfig.UpdateEvery{}},
		{"gcn-S1-every-interval", gcnConfig(12), 1, jobconfig.UpdateIntervals(1)}, {"gat-S1", gatConfig(8), 1, jobconfig.UpdateEvery{}},
		{"sage-S1", sageConfig(12), 1, jobconfig.UpdateEvery{}}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Staleness, cfg.EvalEvery, cfg.UpdateEvery = jobconfig.Bounded(c.s), 4, c.every
			// Both servers record into one recorder, so that the race detector sees the
			// tracing of tasks, waits and the loop.
			cfg.Trace = trace.New(0, 1<<12)
			res := train(t, cfg, 2, 2)
			kinds := map[trace.Kind]bool{}
			for _, sp := range cfg.Trace.Spans() {
				kinds[sp.Kind] = true
			}
			for _, k := range []trace.Kind{trace.AV, trace.GA, trace.SC, trace.BackAV, trace.WU, trace.Eval} {
				if !kinds[k] {
					t.Errorf("no %v span recorded", k)
				}
			}
			first, last := res.Epochs[0].Loss, res.Epochs[len(res.Epochs)-1].Loss
			for _, ev := range res.Epochs {
				if math.IsNaN(ev.Loss) || math.IsInf(ev.Loss, 0) || ev.Loss <= 0 {
					t.Fatalf("epoch %d: loss %v", ev.Epoch, ev.Loss)
				}
				if (ev.ValAcc != nil) != (ev.Epoch%4 == 0) {
					t.Errorf("epoch %d: validation accuracy %v, want one every 4 epochs", ev.Epoch, ev.ValAcc)
				}
			}
			if last >= first {
				t.Errorf("loss %.4f after %d epochs, %.4f after the first: want it to fall", last, len(res.Epochs), first)
			}
			t.Logf("loss %.4f → %.4f; test accuracy %.4f", first, last, res.Final.TestAcc)
		})
	}
}

// TestAsyncAccuracy trains the GCN asynchronously with S = 0 and S = 1, each with an update
// per graph server per epoch (the default) and per interval (200 epochs, 2 seeds), and checks
// each mean test accuracy against the single-process mean (within 1.5 points).
func TestAsyncAccuracy(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("trains Cora ten times for 200 epochs (TestAsyncLearns covers the asynchronous paths under -race and -short)")
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
		for _, every := range []jobconfig.UpdateEvery{{}, jobconfig.UpdateIntervals(1)} {
			acc := mean(func(seed uint64) float64 {
				c := gcnConfig(200)
				c.Seed, c.Staleness, c.UpdateEvery = seed, jobconfig.Bounded(s), every
				return train(t, c, 2, 2).Final.TestAcc
			})
			t.Logf("staleness %d, an update every %v: test accuracy %.4f, single process %.4f", s, every, acc, base)
			if math.Abs(acc-base) > 0.015 {
				t.Errorf("staleness %d, an update every %v: test accuracy %.4f, single process %.4f", s, every, acc, base)
			}
		}
	}
}
