package graphserver

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// evaluator runs evaluation passes: the forward pass without dropout, layer by layer, with a
// full ghost exchange after each layer. It has its own buffers, so it runs beside training;
// the coordinator runs one evaluation at a time.
type evaluator struct {
	s    *server
	p    []*tensor.Dense // [layer]: P_l, owned then ghost rows
	z    []*tensor.Dense // [layer]: Z_l
	act  [][]model.Activation
	send [][]float32 // [peer]

	mu      sync.Mutex
	arrived map[[2]int]int // (evaluation, layer) → peers whose rows are in
	changed chan struct{}  // closed and replaced on every arrival
}

func newEvaluator(s *server) *evaluator {
	e := &evaluator{s: s, arrived: map[[2]int]int{}, changed: make(chan struct{}), send: make([][]float32, s.cfg.Partitions)}
	rows := s.part.Owned + len(s.part.Ghosts)
	dmax := 0
	for l := range s.model.Layers {
		d := s.dims[l+1]
		dmax = max(dmax, s.rowWidth(l))
		e.p = append(e.p, tensor.NewDense(rows, d))
		e.z = append(e.z, tensor.NewDense(s.part.Owned, d))
	}
	for range s.ivs {
		e.act = append(e.act, make([]model.Activation, s.model.Layers))
	}
	for q, rows := range s.part.SendTo {
		e.send[q] = make([]float32, len(rows)*dmax)
	}
	return e
}

// receive stores a peer's rows of layer l of evaluation id.
func (e *evaluator) receive(q, id, l int, b *rpc.RowsBatch) error {
	s := e.s
	n := int(b.Data.Rows)
	if b.Offset != 0 || n != s.part.GhostsOf(q) {
		return fmt.Errorf("evaluation rows %d+%d of a ghost block of %d", b.Offset, n, s.part.GhostsOf(q))
	}
	var scores *tensor.Dense
	if s.gat != nil {
		scores = s.gat.eval.ssrc[l]
	}
	if err := storeGhostRows(e.p[l], scores, s.part.Owned+s.part.GhostStart[q], n, b.Data.Data); err != nil {
		return err
	}
	e.mu.Lock()
	e.arrived[[2]int{id, l}]++
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
	return nil
}

// await waits until every peer's rows of layer l of evaluation id are in.
func (e *evaluator) await(ctx context.Context, id, l int) error {
	key := [2]int{id, l}
	for {
		e.mu.Lock()
		n, ch := e.arrived[key], e.changed
		if n == e.s.cfg.Partitions-1 {
			delete(e.arrived, key)
			e.mu.Unlock()
			return nil
		}
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// run evaluates the weights of version v and returns this partition's counts.
func (e *evaluator) run(ctx context.Context, id uint32, v uint64) (*rpc.EvalReport, error) {
	s := e.s
	w, err := s.weightsAt(ctx, int(v))
	if err != nil {
		return nil, err
	}
	for l := range s.model.Layers {
		err := each(indices(s.ivs), func(i int) error {
			iv := &s.ivs[i]
			if s.gat != nil {
				req := s.avGATRequest(i, l, 0, w, false)
				if l > 0 {
					req.Z = e.z[l-1].RowSlice(iv.Lo, iv.Hi)
				}
				ev := &s.gat.eval
				req.Op, req.Out, req.GATAct = dispatch.OpGATForward, e.p[l].RowSlice(iv.Lo, iv.Hi), &ev.act[i][l]
				req.OutDst, req.OutSrc = ev.sdst[l].RowSlice(iv.Lo, iv.Hi), ev.ssrc[l].RowSlice(iv.Lo, iv.Hi)
				_, err := s.cfg.Backend.Run(ctx, req)
				return err
			}
			req := dispatch.TaskRequest{Op: dispatch.OpForward, Model: s.model, Layer: l, RowOffset: s.part.Lo + iv.Lo,
				W: w[l], Out: e.p[l].RowSlice(iv.Lo, iv.Hi), Act: &e.act[i][l]}
			if l == 0 {
				req.Features = iv.feats
			} else {
				req.Z = e.z[l-1].RowSlice(iv.Lo, iv.Hi)
			}
			_, err := s.cfg.Backend.Run(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		d := s.rowWidth(l)
		var scores *tensor.Dense
		if s.gat != nil {
			scores = s.gat.eval.ssrc[l]
		}
		err = s.sendAll(ctx, func(q int) *rpc.RowsBatch {
			rows := s.part.SendTo[q]
			buf := e.send[q][:len(rows)*d]
			for k, r := range rows {
				n := copy(buf[k*d:(k+1)*d], e.p[l].Row(int(r)))
				if scores != nil {
					copy(buf[k*d+n:(k+1)*d], scores.Row(int(r)))
				}
			}
			return &rpc.RowsBatch{From: uint32(s.cfg.Partition), Flow: rpc.Flow_FLOW_EVAL,
				Task: &rpc.TaskRef{Partition: uint32(s.cfg.Partition), Epoch: id, Layer: uint32(l)},
				Data: &rpc.Tensor{Rows: uint32(len(rows)), Cols: uint32(d), Data: rpc.Float32Bytes(buf)}}
		})
		if err != nil {
			return nil, err
		}
		if err := e.await(ctx, int(id), l); err != nil {
			return nil, err
		}
		if s.gat != nil {
			if err := e.gatherGAT(ctx, l); err != nil {
				return nil, err
			}
			continue
		}
		tensor.SpMM(e.z[l], s.part.Adj, e.p[l])
	}
	logits := e.z[s.model.Layers-1]
	if g := s.gat; g != nil {
		L := s.model.Layers
		if err := g.cfg.OutputForward(logits, w[4*(L-1)+3], g.eval.logits); err != nil {
			return nil, err
		}
		logits = g.eval.logits
	}
	rep := &rpc.EvalReport{From: uint32(s.cfg.Partition), Id: id, Correct: make([]uint64, 3), Loss: make([]float64, 2)}
	for i, rows := range s.part.Splits {
		if len(rows) > 0 {
			rep.Correct[i] = uint64(math.Round(tensor.Accuracy(logits, s.part.Labels, rows) * float64(len(rows))))
		}
		if i < 2 && len(rows) > 0 {
			if rep.Loss[i], err = model.LossForward(logits, s.part.Labels, rows, s.part.Totals[i], nil); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// gatherGAT is the evaluation's AE_l and GA_l of a GAT: the attention coefficients of every
// interval's in-edges (no dropout), then Z_l.
func (e *evaluator) gatherGAT(ctx context.Context, l int) error {
	s, ev := e.s, &e.s.gat.eval
	err := each(indices(s.ivs), func(i int) error {
		iv, gi := &s.ivs[i], &s.gat.ivs[i]
		req := s.aeRequest(i, l, 0, ev.sdst[l].RowSlice(iv.Lo, iv.Hi), ev.ssrc[l], false)
		req.Out = ev.alpha[l].RowSlice(int(gi.e0), int(gi.e1))
		_, err := s.cfg.Backend.Run(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	tensor.EdgeAggregate(e.z[l], s.gat.adj, ev.alpha[l], nil, e.p[l])
	return nil
}
