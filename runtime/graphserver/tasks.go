package graphserver

import (
	"context"
	"fmt"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// runTask runs one task of a local interval; it returns the loss of the output layer's AV.
func (s *server) runTask(ctx context.Context, st pipeline.Started) (float64, error) {
	t := st.Task
	if s.gat != nil && t.Kind != pipeline.KindSC && t.Kind != pipeline.KindBackSC && t.Kind != pipeline.KindWU {
		return s.runGATTask(ctx, st)
	}
	iv := &s.ivs[t.Interval]
	slot, l := t.Epoch%s.slots, t.Layer
	L := s.model.Layers
	switch t.Kind {
	case pipeline.KindAV:
		if l == L {
			// The loss is a cheap per-row operation on logits that the Gather has just left in
			// this server's memory: it runs here, which saves every interval one tensor-task
			// round trip per epoch.
			res, err := dispatch.Execute(&dispatch.TaskRequest{
				Op: dispatch.OpLoss, Model: s.model, Z: iv.zOf(t.Epoch)[L-1], Labels: iv.labels, Rows: iv.train,
				Total: s.part.Totals[0], Out: iv.dzView[L-1][slot],
			}, nil)
			return res.Loss, err
		}
		w, err := s.weightsAt(ctx, st.Weights)
		if err != nil {
			return 0, err
		}
		req := s.avRequest(iv, t, w[l])
		req.Op, req.Out, req.Act = dispatch.OpForward, iv.pView[l][slot], &iv.act[l]
		s.pullWeight(&req, st.Weights)
		_, err = s.cfg.Backend.Run(ctx, req)
		return 0, err
	case pipeline.KindSC:
		return 0, s.scatter(ctx, t, iv, s.p[l][slot])
	case pipeline.KindGA:
		src, done := s.compose(s.p[l], s.compP[l], st.Reads, true)
		tensor.SpMMRows(iv.zOf(t.Epoch)[l], s.part.Adj, src, iv.Lo, iv.Hi)
		done()
	case pipeline.KindBackGA:
		if iv.GhostT.Rows > 0 {
			tensor.SpMM(iv.ghostC[l], iv.GhostT, s.dz[l][slot])
		}
	case pipeline.KindBackSC:
		return 0, s.scatterGradients(ctx, t, iv)
	case pipeline.KindBackAV:
		s.gatherGradients(iv, l, st.Reads)
		w, err := s.weightsAt(ctx, st.Weights)
		if err != nil {
			return 0, err
		}
		req := s.avRequest(iv, t, w[l])
		req.Op, req.DP, req.DW, req.Act = dispatch.OpBackward, iv.dp[l], iv.dwOf(t.Epoch)[l], &iv.act[l]
		if s.overlap {
			req.Act = &iv.backAct[l]
		}
		s.pullWeight(&req, st.Weights)
		if l > 0 {
			req.Out = iv.dzView[l-1][slot]
		}
		_, err = s.cfg.Backend.Run(ctx, req)
		return 0, err
	case pipeline.KindWU:
		return 0, s.pushGradients(ctx, t, st.Weights)
	}
	return 0, nil
}

// avRequest returns the request of AV_l or ∇AV_l of an interval in the task's epoch.
func (s *server) avRequest(iv *interval, t pipeline.Task, w *tensor.Dense) dispatch.TaskRequest {
	req := dispatch.TaskRequest{
		Model: s.model, Layer: t.Layer, RowOffset: s.part.Lo + iv.Lo,
		Key: model.DropoutKey(s.cfg.Seed, t.Epoch, t.Layer), Train: true, W: w,
	}
	if t.Layer == 0 {
		req.Features = iv.feats
	} else {
		req.Z = iv.zOf(t.Epoch)[t.Layer-1]
	}
	return req
}

// pullWeight names, in the pull data path, the task's weight by version and the parameter
// server that holds it, so that the function pulls it there: the server has pinned the
// version for the task's lifetime.
func (s *server) pullWeight(req *dispatch.TaskRequest, version int) {
	if s.cfg.Pull == nil {
		return
	}
	for i, sh := range s.shards {
		if slices.Contains(sh.layers, req.Layer) {
			req.WeightVersion, req.WeightSource = uint64(version), s.cfg.ParamServers[i]
		}
	}
}

// compose returns the buffer a Gather reads: the slot of the common epoch when every source
// (local intervals, and with ghosts the remote ones) is read at the same epoch, otherwise a
// composite holding each source's rows of its epoch. done returns the composite to its pool.
func (s *server) compose(slots []*tensor.Dense, pool *bufPool, reads []pipeline.Read, ghosts bool) (*tensor.Dense, func()) {
	return s.composeRows(slots, pool, reads, func(r pipeline.Read) (lo, hi int, ok bool) {
		switch q := r.From.Partition; {
		case q == s.cfg.Partition:
			return s.ivs[r.From.Interval].Lo, s.ivs[r.From.Interval].Hi, true
		case ghosts:
			seg := s.seg[s.global(q, r.From.Interval)]
			lo = s.part.Owned + s.part.GhostStart[q] + seg[0]
			return lo, lo + seg[1], true
		}
		return 0, 0, false
	})
}

// composeRows returns the slot of the common epoch when every read that rows accepts is of
// one epoch, otherwise a composite from pool holding each accepted read's rows [lo, hi) of its
// epoch. done returns the composite to its pool.
func (s *server) composeRows(slots []*tensor.Dense, pool *bufPool, reads []pipeline.Read, rows func(pipeline.Read) (lo, hi int, ok bool)) (*tensor.Dense, func()) {
	epoch, mixed := -1, false
	for _, r := range reads {
		if _, _, ok := rows(r); !ok {
			continue
		}
		if epoch >= 0 && r.Epoch != epoch {
			mixed = true
		}
		epoch = r.Epoch
	}
	if !mixed {
		return slots[max(epoch, 0)%s.slots], func() {}
	}
	comp := pool.get()
	d := comp.Cols
	for _, r := range reads {
		if lo, hi, ok := rows(r); ok {
			copy(comp.Data[lo*d:hi*d], slots[r.Epoch%s.slots].Data[lo*d:hi*d])
		}
	}
	return comp, func() { pool.put(comp) }
}

// gatherGradients computes dP_l of the interval's rows: the owned part of Âᵀ dZ_l from the
// local intervals' dZ_l rows, plus the contributions remote intervals pushed, each of the
// epoch the scheduler names.
func (s *server) gatherGradients(iv *interval, l int, reads []pipeline.Read) {
	src, done := s.compose(s.dz[l], s.compDZ[l], reads, false)
	dp := iv.dp[l]
	tensor.SpMMRows(dp, s.part.AdjLocal, src, iv.Lo, iv.Hi)
	done()
	s.eachContribution(iv, l, reads, func(i int, src []float32) {
		row := dp.Row(i)
		for j, v := range src {
			row[j] += v
		}
	})
}

// eachContribution calls add with every row of layer l's contributions that remote intervals
// pushed to the interval's rows, each of the epoch the scheduler names in reads; i is the row
// relative to the interval.
func (s *server) eachContribution(iv *interval, l int, reads []pipeline.Read, add func(i int, src []float32)) {
	for _, r := range reads {
		if r.From.Partition == s.cfg.Partition {
			continue
		}
		c := &s.contrib[l][s.global(r.From.Partition, r.From.Interval)][r.Epoch%s.slots]
		a, _ := slices.BinarySearch(c.rows, int32(iv.Lo))
		b, _ := slices.BinarySearch(c.rows, int32(iv.Hi))
		for k := a; k < b; k++ {
			add(int(c.rows[k])-iv.Lo, c.data.Row(k))
		}
	}
}

// scatter is SC_l: it sends the interval's P_l rows each peer holds as ghosts (a GAT's: each
// followed by its s_src row).
func (s *server) scatter(ctx context.Context, t pipeline.Task, iv *interval, src *tensor.Dense) error {
	scores := s.scoresOf(t.Layer, t.Epoch%s.slots)
	d := s.rowWidth(t.Layer)
	return s.sendAll(ctx, func(q int) *rpc.RowsBatch {
		rg := iv.Send[q]
		rows := s.part.SendTo[q][rg[0]:rg[1]]
		buf := iv.send[q][:len(rows)*d]
		for k, r := range rows {
			n := copy(buf[k*d:(k+1)*d], src.Row(int(r)))
			if scores != nil {
				copy(buf[k*d+n:(k+1)*d], scores.Row(int(r)))
			}
		}
		return &rpc.RowsBatch{From: uint32(s.cfg.Partition), Flow: rpc.Flow_FLOW_FORWARD, Task: taskRef(t), Offset: uint32(rg[0]),
			Data: &rpc.Tensor{Rows: uint32(len(rows)), Cols: uint32(d), Data: rpc.Float32Bytes(buf)}}
	})
}

// scatterGradients is ∇SC_l: it sends each peer the contributions of the interval's backward
// Gather to the rows that peer owns.
func (s *server) scatterGradients(ctx context.Context, t pipeline.Task, iv *interval) error {
	c := iv.ghostC[t.Layer]
	d := c.Cols
	return s.sendAll(ctx, func(q int) *rpc.RowsBatch {
		a, b := iv.TouchedStart[q], iv.TouchedStart[q+1]
		return &rpc.RowsBatch{From: uint32(s.cfg.Partition), Flow: rpc.Flow_FLOW_GRADIENT, Task: taskRef(t),
			Rows: rpc.Int32Bytes(iv.TouchedRows[a:b]),
			Data: &rpc.Tensor{Rows: uint32(b - a), Cols: uint32(d), Data: rpc.Float32Bytes(c.Data[a*d : b*d])}}
	})
}

// sendAll sends every peer the batch build returns for it, concurrently, and waits for all.
func (s *server) sendAll(ctx context.Context, build func(q int) *rpc.RowsBatch) error {
	errs := make(chan error, len(s.peers))
	for q, p := range s.peers {
		if q == s.cfg.Partition {
			continue
		}
		go func() {
			b := build(q)
			cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
			defer cancel()
			if _, err := p.client.PushRows(cctx, b); err != nil {
				errs <- fmt.Errorf("send rows to %s: %w", p.name, err)
				return
			}
			s.bytesSent.Add(uint64(len(b.Data.Data) + len(b.Rows)))
			errs <- nil
		}()
	}
	var first error
	for q := range s.peers {
		if q == s.cfg.Partition {
			continue
		}
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func taskRef(t pipeline.Task) *rpc.TaskRef {
	return &rpc.TaskRef{Partition: uint32(t.Partition), Interval: uint32(t.Interval), Epoch: uint32(t.Epoch), Layer: uint32(t.Layer), Kind: uint32(t.Kind)}
}
