package graphserver

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// evaluator runs evaluation passes: the forward pass without dropout, layer by layer, with a
// full ghost exchange after each layer. It has its own buffers, so it runs beside training;
// the coordinator runs one evaluation at a time.
type evaluator struct {
	lay     *layout
	model   variant
	peers   *peers
	weights *weightCache
	bufs    []passBuffers // [layer]
	send    [][]float32   // [peer]

	mu      sync.Mutex
	arrived map[[2]int]int // (evaluation, layer) → peers whose rows are in
	changed chan struct{}  // closed and replaced on every arrival
}

func newEvaluator(lay *layout, m variant, ps *peers, w *weightCache) *evaluator {
	e := &evaluator{lay: lay, model: m, peers: ps, weights: w, arrived: map[[2]int]int{}, changed: make(chan struct{}),
		send: make([][]float32, lay.parts)}
	rows := lay.part.Owned + len(lay.part.Ghosts)
	dmax := 0
	for l := range lay.layers() {
		d := lay.dims[l+1]
		dmax = max(dmax, lay.widths[l])
		b := passBuffers{p: tensor.NewDense(rows, d), z: tensor.NewDense(lay.part.Owned, d)}
		if h := lay.widths[l] - d; h > 0 {
			b.scores = tensor.NewDense(rows, h)
		}
		if l > 0 {
			b.in = e.bufs[l-1].z
		}
		e.bufs = append(e.bufs, b)
	}
	for q, rows := range lay.part.SendTo {
		e.send[q] = make([]float32, len(rows)*dmax)
	}
	return e
}

// receive stores a peer's rows of layer l of evaluation id.
func (e *evaluator) receive(q, id, l int, b *rpc.RowsBatch) error {
	part := e.lay.part
	n := int(b.Data.Rows)
	if b.Offset != 0 || n != part.GhostsOf(q) {
		return fmt.Errorf("evaluation rows %d+%d of a ghost block of %d", b.Offset, n, part.GhostsOf(q))
	}
	if err := storeGhostRows(e.bufs[l].p, e.bufs[l].scores, e.lay.ghostRow(q, 0), n, b.Data.Data); err != nil {
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
		if n == e.lay.parts-1 {
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

// sharePublisher writes a partition's logits and embeddings (nil for one layer) and lists the
// files written.
type sharePublisher func(ctx context.Context, logits, emb *tensor.Dense) ([]*rpc.ExportedFile, error)

// run evaluates the weights of version v and returns this partition's counts; with publish
// set, it also publishes the partition's outputs and lists them in the report.
func (e *evaluator) run(ctx context.Context, id uint32, v uint64, publish sharePublisher) (*rpc.EvalReport, error) {
	b := e.lay
	w, err := e.weights.at(ctx, int(v))
	if err != nil {
		return nil, err
	}
	for l, pb := range e.bufs {
		err := fanOut(indices(len(b.ivs)), func(i int) error { return e.model.evalForward(ctx, i, l, w, pb) })
		if err != nil {
			return nil, err
		}
		if err := e.exchange(ctx, id, l); err != nil {
			return nil, err
		}
		if err := e.model.evalGather(ctx, l, pb); err != nil {
			return nil, err
		}
	}
	logits, err := e.model.logits(w, e.bufs[len(e.bufs)-1].z)
	if err != nil {
		return nil, err
	}
	rep := &rpc.EvalReport{From: uint32(b.self), Id: id, Correct: make([]uint64, 3), Loss: make([]float64, 2)}
	for i, rows := range b.part.Splits {
		if len(rows) > 0 {
			rep.Correct[i] = uint64(math.Round(tensor.Accuracy(logits, b.part.Labels, rows) * float64(len(rows))))
		}
		if i < 2 && len(rows) > 0 {
			if rep.Loss[i], err = model.LossForward(logits, b.part.Labels, rows, b.part.Totals[i], nil); err != nil {
				return nil, err
			}
		}
	}
	if publish != nil {
		var emb *tensor.Dense
		if L := len(e.bufs); L > 1 {
			emb = e.model.embeddings(w, e.bufs[L-1].in)
		}
		if rep.Files, err = publish(ctx, logits, emb); err != nil {
			return nil, fmt.Errorf("write the partition's outputs: %w", err)
		}
	}
	return rep, nil
}

// exchange sends every peer the rows of layer l of evaluation id that it holds as ghosts, and
// waits for theirs.
func (e *evaluator) exchange(ctx context.Context, id uint32, l int) error {
	b, pb := e.lay, e.bufs[l]
	d := b.widths[l]
	_, err := e.peers.push(ctx, func(q int) *rpc.RowsBatch {
		rows := b.part.SendTo[q]
		buf := packRows(e.send[q], rows, pb.p, pb.scores, d)
		return &rpc.RowsBatch{From: uint32(b.self), Flow: rpc.Flow_FLOW_EVAL,
			Task: &rpc.TaskRef{Partition: uint32(b.self), Epoch: id, Layer: uint32(l)},
			Data: &rpc.Tensor{Rows: uint32(len(rows)), Cols: uint32(d), Data: rpc.Float32Bytes(buf)}}
	})
	if err != nil {
		return err
	}
	return e.await(ctx, int(id), l)
}
