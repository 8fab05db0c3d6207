package graphserver

import (
	"context"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// runner runs the tasks of the local intervals: SC, ∇SC and WU alike for every model, the
// others by the model.
type runner struct {
	lay    *layout
	model  variant
	peers  *peers
	shards *shards
	keep   *keeper
	// updates sums the gradients of groups of intervals into one push (nil: each interval
	// pushes its own)
	updates *updates
	// pushed receives a shard's new version and newest checkpoint after WU.
	pushed func(shard, version, checkpoint int)
}

// run runs one task of a local interval; it returns the loss of the output layer's AV and
// the bytes SC and ∇SC sent.
func (r *runner) run(ctx context.Context, st pipeline.Started) (loss float64, sent int64, err error) {
	t := st.Task
	iv := &r.lay.ivs[t.Interval]
	switch t.Kind {
	case pipeline.KindSC:
		sent, err = r.scatter(ctx, t, iv)
	case pipeline.KindBackSC:
		if !r.lay.pulls() {
			sent, err = r.scatterGradients(ctx, t, iv)
		}
	case pipeline.KindWU:
		err = r.update(ctx, st)
	default:
		if loss, err = r.model.run(ctx, st); err != nil {
			break
		}
		if l, ok := r.lay.shipsDZ(t); ok { // before the task is done: the scheduler counts the rows shipped then
			sent, err = r.ship(ctx, t, iv, rpc.Flow_FLOW_GRADIENT, r.lay.dz[l][t.Epoch%r.lay.slots], nil, r.lay.dims[l+1])
		}
	}
	return loss, sent, err
}

// update is WU: it pushes the interval's gradients, or adds them to its group's sum of the
// epoch and, the group's last, pushes that (at the version this interval's epoch pinned; an
// asynchronous parameter server applies a push to its newest weights whatever it was computed
// at).
func (r *runner) update(ctx context.Context, st pipeline.Started) error {
	t := st.Task
	grad := func(l int) *tensor.Dense { return r.model.gradient(t, l) }
	if r.updates != nil {
		sum := r.updates.add(t, grad)
		if sum == nil {
			return nil
		}
		defer r.updates.release(sum)
		grad = func(l int) *tensor.Dense { return sum[l] }
	}
	return r.shards.push(ctx, t, st.Weights, r.keep.load(), grad, r.pushed)
}

// scatter is SC_l: it sends the interval's P_l rows each peer holds as ghosts (a GAT's: each
// followed by its s_src row).
func (r *runner) scatter(ctx context.Context, t pipeline.Task, iv *interval) (int64, error) {
	b := r.lay
	slot := t.Epoch % b.slots
	return r.ship(ctx, t, iv, rpc.Flow_FLOW_FORWARD, b.p[t.Layer][slot], b.scoresOf(t.Layer, slot), b.widths[t.Layer])
}

// ship sends each peer the interval's rows of src (and, if not nil, of scores after each) that
// the peer holds as ghosts, d values a row, as rows of flow and task t.
func (r *runner) ship(ctx context.Context, t pipeline.Task, iv *interval, flow rpc.Flow, src, scores *tensor.Dense, d int) (int64, error) {
	b, send := r.lay, iv.sendBuffers(t)
	return r.peers.push(ctx, func(q int) *rpc.RowsBatch {
		rg := iv.Send[q]
		rows := b.part.SendTo[q][rg[0]:rg[1]]
		buf := packRows(send[q], rows, src, scores, d)
		return &rpc.RowsBatch{From: uint32(b.self), Flow: flow, Task: taskRef(t), Offset: uint32(rg[0]),
			Data: &rpc.Tensor{Rows: uint32(len(rows)), Cols: uint32(d), Data: rpc.Float32Bytes(buf)}}
	})
}

// scatterGradients is ∇SC_l: it sends each peer the contributions of the interval's backward
// Gather to the rows that peer owns.
func (r *runner) scatterGradients(ctx context.Context, t pipeline.Task, iv *interval) (int64, error) {
	c := iv.ghostC[t.Layer]
	d := c.Cols
	return r.peers.push(ctx, func(q int) *rpc.RowsBatch {
		lo, hi := iv.TouchedStart[q], iv.TouchedStart[q+1]
		return &rpc.RowsBatch{From: uint32(r.lay.self), Flow: rpc.Flow_FLOW_GRADIENT, Task: taskRef(t),
			Rows: rpc.Int32Bytes(iv.TouchedRows[lo:hi]),
			Data: &rpc.Tensor{Rows: uint32(hi - lo), Cols: uint32(d), Data: rpc.Float32Bytes(c.Data[lo*d : hi*d])}}
	})
}
