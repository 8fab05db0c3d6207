package remotetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Tasks returns one request of every kind (AV of both layers, the loss, ∇AV of both layers)
// on an interval of rows with sparse features of width in, a 2-layer GCN of the given hidden
// width and 7 classes.
func Tasks(seed uint64, rows, in, hidden int) []dispatch.TaskRequest {
	rng := rand.New(rand.NewPCG(seed, 1))
	const classes = 7
	cfg := model.GCNConfig{InDim: in, Hidden: hidden, Classes: classes, Layers: 2, Dropout: 0.5}
	dense := func(r, c int) *tensor.Dense {
		d := tensor.NewDense(r, c)
		for i := range d.Data {
			d.Data[i] = float32(rng.NormFloat64())
		}
		return d
	}
	feats := &tensor.CSR{Rows: rows, Cols: in, RowPtr: make([]int64, rows+1)}
	for i := range rows {
		for j := range in {
			if rng.IntN(4) == 0 {
				feats.ColIdx = append(feats.ColIdx, int32(j))
				feats.Val = append(feats.Val, rng.Float32())
			}
		}
		feats.RowPtr[i+1] = int64(len(feats.ColIdx))
	}
	base := dispatch.TaskRequest{Model: cfg, RowOffset: 100, Key: model.DropoutKey(seed, 3, 0), Train: true}
	fwd0 := base
	fwd0.Op, fwd0.Features, fwd0.W = dispatch.OpForward, graph.Features{Sparse: feats}, dense(in, hidden)
	fwd1 := base
	fwd1.Op, fwd1.Layer, fwd1.Z, fwd1.W = dispatch.OpForward, 1, dense(rows, hidden), dense(hidden, classes)
	fwd1.Key = model.DropoutKey(seed, 3, 1)
	labels := make([]int32, rows)
	var train []int32
	for i := range labels {
		labels[i] = int32(rng.IntN(classes))
		if rng.IntN(3) == 0 {
			train = append(train, int32(i))
		}
	}
	loss := dispatch.TaskRequest{Op: dispatch.OpLoss, Model: cfg, Z: dense(rows, classes), Labels: labels, Rows: train, Total: 2 * len(train)}
	back0 := fwd0
	back0.Op, back0.DP = dispatch.OpBackward, dense(rows, hidden)
	back1 := fwd1
	back1.Op, back1.DP = dispatch.OpBackward, dense(rows, classes)
	return []dispatch.TaskRequest{fwd0, fwd1, loss, back0, back1}
}

// Diff returns the largest absolute difference between two results' tensors and losses
// (+Inf when their shapes differ).
func Diff(a, b dispatch.TaskResult) float64 {
	worst := math.Abs(a.Loss - b.Loss)
	for _, p := range [][2]*tensor.Dense{{a.Out, b.Out}, {a.DW, b.DW}} {
		x, y := p[0], p[1]
		if (x == nil) != (y == nil) || (x != nil && (x.Rows != y.Rows || x.Cols != y.Cols)) {
			return math.Inf(1)
		}
		if x == nil {
			continue
		}
		for i := range x.Data {
			worst = max(worst, math.Abs(float64(x.Data[i]-y.Data[i])))
		}
	}
	return worst
}

// RunAll runs the tasks of Tasks(7, 60, 50, 16) rounds times through b, concurrently, and
// fails t unless each result equals dispatch.Execute's in this process bit for bit.
func RunAll(t testing.TB, b dispatch.Backend, rounds int) {
	t.Helper()
	reqs := Tasks(7, 60, 50, 16)
	want := make([]dispatch.TaskResult, len(reqs))
	for i := range reqs {
		var err error
		if want[i], err = dispatch.Execute(&reqs[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, rounds*len(reqs))
	for r := range rounds {
		for i := range reqs {
			go func() {
				got, err := b.Run(context.Background(), reqs[i])
				if err == nil && Diff(got, want[i]) != 0 {
					err = fmt.Errorf("round %d %v layer %d: result differs by %g", r, reqs[i].Op, reqs[i].Layer, Diff(got, want[i]))
				}
				errs <- err
			}()
		}
	}
	for range rounds * len(reqs) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
