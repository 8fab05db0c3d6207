package graphserver

import (
	"fmt"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// store decodes a peer's rows of a training epoch below epochs into the slot of their epoch —
// SC_l's P_l rows, and pulling gradients the dZ rows a loss or ∇AV_l ships (rowsLayer), or
// pushing them ∇SC_l's contributions — and returns the remote task that sent them.
func (b *layout) store(bt *rpc.RowsBatch, epochs int) (pipeline.Task, error) {
	q, t, n := int(bt.From), bt.Task, int(bt.Data.Rows)
	if int(t.Partition) != q || int(t.Interval) >= b.intervals || int(t.Epoch) >= epochs {
		return pipeline.Task{}, fmt.Errorf("task %v is not one of the sender's", t)
	}
	task := pipeline.Task{Partition: q, Interval: int(t.Interval), Epoch: int(t.Epoch), Layer: int(t.Layer), Kind: pipeline.Kind(t.Kind)}
	g, slot, ghost := b.global(q, task.Interval), task.Epoch%b.slots, b.ghostSlot(task.Epoch)
	switch l, dz := b.shipsDZ(task); {
	case bt.Flow == rpc.Flow_FLOW_FORWARD && task.Kind == pipeline.KindSC:
		return task, b.storeGhosts(bt, task, rowsP, task.Layer, b.p[task.Layer][ghost], b.scoresOf(task.Layer, ghost))
	case bt.Flow == rpc.Flow_FLOW_GRADIENT && dz:
		return task, b.storeGhosts(bt, task, rowsDZ, l, b.dz[l][ghost], nil)
	case bt.Flow == rpc.Flow_FLOW_GRADIENT && task.Kind == pipeline.KindBackSC && !b.pulls():
		return task, b.storeContribution(&b.contrib[task.Layer][g][slot], bt, n, b.widths[task.Layer])
	}
	return task, fmt.Errorf("flow %v with task %v", bt.Flow, task)
}

// rowsLayer returns the layer of the rows a training batch of task t carries: dZ_{l-1} when a
// loss or ∇AV_l ships dZ rows, else t's layer.
func (b *layout) rowsLayer(t pipeline.Task) int {
	if l, ok := b.shipsDZ(t); ok {
		return l
	}
	return t.Layer
}

// storeGhosts decodes the rows of kind and layer l that remote task t ships to their ghost
// copies here into dst (and for a GAT their s_src into scores), at the batch's offset in the
// ghost block of t's partition, once it may write them (slotGuard.store).
func (b *layout) storeGhosts(bt *rpc.RowsBatch, t pipeline.Task, kind, l int, dst, scores *tensor.Dense) error {
	q, off, n := t.Partition, int(bt.Offset), int(bt.Data.Rows)
	if off+n > b.part.GhostsOf(q) {
		return fmt.Errorf("rows %d..%d of a ghost block of %d", off, off+n, b.part.GhostsOf(q))
	}
	if err := b.learnSegment(b.global(q, t.Interval), q, off, n); err != nil {
		return err
	}
	done, err := b.guard.store(kind, l, b.global(q, t.Interval), t.Epoch)
	if err != nil {
		return err
	}
	defer done()
	return storeGhostRows(dst, scores, b.ghostRow(q, off), n, bt.Data.Data)
}

// storeContribution decodes n pushed gradient rows of width d, and their owned row ids, into c.
func (b *layout) storeContribution(c *contribution, bt *rpc.RowsBatch, n, d int) error {
	if len(bt.Rows) != 4*n {
		return fmt.Errorf("%d row ids for %d rows", len(bt.Rows)/4, n)
	}
	c.rows = slices.Grow(c.rows[:0], n)[:n]
	if err := rpc.DecodeInt32s(c.rows, bt.Rows); err != nil {
		return err
	}
	for k, r := range c.rows {
		if r < 0 || int(r) >= b.part.Owned || (k > 0 && r <= c.rows[k-1]) {
			return fmt.Errorf("gradient row %d out of range or order", r)
		}
	}
	if c.data == nil || cap(c.data.Data) < n*d {
		c.data = tensor.NewDense(n, d)
	}
	c.data.Rows, c.data.Cols, c.data.Data = n, d, c.data.Data[:n*d]
	return bt.Data.DecodeInto(c.data)
}

// storeGhostRows decodes n received rows into rows base.. of p, and for a GAT (scores not
// nil) the s_src that follows each row into the same rows of scores.
func storeGhostRows(p, scores *tensor.Dense, base, n int, data []byte) error {
	if scores == nil {
		return rpc.DecodeFloat32s(p.Data[base*p.Cols:(base+n)*p.Cols], data)
	}
	w, h := 4*p.Cols, 4*scores.Cols
	if len(data) != n*(w+h) {
		return fmt.Errorf("%d bytes for %d rows of %d+%d values", len(data), n, p.Cols, scores.Cols)
	}
	for k := range n {
		row := data[k*(w+h) : (k+1)*(w+h)]
		if err := rpc.DecodeFloat32s(p.Row(base+k), row[:w]); err != nil {
			return err
		}
		if err := rpc.DecodeFloat32s(scores.Row(base+k), row[w:]); err != nil {
			return err
		}
	}
	return nil
}

// packRows copies rows of p, each followed by its row of scores if scores is not nil, into
// buf, d values per row.
func packRows(buf []float32, rows []int32, p, scores *tensor.Dense, d int) []float32 {
	buf = buf[:len(rows)*d]
	for k, r := range rows {
		n := copy(buf[k*d:(k+1)*d], p.Row(int(r)))
		if scores != nil {
			copy(buf[k*d+n:(k+1)*d], scores.Row(int(r)))
		}
	}
	return buf
}
