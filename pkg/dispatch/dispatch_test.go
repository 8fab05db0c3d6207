package dispatch_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

var cfg = model.GCNConfig{InDim: 9, Hidden: 5, Classes: 3, Layers: 2, Dropout: 0.5}

func dense(rng *rand.Rand, r, c int) *tensor.Dense {
	d := tensor.NewDense(r, c)
	for i := range d.Data {
		d.Data[i] = float32(rng.NormFloat64())
	}
	return d
}

func sparse(rng *rand.Rand, r, c int) *tensor.CSR {
	m := &tensor.CSR{Rows: r, Cols: c, RowPtr: make([]int64, r+1)}
	for i := range r {
		for j := range c {
			if rng.IntN(3) == 0 {
				m.ColIdx = append(m.ColIdx, int32(j))
				m.Val = append(m.Val, rng.Float32())
			}
		}
		m.RowPtr[i+1] = int64(len(m.ColIdx))
	}
	return m
}

// requests returns one request of every kind for an interval of 7 rows.
func requests(rng *rand.Rand, feats graph.Features) []dispatch.TaskRequest {
	base := dispatch.TaskRequest{Model: cfg, RowOffset: 40, Key: model.DropoutKey(1, 2, 0), Train: true}
	fwd0 := base
	fwd0.Op, fwd0.Layer, fwd0.Features, fwd0.W = dispatch.OpForward, 0, feats, dense(rng, 9, 5)
	fwd1 := base
	fwd1.Op, fwd1.Layer, fwd1.Z, fwd1.W = dispatch.OpForward, 1, dense(rng, 7, 5), dense(rng, 5, 3)
	loss := dispatch.TaskRequest{Op: dispatch.OpLoss, Model: cfg, Z: dense(rng, 7, 3), Labels: []int32{0, 1, 2, -1, 1, 0, 2}, Rows: []int32{0, 2, 5}, Total: 10}
	back0 := fwd0
	back0.Op, back0.DP = dispatch.OpBackward, dense(rng, 7, 5)
	back1 := fwd1
	back1.Op, back1.DP = dispatch.OpBackward, dense(rng, 7, 3)
	return []dispatch.TaskRequest{fwd0, fwd1, loss, back0, back1}
}

// TestExecuteMatchesModel checks Execute against pkg/model's task functions called directly.
func TestExecuteMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := requests(rng, graph.Features{Sparse: sparse(rng, 7, 9)})
	for _, req := range reqs {
		got, err := dispatch.Execute(&req, nil)
		if err != nil {
			t.Fatalf("%v %d: %v", req.Op, req.Layer, err)
		}
		in := &model.AVInput{Layer: req.Layer, Features: req.Features, Z: req.Z, RowOffset: req.RowOffset, Key: req.Key, Train: req.Train}
		var act model.Activation
		switch req.Op {
		case dispatch.OpForward:
			want := tensor.NewDense(7, req.W.Cols)
			if err := cfg.AVForward(in, req.W, &act, want); err != nil {
				t.Fatal(err)
			}
			same(t, "P", got.Out, want)
		case dispatch.OpLoss:
			want := tensor.NewDense(7, 3)
			loss, _ := model.LossForward(req.Z, req.Labels, req.Rows, req.Total, want)
			same(t, "dZ", got.Out, want)
			if got.Loss != loss {
				t.Errorf("loss %v, want %v", got.Loss, loss)
			}
		case dispatch.OpBackward:
			_ = cfg.Activate(in, &act)
			dw := tensor.NewDense(req.W.Rows, req.W.Cols)
			var dz *tensor.Dense
			if req.Layer > 0 {
				dz = tensor.NewDense(7, req.W.Rows)
			}
			if err := cfg.AVBackward(in, req.W, &act, req.DP, dw, dz); err != nil {
				t.Fatal(err)
			}
			same(t, "dW", got.DW, dw)
			if dz != nil {
				same(t, "dZ", got.Out, dz)
			}
		}
	}
}

func same(t *testing.T, what string, got, want *tensor.Dense) {
	t.Helper()
	if got == nil || got.Rows != want.Rows || got.Cols != want.Cols || !slices.Equal(got.Data, want.Data) {
		t.Fatalf("%s differs", what)
	}
}

// TestWireRoundTrip runs every request through the cpu backend with and without the wire
// encoding, with sparse and dense features, and expects identical results.
func TestWireRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	plain, _ := cpu.New(cpu.Options{Workers: 2})
	wire, _ := cpu.New(cpu.Options{Workers: 2, Wire: true})
	ctx := context.Background()
	for _, feats := range []graph.Features{{Sparse: sparse(rng, 7, 9)}, {Dense: dense(rng, 7, 9)}} {
		for _, req := range requests(rng, feats) {
			a, err := plain.Run(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			req.Out = tensor.NewDense(1, 1) // a wrong-shaped buffer is refused, not overrun
			if _, err := wire.Run(ctx, req); !errors.Is(err, dispatch.ErrRequest) {
				t.Errorf("%v: wrong output buffer: %v", req.Op, err)
			}
			req.Out = nil
			b, err := wire.Run(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if a.Loss != b.Loss || (a.Out != nil) != (b.Out != nil) || (a.DW != nil) != (b.DW != nil) {
				t.Fatalf("%v: results differ", req.Op)
			}
			if a.Out != nil {
				same(t, "out", b.Out, a.Out)
			}
			if a.DW != nil {
				same(t, "dW", b.DW, a.DW)
			}
		}
	}
	if s := wire.Stats(); s.Calls != 20 {
		t.Errorf("stats count %d calls, want 20", s.Calls)
	}
}

// TestWireRefusals feeds the decoder other versions, truncations and corruptions.
func TestWireRefusals(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	req := requests(rng, graph.Features{Sparse: sparse(rng, 7, 9)})[0]
	b := dispatch.EncodeRequest(&req)
	for _, v := range []byte{dispatch.WireVersion - 1, dispatch.WireVersion + 1} {
		other := slices.Clone(b)
		other[4] = v
		if _, err := dispatch.DecodeRequest(other); !errors.Is(err, dispatch.ErrWireVersion) {
			t.Errorf("version %d: %v", v, err)
		}
	}
	for n := 0; n < len(b); n += 7 {
		if _, err := dispatch.DecodeRequest(b[:n]); err == nil {
			t.Fatalf("a request truncated to %d bytes decoded", n)
		}
	}
	for range 300 {
		c := slices.Clone(b)
		c[rng.IntN(len(c))] ^= byte(1 << rng.IntN(8))
		if r, err := dispatch.DecodeRequest(c); err == nil {
			_, _ = dispatch.Execute(&r, nil) // must return, not panic
		}
	}
}

// TestLatencyAndCancel checks that injected latency overlaps across workers and that a
// cancelled context stops a waiting call.
func TestLatencyAndCancel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	req := requests(rng, graph.Features{Dense: dense(rng, 7, 9)})[1]
	b, _ := cpu.New(cpu.Options{Workers: 4, Latency: 30 * time.Millisecond})
	start := time.Now()
	errs := make(chan error, 8)
	for range 8 {
		go func() { _, err := b.Run(context.Background(), req); errs <- err }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 60*time.Millisecond || took > 500*time.Millisecond {
		t.Errorf("8 calls of 30 ms on 4 workers took %v", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := b.Run(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled call: %v", err)
	}
}

// TestRowIDs: the rows' original ids travel on the wire and key the dropout masks (without
// them a request draws other masks); a wrong count or a negative id is a bad request.
func TestRowIDs(t *testing.T) {
	for _, req := range []dispatch.TaskRequest{remotetest.Tasks(1, 6, 5, 3)[0], remotetest.GATTasks(2, 4, 5, 2)[0], remotetest.GATTasks(2, 4, 5, 2)[2]} {
		want, err := dispatch.Execute(&req, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dispatch.DecodeRequest(dispatch.EncodeRequest(&req))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.RowIDs, req.RowIDs) {
			t.Fatalf("%v: row ids %v after the wire, want %v", req.Op, got.RowIDs, req.RowIDs)
		}
		res, err := dispatch.Execute(&got, nil)
		if err != nil {
			t.Fatal(err)
		}
		same(t, req.Op.String(), res.Out, want.Out)
		byOffset := req
		byOffset.RowIDs = nil
		if res, err := dispatch.Execute(&byOffset, nil); err != nil || slices.Equal(res.Out.Data, want.Out.Data) {
			t.Errorf("%v without row ids: %v, the same output", req.Op, err)
		}
		for _, ids := range [][]int32{req.RowIDs[1:], append([]int32{-1}, req.RowIDs[1:]...)} {
			bad := req
			bad.RowIDs = ids
			if _, err := dispatch.Execute(&bad, nil); !errors.Is(err, dispatch.ErrRequest) {
				t.Errorf("%v with row ids %v: %v, want a bad request", req.Op, ids, err)
			}
		}
	}
}

// TestCPUWorkerActivations: a backward task without the forward's activation recomputes it —
// the same dW and dZ as with the activation kept, even when the request claims one is kept
// and brings none; dense activations are computed a block of rows at a time, and the backend
// holds one scratch activation per core for sparse features, however many workers wait.
func TestCPUWorkerActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	reqs := requests(rng, graph.Features{Dense: dense(rng, 7, 9)})
	fwd1, back1 := reqs[1], reqs[4]
	act := &model.Activation{}
	if _, err := dispatch.Execute(&fwd1, act); err != nil {
		t.Fatal(err)
	}
	kept := back1
	kept.Act, kept.ActKept = act, true
	want, err := dispatch.Execute(&kept, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cpu.New(cpu.Options{Workers: 1})
	claimed := back1
	claimed.ActKept = true
	got, err := b.Run(t.Context(), claimed)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.DW.Data, want.DW.Data) || !slices.Equal(got.Out.Data, want.Out.Data) {
		t.Errorf("backward without the kept activation: dW %v dZ %v, want %v %v", got.DW.Data, got.Out.Data, want.DW.Data, want.Out.Data)
	}

	// Forward tasks of 4096 rows × 64 columns (1 MiB of activation each) allocate none of it.
	big := dispatch.TaskRequest{Op: dispatch.OpForward, Model: model.GCNConfig{InDim: 8, Hidden: 64, Classes: 4, Layers: 2, Dropout: 0.5},
		Layer: 1, Z: dense(rng, 4096, 64), W: dense(rng, 64, 4), Out: tensor.NewDense(4096, 4), Key: 1, Train: true}
	if _, err := b.Run(t.Context(), big); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 16 {
		if _, err := b.Run(t.Context(), big); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("16 forward tasks allocated %d KiB; their 1 MiB activations are computed a block at a time", n>>10)
	}

	// 16 workers waiting out a latency together compute sparse features' activations in one
	// scratch per core: 16 tasks of 1 MiB of non-zeros at once on 2 cores allocate 2, not 16.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	many, _ := cpu.New(cpu.Options{Workers: 16, Latency: 5 * time.Millisecond})
	x := &tensor.CSR{Rows: 4096, Cols: 64, RowPtr: make([]int64, 4097), ColIdx: make([]int32, 4096*64), Val: make([]float32, 4096*64)}
	for i := range x.ColIdx {
		x.ColIdx[i], x.Val[i] = int32(i%64), rng.Float32()
	}
	for r := range x.Rows {
		x.RowPtr[r+1] = int64(64 * (r + 1))
	}
	sparseFwd := dispatch.TaskRequest{Op: dispatch.OpForward, Model: model.GCNConfig{InDim: 64, Hidden: 4, Classes: 4, Layers: 2, Dropout: 0.5},
		Features: graph.Features{Sparse: x}, W: dense(rng, 64, 4), Key: 1, Train: true}
	tasks := make([]dispatch.TaskRequest, 16)
	for i := range tasks {
		tasks[i] = sparseFwd
		tasks[i].Out = tensor.NewDense(4096, 4)
	}
	runtime.ReadMemStats(&before)
	var g errgroup.Group
	for _, task := range tasks {
		g.Go(func() error { _, err := many.Run(t.Context(), task); return err })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 3<<20 {
		t.Errorf("16 concurrent sparse forward tasks on 2 cores allocated %d KiB; want 2 scratch activations of 1 MiB", n>>10)
	}
}
