package dispatch_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

var gatCfg = model.GATConfig{InDim: 9, Hidden: 3, Heads: 2, OutHeads: 1, Classes: 4, Layers: 2, Dropout: 0.4, AttentionDropout: 0.3}

// edges returns 7 destinations' in-edges over 12 source columns, each with at least one.
func edges(rng *rand.Rand) *tensor.CSR {
	a := &tensor.CSR{Rows: 7, Cols: 12, RowPtr: make([]int64, 8)}
	for i := range 7 {
		for j := range 12 {
			if j == i || rng.IntN(3) == 0 {
				a.ColIdx = append(a.ColIdx, int32(j))
			}
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	return a
}

// gatRequests returns one request of every GAT op for an interval of 7 rows.
func gatRequests(rng *rand.Rand, feats graph.Features) []dispatch.TaskRequest {
	var out []dispatch.TaskRequest
	for l := range gatCfg.Layers {
		s := gatCfg.Shape(l)
		fwd := dispatch.TaskRequest{Op: dispatch.OpGATForward, GAT: gatCfg, Layer: l, RowOffset: 40, Key: model.DropoutKey(1, 2, l), Train: true,
			W: dense(rng, s.In, s.Width()), ADst: dense(rng, s.Heads, s.F), ASrc: dense(rng, s.Heads, s.F)}
		if l == 0 {
			fwd.Features = feats
		} else {
			fwd.Z, fwd.PrevBias = dense(rng, 7, s.In), dense(rng, 1, s.In)
		}
		back := fwd
		back.Op, back.P, back.DP, back.DDst, back.DSrc = dispatch.OpGATBackward, dense(rng, 7, s.Width()), dense(rng, 7, s.Width()), dense(rng, 7, s.Heads), dense(rng, 7, s.Heads)
		a := edges(rng)
		ids := make([]int32, a.Cols)
		for j := range ids {
			ids[j] = int32(100 + 3*j)
		}
		ae := dispatch.TaskRequest{Op: dispatch.OpEdgeForward, GAT: gatCfg, Layer: l, RowOffset: 40, Key: model.AttentionKey(1, 2, l), Train: true,
			Adj: a, DstScore: dense(rng, 7, s.Heads), SrcScore: dense(rng, a.Cols, s.Heads), SrcIDs: ids}
		aeBack := ae
		aeBack.Op, aeBack.DAlpha = dispatch.OpEdgeBackward, dense(rng, int(a.NNZ()), s.Heads)
		out = append(out, fwd, back, ae, aeBack)
	}
	return out
}

// TestExecuteGATMatchesModel checks the GAT ops against pkg/model's task functions.
func TestExecuteGATMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, req := range gatRequests(rng, graph.Features{Sparse: sparse(rng, 7, 9)}) {
		orig := req
		if req.DAlpha != nil {
			orig.DAlpha = req.DAlpha.Clone()
		}
		if req.DP != nil {
			orig.DP = req.DP.Clone()
		}
		got, err := dispatch.Execute(&req, nil)
		if err != nil {
			t.Fatalf("%v %d: %v", req.Op, req.Layer, err)
		}
		req = orig
		s := gatCfg.Shape(req.Layer)
		in := &model.AVInput{Layer: req.Layer, Features: req.Features, Z: req.Z, RowOffset: req.RowOffset, Key: req.Key, Train: req.Train}
		p := model.GATLayer{W: req.W, ADst: req.ADst, ASrc: req.ASrc}
		ae := &model.AEInput{Layer: req.Layer, Adj: req.Adj, DstScore: req.DstScore, SrcScore: req.SrcScore, SrcIDs: req.SrcIDs, RowOffset: req.RowOffset, Key: req.Key, Train: true}
		var act model.GATActivation
		switch req.Op {
		case dispatch.OpGATForward:
			v := gatCfg.NewVertex(req.Layer, 7)
			if err := gatCfg.AVForward(in, req.PrevBias, p, &act, v); err != nil {
				t.Fatal(err)
			}
			same(t, "P", got.Out, v.P)
			same(t, "s_dst", got.Dst, v.DstScore)
			same(t, "s_src", got.Src, v.SrcScore)
		case dispatch.OpGATBackward:
			if err := gatCfg.Activate(in, req.PrevBias, &act); err != nil {
				t.Fatal(err)
			}
			g := gatCfg.NewParams()[req.Layer]
			var dz, db *tensor.Dense
			if req.Layer > 0 {
				dz, db = tensor.NewDense(7, s.In), tensor.NewDense(1, s.In)
			}
			v := &model.GATVertex{P: req.P, DstScore: req.DDst, SrcScore: req.DSrc}
			dv := &model.GATVertex{P: req.DP, DstScore: req.DDst, SrcScore: req.DSrc}
			if err := gatCfg.AVBackward(in, p, g, &act, v, dv, dz, db); err != nil {
				t.Fatal(err)
			}
			same(t, "dW", got.DW, g.W)
			same(t, "da_dst", got.DADst, g.ADst)
			same(t, "da_src", got.DASrc, g.ASrc)
			if req.Layer > 0 {
				same(t, "dZ", got.Out, dz)
				same(t, "db", got.DBias, db)
			} else if got.Out != nil || got.DBias != nil {
				t.Error("∇AV_0 returned dZ or db")
			}
		case dispatch.OpEdgeForward:
			alpha := tensor.NewDense(int(req.Adj.NNZ()), s.Heads)
			if err := gatCfg.AEForward(ae, alpha); err != nil {
				t.Fatal(err)
			}
			same(t, "α̃", got.Out, alpha)
		case dispatch.OpEdgeBackward:
			dDst := tensor.NewDense(7, s.Heads)
			if err := gatCfg.AEBackward(ae, req.DAlpha, dDst); err != nil {
				t.Fatal(err)
			}
			same(t, "du", got.Out, req.DAlpha)
			same(t, "ds_dst", got.Dst, dDst)
		}
	}
}

// TestGATWireRoundTrip runs every GAT op through the cpu backend with and without the wire
// encoding, into preallocated destinations and without, and expects identical results.
func TestGATWireRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	plain, _ := cpu.New(cpu.Options{Workers: 2})
	wire, _ := cpu.New(cpu.Options{Workers: 2, Wire: true})
	ctx := context.Background()
	results := func(r dispatch.TaskResult) []*tensor.Dense {
		return []*tensor.Dense{r.Out, r.DW, r.Dst, r.Src, r.DADst, r.DASrc, r.DBias}
	}
	for _, feats := range []graph.Features{{Sparse: sparse(rng, 7, 9)}, {Dense: dense(rng, 7, 9)}} {
		for _, req := range gatRequests(rng, feats) {
			fresh := func() dispatch.TaskRequest { // the backward ops change DP and DAlpha in place
				r := req
				if r.DP != nil {
					r.DP = req.DP.Clone()
				}
				if r.DAlpha != nil {
					r.DAlpha = req.DAlpha.Clone()
				}
				return r
			}
			a, err := plain.Run(ctx, fresh())
			if err != nil {
				t.Fatalf("%v %d: %v", req.Op, req.Layer, err)
			}
			bad := fresh()
			bad.Out = tensor.NewDense(1, 1) // a wrong-shaped buffer is refused, not overrun
			if _, err := wire.Run(ctx, bad); !errors.Is(err, dispatch.ErrRequest) {
				t.Errorf("%v: wrong output buffer: %v", req.Op, err)
			}
			b, err := wire.Run(ctx, fresh())
			if err != nil {
				t.Fatal(err)
			}
			into := fresh()
			for _, d := range []struct {
				dst **tensor.Dense
				src *tensor.Dense
			}{{&into.Out, a.Out}, {&into.DW, a.DW}, {&into.OutDst, a.Dst}, {&into.OutSrc, a.Src}, {&into.DADst, a.DADst}, {&into.DASrc, a.DASrc}, {&into.DBias, a.DBias}} {
				if d.src != nil {
					*d.dst = tensor.NewDense(d.src.Rows, d.src.Cols)
				}
			}
			c, err := wire.Run(ctx, into)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range results(a) {
				for _, got := range []*tensor.Dense{results(b)[i], results(c)[i]} {
					if (want == nil) != (got == nil) || (want != nil && !slices.Equal(got.Data, want.Data)) {
						t.Fatalf("%v layer %d: result %d differs through the wire", req.Op, req.Layer, i)
					}
				}
				if want != nil && results(c)[i] != *[]**tensor.Dense{&into.Out, &into.DW, &into.OutDst, &into.OutSrc, &into.DADst, &into.DASrc, &into.DBias}[i] {
					t.Fatalf("%v layer %d: result %d not written into its destination", req.Op, req.Layer, i)
				}
			}
		}
	}
}

// TestGATRequestRefusals checks that malformed GAT requests get ErrRequest, and that corrupted
// wire bytes never make Execute panic.
func TestGATRequestRefusals(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	reqs := gatRequests(rng, graph.Features{Sparse: sparse(rng, 7, 9)})
	breakers := []func(r *dispatch.TaskRequest){
		func(r *dispatch.TaskRequest) { r.GAT.Heads = 0 },
		func(r *dispatch.TaskRequest) { r.Layer = 5 },
		func(r *dispatch.TaskRequest) { r.W, r.Adj = dense(rng, 2, 2), nil },
		func(r *dispatch.TaskRequest) { r.ADst, r.SrcScore = dense(rng, 1, 1), dense(rng, 1, 1) },
		func(r *dispatch.TaskRequest) { r.SrcIDs, r.ASrc = []int32{1}, nil },
		func(r *dispatch.TaskRequest) {
			r.DP, r.DAlpha, r.Features, r.Z, r.DstScore = nil, nil, graph.Features{}, nil, nil
		},
	}
	for _, req := range reqs {
		for k, brk := range breakers {
			r := req
			brk(&r)
			if _, err := dispatch.Execute(&r, nil); !errors.Is(err, dispatch.ErrRequest) {
				t.Errorf("%v layer %d, breaker %d: %v", req.Op, req.Layer, k, err)
			}
		}
		b := dispatch.EncodeRequest(&req)
		for range 200 {
			c := slices.Clone(b)
			c[rng.IntN(len(c))] ^= byte(1 << rng.IntN(8))
			if r, err := dispatch.DecodeRequest(c); err == nil {
				_, _ = dispatch.Execute(&r, nil) // must return, not panic
			}
		}
	}
}
