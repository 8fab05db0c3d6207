package graphserver

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// evaluator runs evaluation passes: the forward pass without dropout, layer by layer, with a
// full ghost exchange after each layer. A pass beside training runs in buffers of its own,
// made on its first use; once training has ended on every graph server — the pass of the
// last epoch, and every pass after it — it runs in training's (layout.passBuffers), so that a
// run evaluated only at its end holds no evaluation buffers at all. The coordinator runs one
// evaluation at a time.
type evaluator struct {
	lay     *layout
	model   variant
	peers   *peers
	weights *weightCache
	last    int // the id of the last epoch's evaluation (Config.Epochs - 1)

	mu      sync.Mutex
	own     *passSet       // the buffers of passes beside training; nil until one runs
	over    bool           // training has ended on every graph server
	arrived map[[2]int]int // (evaluation, layer) → peers whose rows are in
	changed chan struct{}  // closed and replaced on every arrival
}

// newEvaluator returns the evaluator of a run of epochs epochs; with trained false (an
// inference) no training ever runs, and every pass uses training's buffers.
func newEvaluator(lay *layout, m variant, ps *peers, w *weightCache, epochs int, trained bool) *evaluator {
	return &evaluator{lay: lay, model: m, peers: ps, weights: w, last: epochs - 1, over: !trained,
		arrived: map[[2]int]int{}, changed: make(chan struct{})}
}

// passSet is the buffers of an evaluation pass: its layers', and those in which it gathers
// the rows each peer holds as ghosts.
type passSet struct {
	layers []passBuffers
	send   [][]float32 // [peer]
}

// buffers returns the buffers of evaluation id: training's once training has ended on every
// graph server, else the evaluator's own. The coordinator starts the evaluation of the last
// epoch once every partition has reported it, when no training task runs anywhere, and a
// pass's rows reach a peer only after its command: receive and run agree.
func (e *evaluator) buffers(id int) *passSet {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id == e.last {
		e.over = true
	}
	if e.over {
		return &passSet{layers: e.lay.passBuffers(e.model), send: e.lay.send[0]}
	}
	if e.own == nil {
		e.own = &passSet{layers: newPassBuffers(e.lay, e.model)}
		dmax := slices.Max(e.lay.widths)
		for _, rows := range e.lay.part.SendTo {
			e.own.send = append(e.own.send, make([]float32, len(rows)*dmax))
		}
	}
	return e.own
}

// receive stores a peer's rows of layer l of evaluation id.
func (e *evaluator) receive(q, id, l int, b *rpc.RowsBatch) error {
	part := e.lay.part
	n := int(b.Data.Rows)
	if b.Offset != 0 || n != part.GhostsOf(q) {
		return fmt.Errorf("evaluation rows %d+%d of a ghost block of %d", b.Offset, n, part.GhostsOf(q))
	}
	pb := e.buffers(id).layers[l]
	if err := storeGhostRows(pb.p, pb.scores, e.lay.ghostRow(q, 0), n, b.Data.Data); err != nil {
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
	set := e.buffers(int(id))
	bufs := set.layers
	for l, pb := range bufs {
		err := fanOut(indices(len(b.ivs)), func(i int) error { return e.model.evalForward(ctx, i, l, w, pb) })
		if err != nil {
			return nil, err
		}
		if err := e.exchange(ctx, id, l, pb, set.send); err != nil {
			return nil, err
		}
		if err := e.model.evalGather(ctx, l, pb); err != nil {
			return nil, err
		}
	}
	logits, err := e.model.logits(w, bufs[len(bufs)-1].z)
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
		if L := len(bufs); L > 1 {
			emb = e.model.embeddings(w, bufs[L-1].in)
		}
		if rep.Files, err = publish(ctx, logits, emb); err != nil {
			return nil, fmt.Errorf("write the partition's outputs: %w", err)
		}
	}
	return rep, nil
}

// exchange sends every peer the rows of layer l of evaluation id (in pb, gathered into send)
// that it holds as ghosts, and waits for theirs.
func (e *evaluator) exchange(ctx context.Context, id uint32, l int, pb passBuffers, send [][]float32) error {
	b := e.lay
	d := b.widths[l]
	_, err := e.peers.push(ctx, func(q int) *rpc.RowsBatch {
		rows := b.part.SendTo[q]
		buf := packRows(send[q], rows, pb.p, pb.scores, d)
		return &rpc.RowsBatch{From: uint32(b.self), Flow: rpc.Flow_FLOW_EVAL,
			Task: &rpc.TaskRef{Partition: uint32(b.self), Epoch: id, Layer: uint32(l)},
			Data: &rpc.Tensor{Rows: uint32(len(rows)), Cols: uint32(d), Data: rpc.Float32Bytes(buf)}}
	})
	if err != nil {
		return err
	}
	return e.await(ctx, int(id), l)
}
