package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// cloneState deep-copies a Snapshot, as a checkpoint written to disk does.
func cloneState(tensors map[string][]float32) map[string][]float32 {
	out := make(map[string][]float32, len(tensors))
	for k, v := range tensors {
		out[k] = slices.Clone(v)
	}
	return out
}

// TestSnapshotRestoreResumesExactly trains 6 epochs straight and 3 + restore + 3 on a fresh
// trainer, for both models: the weights must agree bit for bit.
func TestSnapshotRestoreResumesExactly(t *testing.T) {
	d := smallDataset(rand.New(rand.NewPCG(1, 2)), 20, 6, 3)
	gcn := func() Learner {
		tr, err := NewTrainer(d, TrainConfig{GCN: GCNConfig{InDim: 6, Hidden: 5, Classes: 3, Layers: 2, Dropout: 0.5}, LR: 0.05, WeightDecay: 5e-4, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	gat := func() Learner {
		tr, err := NewGATTrainer(d, GATTrainConfig{GAT: gatSmall(6), LR: 0.05, WeightDecay: 5e-4, Seed: 3, Intervals: 2})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for name, mk := range map[string]func() Learner{"gcn": gcn, "gat": gat} {
		run := func(tr Learner, from, to int) {
			for e := from; e < to; e++ {
				if _, err := tr.Epoch(e); err != nil {
					t.Fatalf("%s epoch %d: %v", name, e, err)
				}
			}
		}
		straight := mk()
		run(straight, 0, 6)
		first := mk()
		run(first, 0, 3)
		saved, steps := first.Snapshot()
		saved = cloneState(saved)
		resumed := mk()
		if err := resumed.Restore(saved, steps); err != nil {
			t.Fatal(err)
		}
		run(resumed, 3, 6)
		want, wantSteps := straight.Snapshot()
		got, gotSteps := resumed.Snapshot()
		if gotSteps != wantSteps || gotSteps != 6 {
			t.Errorf("%s: %d steps after resuming, %d straight; want 6", name, gotSteps, wantSteps)
		}
		for k, w := range want {
			if !slices.Equal(got[k], w) {
				t.Errorf("%s: %s differs after resuming", name, k)
			}
		}
	}
}

func TestRestoreRefusesAnotherModel(t *testing.T) {
	d := smallDataset(rand.New(rand.NewPCG(1, 2)), 20, 6, 3)
	small, err := NewTrainer(d, TrainConfig{GCN: GCNConfig{InDim: 6, Hidden: 5, Classes: 3, Layers: 2}, LR: 0.01, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	wide, err := NewTrainer(d, TrainConfig{GCN: GCNConfig{InDim: 6, Hidden: 7, Classes: 3, Layers: 2}, LR: 0.01, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	s, steps := small.Snapshot()
	if err := wide.Restore(s, steps); !errors.Is(err, ErrShape) {
		t.Errorf("restoring a hidden-5 state into a hidden-7 model: %v, want ErrShape", err)
	}
	delete(s, "adam.v/1")
	if err := small.Restore(s, steps); !errors.Is(err, ErrShape) {
		t.Errorf("restoring a state without adam.v/1: %v, want ErrShape", err)
	}
}

// TestNotFiniteStops checks that a NaN weight, an infinite learning rate (the update overflows)
// and a NaN GAT parameter each stop training with an error naming the epoch, layer and task.
func TestNotFiniteStops(t *testing.T) {
	d := smallDataset(rand.New(rand.NewPCG(5, 6)), 20, 6, 3)
	cfg := TrainConfig{GCN: GCNConfig{InDim: 6, Hidden: 5, Classes: 3, Layers: 2}, LR: 0.01, Seed: 3}
	nan, err := NewTrainer(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nan.Weights()[1].Data[3] = float32(math.NaN())
	cfg.LR = float32(math.Inf(1))
	inf, err := NewTrainer(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gat, err := NewGATTrainer(d, GATTrainConfig{GAT: gatSmall(6), LR: 0.01, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	gat.Params()[0].ASrc.Data[0] = float32(math.NaN())
	for _, c := range []struct {
		name string
		tr   Learner
		want []string
	}{
		{"NaN weight", nan, []string{"epoch 3, layer 1, task loss"}},
		{"infinite learning rate", inf, []string{"epoch 3, layer 0, task WU", "updated weight"}},
		{"NaN GAT parameter", gat, []string{"epoch 3, layer 2, task loss"}},
	} {
		_, err := c.tr.Epoch(2)
		if !errors.Is(err, ErrNotFinite) {
			t.Errorf("%s: %v, want ErrNotFinite", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}
