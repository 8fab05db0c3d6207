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
	base := dispatch.TaskRequest{Model: cfg, RowOffset: 100, RowIDs: RowIDs(rows), Key: model.DropoutKey(seed, 3, 0), Train: true}
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

// RowIDs returns the original ids of an interval of rows as a renumbering partition holds
// them: out of order and not contiguous.
func RowIDs(rows int) []int32 {
	ids := make([]int32, rows)
	for r := range ids {
		ids[r] = int32(7 * (rows - r))
	}
	return ids
}

// GATTasks returns one request of every GAT op (AV, ∇AV, AE, ∇AE of both layers of a GAT of
// 4 heads of hidden features and 7 classes) on an interval of rows with sparse features of
// width in, whose in-edges come from 2·rows sources. The backward ops change DP and DAlpha in
// place when run in process: run a Clone.
func GATTasks(seed uint64, rows, in, hidden int) []dispatch.TaskRequest {
	rng := rand.New(rand.NewPCG(seed, 2))
	cfg := model.GATConfig{InDim: in, Hidden: hidden, Heads: 4, OutHeads: 1, Classes: 7, Layers: 2, Dropout: 0.6, AttentionDropout: 0.6}
	dense := func(r, c int) *tensor.Dense {
		d := tensor.NewDense(r, c)
		for i := range d.Data {
			d.Data[i] = float32(rng.NormFloat64())
		}
		return d
	}
	gcn := Tasks(seed, rows, in, hidden)
	adj := &tensor.CSR{Rows: rows, Cols: 2 * rows, RowPtr: make([]int64, rows+1)}
	ids := make([]int32, adj.Cols)
	for j := range ids {
		ids[j] = int32(1000 + 5*j)
	}
	for i := range rows {
		for j := range adj.Cols {
			if j == i || rng.IntN(8) == 0 {
				adj.ColIdx = append(adj.ColIdx, int32(j))
			}
		}
		adj.RowPtr[i+1] = int64(len(adj.ColIdx))
	}
	var out []dispatch.TaskRequest
	for l := range cfg.Layers {
		s := cfg.Shape(l)
		fwd := dispatch.TaskRequest{Op: dispatch.OpGATForward, GAT: cfg, Layer: l, RowOffset: 100, RowIDs: RowIDs(rows), Key: model.DropoutKey(seed, 3, l), Train: true,
			W: dense(s.In, s.Width()), ADst: dense(s.Heads, s.F), ASrc: dense(s.Heads, s.F)}
		if l == 0 {
			fwd.Features = gcn[0].Features
		} else {
			fwd.Z, fwd.PrevBias = dense(rows, s.In), dense(1, s.In)
		}
		back := fwd
		back.Op, back.P, back.DP, back.DDst, back.DSrc = dispatch.OpGATBackward, dense(rows, s.Width()), dense(rows, s.Width()), dense(rows, s.Heads), dense(rows, s.Heads)
		ae := dispatch.TaskRequest{Op: dispatch.OpEdgeForward, GAT: cfg, Layer: l, RowOffset: 100, RowIDs: RowIDs(rows), Key: model.AttentionKey(seed, 3, l), Train: true,
			Adj: adj, DstScore: dense(rows, s.Heads), SrcScore: dense(adj.Cols, s.Heads), SrcIDs: ids}
		aeBack := ae
		aeBack.Op, aeBack.DAlpha = dispatch.OpEdgeBackward, dense(int(adj.NNZ()), s.Heads)
		out = append(out, fwd, back, ae, aeBack)
	}
	return out
}

// Clone returns req with copies of the tensors a task may change in place (DP, DAlpha).
func Clone(req dispatch.TaskRequest) dispatch.TaskRequest {
	if req.DP != nil {
		req.DP = req.DP.Clone()
	}
	if req.DAlpha != nil {
		req.DAlpha = req.DAlpha.Clone()
	}
	return req
}

// Diff returns the largest absolute difference between two results' tensors and losses
// (+Inf when their shapes differ).
func Diff(a, b dispatch.TaskResult) float64 {
	worst := math.Abs(a.Loss - b.Loss)
	for _, p := range [][2]*tensor.Dense{{a.Out, b.Out}, {a.DW, b.DW}, {a.Dst, b.Dst}, {a.Src, b.Src}, {a.DADst, b.DADst}, {a.DASrc, b.DASrc}, {a.DBias, b.DBias}} {
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
	RunTasks(t, b, Tasks(7, 60, 50, 16), rounds)
}

// RunTasks runs reqs rounds times through b, concurrently, and fails t unless each result
// equals dispatch.Execute's (on a Clone) in this process bit for bit.
func RunTasks(t testing.TB, b dispatch.Backend, reqs []dispatch.TaskRequest, rounds int) {
	t.Helper()
	want := make([]dispatch.TaskResult, len(reqs))
	for i := range reqs {
		var err error
		local := Clone(reqs[i])
		if want[i], err = dispatch.Execute(&local, nil); err != nil {
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
